"""``_JudgedGuard``: what the LLM-judged processors share (input, the output
stream in windows, the step, the result; strategies; the judge-error policy).

**Never per chunk.** On the output stream the judge is asked once per *window*:
``window_size`` characters of a text block, counted from the block's start, or
what is left of the block when it ends (``text-end``, or any chunk the
hold-back window flushes on: a tool call, ``step-finish``, ``finish``...).
Windows are cut by position in the text, never by chunk, so every split of a
text gives the judge the same windows and the client the same output: a block
of ``n`` characters costs ``ceil(n / window_size)`` judge calls however many
deltas carried it.

**Holding strategies** (``block``, ``filter``, and the rewriting ones:
``rewrite``, ``translate``) keep a window's text in a ``HoldBackWindow`` until
its verdict: a blocked window is never shown (the clean windows before it are,
then the tripwire), a filtered one is dropped, a rewritten one is replaced.
The client therefore sees text a window at a time, up to one judge call late.

**Running ahead** (``warn``, ``detect``): the text passes at once, unheld; the
windows are judged when their block ends (or the stream reaches a chunk that
would flush it) and each flagged window is reported to ``on_violation`` then.
This is the documented exception to the sequential-equivalence rule (SPEC):
the violation arrives after the text it is about, not with it.

**Judge errors** (a failed call, an answer with no JSON verdict, a verdict
missing its fields) are ``JudgeError``\\ s, logged as warnings with the
processor id; ``on_judge_error="allow"`` (default, Mastra's fail-open) lets the
text through, ``"block"`` ends the run with a tripwire whose reason is the
processor's failure reason (``Moderation failed: ...``).
"""

from __future__ import annotations

import abc
from collections import deque
from collections.abc import Collection, Sequence
from typing import Any, Final, Literal, TypeAlias

import attrs

from ..._errors import ConfigurationError, SnapshotError
from ..._secrets import get_logger
from ...data import Message, TextDeltaChunk, TextEndChunk, TextPart, message_text
from ...models import LanguageModel
from .._contract import (
    ProcessInputArgs,
    Processor,
    ProcessOutputResultArgs,
    ProcessOutputStepArgs,
    ProcessOutputStreamArgs,
)
from ._judge import Judge, JudgeError
from ._window import _DROPPING, _PASS_BY, HoldBackWindow

__all__ = ["Finding", "JudgedOutput", "OnJudgeError"]

logger = get_logger("procession")

JudgedOutput: TypeAlias = Literal["stream", "step", "result"]
"""Where an output-lane judged processor looks at the model's text: the stream
(in windows, default), each step's text once (``process_output_step``), or each
response message once at the end (``process_output_result``)."""
OnJudgeError: TypeAlias = Literal["allow", "block"]
"""What a judge failure does: let the text through (logged), or a tripwire."""

_HOLDING: Final = frozenset({"block", "filter", "rewrite", "translate"})
_REWRITING: Final = frozenset({"rewrite", "translate"})


@attrs.frozen(kw_only=True)
class Finding:
    """A verdict read by the processor: whether it ``flagged`` the text, the
    reason and metadata a tripwire or violation carries (never the text), the
    replacement a rewriting strategy uses (None: none offered), and ``detail``
    for annotations (``LanguageDetector``'s ``detect``)."""

    flagged: bool
    reason: str = ""
    metadata: dict[str, Any] = attrs.field(factory=dict)
    replacement: str | None = None
    detail: dict[str, Any] | None = None
    failed: bool = False
    """The judge failed and the policy is ``"block"``: a tripwire whatever the
    strategy."""


@attrs.define
class _Run:
    """One attempt's stream bookkeeping (reset when a retry begins)."""

    attempt: int
    unjudged: dict[str, str] = attrs.field(factory=dict)
    """Per text block, the text after its last full window."""
    ready: deque[tuple[int, Finding | None]] = attrs.field(factory=deque)
    """Verdicts for the windows the next scan releases, in order."""
    ahead: list[str] = attrs.field(factory=list)
    """Running ahead: full windows shown and not judged yet."""
    tripping: bool = False

    def __pause__(self) -> None:
        """Dropped when the run pauses (rebuilt for the next attempt), unless
        text is still waiting for its verdict: ``SnapshotError``."""
        if self.unjudged or self.ready or self.ahead or self.tripping:
            raise SnapshotError("text is still waiting for the judge's verdict")


class _JudgedGuard(Processor, abc.ABC):
    """The shared machinery (see the module docstring). Subclasses give the
    system prompt, read verdicts (``_assess``) and name their failures."""

    strategy: str
    window_size: int
    output: JudgedOutput
    on_judge_error: OnJudgeError
    min_text_length: int = 1
    _missing_replacement: Literal["drop", "keep"] = "drop"

    def __init__(
        self,
        model: LanguageModel | str | None,
        *,
        system: str,
        strategy: str,
        strategies: Collection[str],
        window_size: int,
        output: JudgedOutput,
        on_judge_error: OnJudgeError,
        judge: Any = None,
    ) -> None:
        if judge is None and not (
            isinstance(model, LanguageModel)
            or (isinstance(model, str) and "/" in model)
        ):
            raise ConfigurationError(
                f"{type(self).__name__} needs a model: a procession LanguageModel "
                f"(a provider's, or ScriptedModel in tests) or a "
                f"'provider/model-id' string; got {model!r}"
            )
        _choice("strategy", strategy, tuple(strategies))
        _choice("output", output, ("stream", "step", "result"))
        _choice("on_judge_error", on_judge_error, ("allow", "block"))
        if not isinstance(window_size, int) or window_size < 1:
            raise ConfigurationError(
                f"window_size must be a positive number of characters, got "
                f"{window_size!r}"
            )
        self.strategy = strategy
        self.window_size = window_size
        self.output = output
        self.on_judge_error = on_judge_error
        # ``judge`` replaces the model (LanguageDetector's offline detector).
        if judge is None:
            assert model is not None  # checked above
            judge = Judge(model, system, self.id)
        self.judge: Judge = judge
        self._key = f"{self.id}:judge"
        self._window = HoldBackWindow(self._scan, lookbehind=0, key=f"{self.id}:window")

    @property
    def judge_calls(self) -> int:
        """How many times the judge model was called (all runs together)."""
        return self.judge.calls

    # what subclasses say ---------------------------------------------------------

    @abc.abstractmethod
    def _assess(self, verdict: dict[str, Any], where: str) -> Finding:
        """Read ``verdict``; raise ``JudgeError`` when it lacks what is needed."""

    @abc.abstractmethod
    def _failure_reason(self, error: JudgeError) -> str:
        """The reason given when the judge failed (``error``)."""

    def _annotate(self, message: Message, finding: Finding) -> None:
        """``detect``: record ``finding`` on ``message`` (LanguageDetector)."""

    # judging -------------------------------------------------------------------------

    async def _verdict(self, text: str, where: str) -> Finding | None:
        """The judge's reading of ``text``, None when it failed open."""
        try:
            return self._assess(await self.judge.ask(text), where)
        except JudgeError as error:
            blocking = self.on_judge_error == "block"
            logger.warning("%s (%s)", error, "blocking" if blocking else "failing open")
            if not blocking:
                return None
            return Finding(
                flagged=True,
                reason=self._failure_reason(error),
                metadata={"error": error.problem, "strategy": self.strategy},
                failed=True,
            )

    def _act(self, args: Any, finding: Finding | None) -> str:
        """Apply the strategy to a whole text's verdict: ``"keep"``,
        ``"drop"`` or ``"replace"`` (``finding.replacement``). Blocks by
        raising (``args.abort``); ``warn`` reports and keeps."""
        if finding is None or not finding.flagged:
            return "keep"
        strategy = self.strategy
        if finding.failed or strategy == "block":
            args.abort(finding.reason, metadata=finding.metadata)
        if strategy in ("warn", "detect"):
            if strategy == "warn":
                args.report_violation(finding.reason, finding.metadata)
            return "keep"
        if strategy in _REWRITING and finding.replacement is not None:
            return "replace"
        if strategy in _REWRITING and self._missing_replacement == "keep":
            return "keep"
        return "drop"

    # input ---------------------------------------------------------------------------

    async def process_input(self, args: ProcessInputArgs) -> list[Message] | None:
        """Judge each new input message's text (one call per message).
        Checkpoints in each judge call; cancelled, nothing is changed."""
        dropped = await self._judge_messages(args, args.messages, "input")
        if not dropped:
            return None
        return [m for m in args.messages if m.id not in dropped]

    async def _judge_messages(
        self, args: Any, messages: Sequence[Message], where: str
    ) -> set[str]:
        """Judge and act on each message; the ids of the dropped ones."""
        dropped: set[str] = set()
        for message in messages:
            text = message_text(message)
            if len(text.strip()) < self.min_text_length:
                continue
            finding = await self._verdict(text, where)
            if finding is not None and self.strategy == "detect":
                self._annotate(message, finding)
            action = self._act(args, finding)
            if action == "drop":
                dropped.add(message.id)
            elif action == "replace":
                assert finding is not None
                assert finding.replacement is not None
                self._annotate(message, finding)
                _replace_text(message, finding.replacement)
        return dropped

    # step and result ---------------------------------------------------------------

    async def process_output_step(self, args: ProcessOutputStepArgs) -> None:
        """With ``output="step"``: judge the step's text once. The text was
        already streamed, so ``block`` ends the run (a tripwire) and every
        other strategy reports the violation. Checkpoints in the judge call."""
        if self.output != "step" or not args.text.strip():
            return
        finding = await self._verdict(args.text, "output")
        if finding is None or not finding.flagged:
            return
        if finding.failed or self.strategy == "block":
            args.abort(finding.reason, metadata=finding.metadata)
        args.report_violation(finding.reason, finding.metadata)

    async def process_output_result(self, args: ProcessOutputResultArgs) -> None:
        """With ``output="result"``: judge each assistant response message once;
        ``filter`` removes a flagged one from the conversation, a rewriting
        strategy replaces its text. Checkpoints in each judge call."""
        if self.output != "result":
            return
        assistant = [m for m in args.messages if m.role == "assistant"]
        dropped = await self._judge_messages(args, assistant, "output")
        if dropped:
            args.message_list.remove_by_ids(sorted(dropped))

    # the stream --------------------------------------------------------------------

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        """With ``output="stream"`` (default): text judged in windows (see the
        module docstring); other chunks pass. Checkpoints in each judge call
        (none for a chunk that completes no window)."""
        if self.output != "stream":
            return args.part
        run = args.state.get(self._key)
        if run is None or run.attempt != args.retry_count:
            run = args.state[self._key] = _Run(args.retry_count)
        if self.strategy not in _HOLDING:
            await self._run_ahead(args, run)
            return args.part
        if not run.tripping:
            await self._judge_due(args, run)
        try:
            return self._window.process(args)
        finally:
            run.ready.clear()

    def _due(self, run: _Run, part: Any) -> list[str]:
        """The windows ``part`` completes or ends, in the order the hold-back
        window will release them; updates ``run.unjudged``."""
        cls = part.__class__
        size = self.window_size
        if cls is TextDeltaChunk:
            block = part.payload.id
            text = run.unjudged.get(block, "") + part.payload.text
            count = len(text) // size
            run.unjudged[block] = text[count * size :]
            return [text[i * size : (i + 1) * size] for i in range(count)]
        if cls in _PASS_BY:
            return []
        if cls in _DROPPING:
            run.unjudged.clear()
            run.ahead.clear()
            return []
        if cls is TextEndChunk:
            rest = run.unjudged.pop(part.payload.id, "")
            return [rest] if rest else []
        # Any other chunk flushes every block, in the order they began.
        rests = [rest for rest in run.unjudged.values() if rest]
        run.unjudged.clear()
        return rests

    async def _judge_due(self, args: ProcessOutputStreamArgs, run: _Run) -> None:
        for window in self._due(run, args.part):
            finding = await self._verdict(window, "stream")
            run.ready.append((len(window), finding))
            if finding is not None and finding.flagged and self._blocks(finding):
                break  # the run ends at this window: nothing after it is asked

    def _blocks(self, finding: Finding) -> bool:
        return finding.failed or self.strategy == "block"

    async def _run_ahead(self, args: ProcessOutputStreamArgs, run: _Run) -> None:
        """``warn``/``detect``: nothing is held; full windows wait for their
        block's end, then each is judged and a flagged one reported."""
        part = args.part
        windows = self._due(run, part)
        if part.__class__ is TextDeltaChunk:
            run.ahead.extend(windows)
            return
        if not windows and not run.ahead:
            return
        due = [*run.ahead, *windows]
        run.ahead.clear()
        for window in due:
            finding = await self._verdict(window, "stream")
            if finding is None or not finding.flagged:
                continue
            if finding.failed:
                args.abort(finding.reason, metadata=finding.metadata)
            args.report_violation(finding.reason, finding.metadata)

    def _scan(
        self,
        args: ProcessOutputStreamArgs,
        text: str,
        start: int,
        final: bool,
        _memo: dict[str, Any],
    ) -> tuple[str, int]:
        """Release the windows that have a verdict, as the strategy says."""
        run: _Run = args.state[self._key]
        out: list[str] = []
        pos = start
        while run.ready and pos + run.ready[0][0] <= len(text):
            length, finding = run.ready.popleft()
            window = text[pos : pos + length]
            pos += length
            if finding is None or not finding.flagged:
                out.append(window)
                continue
            if self._blocks(finding):
                run.tripping = True
                released = "".join(out)
                if not released:
                    args.abort(finding.reason, metadata=finding.metadata)
                # The clean windows before it are shown however the text was
                # cut; the tripwire comes with the next chunk.
                self._window.trip_after(args, finding.reason, finding.metadata)
                return released, len(text)
            if self.strategy in _REWRITING and finding.replacement is not None:
                out.append(finding.replacement)
            elif self.strategy in _REWRITING and self._missing_replacement == "keep":
                out.append(window)
            # filter (or a rewrite with nothing to rewrite to): dropped
        if final:
            # Text without a verdict is never released by a holding strategy.
            pos = len(text)
        return "".join(out), pos


def _replace_text(message: Message, text: str) -> None:
    """``message``'s text becomes ``text`` (its first text part; other text
    parts removed), the rest of its parts kept."""
    parts: list[Any] = []
    placed = False
    for part in message.content.parts:
        if isinstance(part, TextPart):
            if not placed:
                parts.append(TextPart(text=text))
                placed = True
            continue
        parts.append(part)
    if not placed:
        parts.append(TextPart(text=text))
    message.content.parts = parts
    if isinstance(message.content.content, str):
        message.content.content = text


def _choice(what: str, value: object, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ConfigurationError(
            f"{what} must be one of {', '.join(map(repr, allowed))}; got {value!r}"
        )
