"""``procession demo``: three short agent conversations of one returning user,
streamed through a visible chain of processors, on a scripted model (no API
key, no network), with conversation memory in SQLite.

The chain:

* ``pii-detector`` (built-in, output stream): hides e-mail addresses even when
  one is split across chunks (its hold-back window keeps only the tail that
  could still become an address);
* ``regex-filter`` (built-in, output stream): trips the moment the model starts
  to reveal an internal password;
* ``quality-check`` (output step): asks for a retry, with feedback, when an
  answer is too thin;
* ``tool-result-scanner`` (tool result): scans what a tool returned for prompt
  injection, and masks a secret field before the model sees it.

The hand-written processors report what they did as a transient
``data-processor-event`` chunk, which the renderer shows inline; the third
conversation is answered from the thread's memory (the blocked second answer
was never saved).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections import Counter
from contextlib import AbstractAsyncContextManager
from typing import Any, TextIO

import attrs
import trio

from ._errors import ConfigurationError
from .chunks import (
    DataChunk,
    StepRetryChunk,
    StepStartChunk,
    TextDeltaChunk,
    TextDeltaPayload,
    TextEndChunk,
    TextEndPayload,
    TextStartChunk,
    TextStartPayload,
    ToolCallChunk,
    ToolResultChunk,
    TripwireChunk,
    Usage,
)
from .memory import Memory, SqliteStorage
from .models import LanguageModel, ModelFinish, ModelRequest
from .processors import (
    PatternRule,
    PIIDetector,
    Processor,
    ProcessOutputStepArgs,
    ProcessToolResultArgs,
    RegexFilter,
)
from .runtime import Agent, AgentResult
from .runtime.tools import ToolContext, tool
from .testing import Delay, ScriptedModel, tool_call_turn

__all__ = ["ServedDemoModel", "demo_agent", "demo_model", "run_demo"]


_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
_INJECTION = re.compile(r"ignore (all )?(previous|prior) instructions", re.IGNORECASE)


async def _event(args: Any, processor: str, message: str) -> None:
    await args.writer.custom(
        {
            "type": "data-processor-event",
            "data": {"processor": processor, "message": message},
            "transient": True,
        }
    )


class QualityCheck(Processor):
    """Retries a step whose answer is shorter than ``min_words`` words."""

    id = "quality-check"

    def __init__(self, min_words: int = 8) -> None:
        self.min_words = min_words

    async def process_output_step(self, args: ProcessOutputStepArgs) -> Any:
        if args.tool_calls:
            return None  # a tool step: the answer comes later
        words = len(args.text.split())
        if words < self.min_words:
            await _event(args, self.id, f"answer too thin ({words} words): retry")
            args.abort(
                f"the answer has {words} words; give a fuller answer",
                retry=True,
                metadata={"words": words},
            )
        await _event(args, self.id, f"answer accepted ({words} words)")
        return None


class ToolResultScanner(Processor):
    """Blocks tool output that tries to inject instructions; masks ``api_key``."""

    id = "tool-result-scanner"

    async def process_tool_result(self, args: ProcessToolResultArgs) -> Any:
        text = str(args.result)
        if _INJECTION.search(text):
            args.abort("blocked: the tool result tries to inject instructions")
        if isinstance(args.result, dict) and "api_key" in args.result:
            masked = {**args.result, "api_key": "[masked]"}
            args.message_list.update_tool_invocation(
                {
                    "type": "tool-invocation",
                    "toolInvocation": {
                        "state": "result",
                        "toolCallId": args.tool_call_id,
                        "toolName": args.tool_name,
                        "args": args.args,
                        "result": masked,
                    },
                }
            )
            await _event(args, self.id, "clean; masked the api_key field")
        else:
            await _event(args, self.id, "clean")
        return None


@attrs.frozen
class OrderQuery:
    order_id: str
    """The order number, e.g. A-1042."""


@tool
async def lookup_order(args: OrderQuery, ctx: ToolContext) -> dict[str, Any]:
    """Look up an order by its number."""
    await trio.sleep(0.05)
    return {
        "order_id": args.order_id,
        "status": "shipped",
        "carrier": "DHL",
        "contact": "dispatch@example.com",
        "api_key": "sk-live-9f8e7d",
    }


@tool(require_approval=True)
async def issue_refund(args: OrderQuery, ctx: ToolContext) -> dict[str, Any]:
    """Refund an order (a person approves each refund first)."""
    await trio.sleep(0.05)
    return {"order_id": args.order_id, "refunded": True}


def _streamed(text: str) -> list[Any]:
    """``text`` as a provider streams it: one delta per word, 30 ms apart; a
    ``|`` splits a word across two deltas."""
    out: list[Any] = [TextStartChunk(payload=TextStartPayload(id="t"))]
    pieces = [p for w in re.findall(r"\S+\s*", text) for p in w.split("|")]
    for piece in pieces:
        out += [
            Delay(0.03),
            TextDeltaChunk(payload=TextDeltaPayload(id="t", text=piece)),
        ]
    out.append(TextEndChunk(payload=TextEndPayload(id="t")))
    return out


def _demo_turns() -> dict[str, list[Any]]:
    """The demo's four scripted answers, by name (an e-mail address arrives
    split across two deltas, as providers do split them)."""
    usage = Usage(input_tokens=120, output_tokens=40, total_tokens=160)

    def done(reason: str) -> ModelFinish:
        return ModelFinish(finish_reason=reason, usage=usage)

    return {
        "tool": [
            *tool_call_turn("lookup_order", {"order_id": "A-1042"}),
            done("tool-calls"),
        ],
        "thin": [*_streamed("It shipped. "), done("stop")],
        "good": [
            *_streamed(
                "Good news: order A-1042 has shipped with DHL. If anything looks "
                "wrong, write to dispatch@exam|ple.com and quote the order number."
            ),
            done("stop"),
        ],
        "leak": [
            *_streamed(
                "Sure. To reset the router you need the internal password, "
                "which is hunter2, then hold the button."
            ),
            done("stop"),
        ],
        "remember": [
            *_streamed(
                "Yes, I remember: order A-1042 shipped with DHL and is on its way "
                "to you."
            ),
            done("stop"),
        ],
        "refund": [
            *tool_call_turn("issue_refund", {"order_id": "A-1042"}),
            done("tool-calls"),
        ],
        "refunded": [
            *_streamed("Done: order A-1042 is refunded, back on your card in 3 days."),
            done("stop"),
        ],
        "not-refunded": [
            *_streamed(
                "Understood: I have not refunded order A-1042; nothing changes."
            ),
            done("stop"),
        ],
    }


def demo_model() -> LanguageModel:
    """The scripted model behind the demo: conversation 1 is a tool call, a
    thin answer and a retried good one; conversation 2 trips the guardrail;
    conversation 3, the returning user, is answered from memory."""
    turns = _demo_turns()
    return ScriptedModel(
        [turns["tool"], turns["thin"], turns["good"], turns["leak"], turns["remember"]],
        provider="scripted",
        model_id="demo-support-model",
    )


class ServedDemoModel:
    """The demo's answers for ``procession serve`` with no target: each call
    picks the scripted turn that fits its prompt (a question about a router
    trips the guardrail; a refund calls ``issue_refund``, which waits for a
    person's approval; otherwise a tool call, a thin answer, then after the
    retry feedback the good one), so any number of chats can run."""

    provider = "scripted"
    model_id = "demo-support-model"

    def stream(self, request: ModelRequest) -> AbstractAsyncContextManager[Any]:
        """One call, answered from a fresh one-turn ``ScriptedModel``."""
        turns = _demo_turns()
        prompt = request.prompt
        users = [m for m in prompt if m.role == "user"]
        question = repr(users[-1].content).lower() if users else ""
        answered = prompt[-1] if prompt and prompt[-1].role == "tool" else None
        if "refund" in question:
            # A refund waits for a person; the model reads their answer.
            denied = answered is not None and "not approved" in repr(answered).lower()
            turn = turns[
                "refund"
                if answered is None
                else "not-refunded"
                if denied
                else "refunded"
            ]
        elif "router" in question or "password" in question:
            turn = turns["leak"]
        elif "remember" in question:
            turn = turns["remember"]
        elif not any(m.role == "tool" for m in prompt):
            turn = turns["tool"]
        elif any(m.role == "system" and "not accepted" in m.content for m in prompt):
            turn = turns["good"]
        else:
            turn = turns["thin"]
        model = ScriptedModel([turn], provider=self.provider, model_id=self.model_id)
        return model.stream(request)


def demo_agent(model: LanguageModel | None = None, **options: Any) -> Agent:
    """The demo's support agent and its processor chain: two built-ins (an
    e-mail redactor that catches an address split across deltas, a guardrail
    on a secret) and two hand-written processors."""
    return Agent(
        id="support-agent",
        instructions="You are a concise, friendly support agent.",
        model=model or demo_model(),
        tools=[lookup_order, issue_refund],
        output_processors=[
            PIIDetector(detection_types=["email"], redaction_method="placeholder"),
            RegexFilter(
                rules=[
                    PatternRule(
                        name="internal-password",
                        pattern=r"(?i)internal\s+password",
                        max_length=32,  # hold back no more than a match needs
                    )
                ],
                strategy="block",
            ),
            QualityCheck(),
            ToolResultScanner(),
        ],
        max_processor_retries=2,
        **options,
    )


# --- rendering -----------------------------------------------------------------


class _Style:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text

    def dim(self, text: str) -> str:
        return self("2", text)

    def bold(self, text: str) -> str:
        return self("1", text)

    def red(self, text: str) -> str:
        return self("31;1", text)

    def green(self, text: str) -> str:
        return self("32", text)

    def yellow(self, text: str) -> str:
        return self("33", text)

    def cyan(self, text: str) -> str:
        return self("36", text)

    def magenta(self, text: str) -> str:
        return self("35", text)


class _Wrap:
    """Wraps streamed text at word boundaries to the terminal's width (a delta
    may end mid-word: the column carries over between deltas)."""

    def __init__(self, width: int | None) -> None:
        self.width = max(width, 20) if width is not None else None
        self.column = 0
        self.indent = 0

    def start(self, indent: int) -> None:
        self.column = self.indent = indent

    def fit(self, text: str) -> str:
        if self.width is None:
            return text
        out: list[str] = []
        for piece in re.split(r"(\s+)", text):
            if not piece:
                continue
            if piece.isspace():
                if "\n" in piece:
                    self.column = 0
                else:
                    self.column += len(piece)
                out.append(piece)
                continue
            if self.column + len(piece) > self.width and self.column > self.indent:
                # Break before the word: drop the space that led to it.
                while out and out[-1].isspace() and "\n" not in out[-1]:
                    out.pop()
                out.append("\n" + " " * self.indent)
                self.column = self.indent
            out.append(piece)
            self.column += len(piece)
        return "".join(out)


def _use_colour(choice: str, out: TextIO) -> bool:
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    return out.isatty()


async def _converse(
    agent: Agent,
    question: str,
    style: _Style,
    out: TextIO,
    events: Counter[str],
    width: int | None,
    memory: dict[str, str],
) -> AgentResult:
    out.write(style.bold(f"\nuser › {question}\n"))
    in_text = False
    held: list[str] = []  # processor events that arrive mid-sentence
    wrap = _Wrap(width)

    def newline() -> None:
        nonlocal in_text
        if in_text:
            out.write("\n")
            in_text = False
        for line in held:
            out.write(line)
        held.clear()

    remembered_shown = False
    shown: list[str] = []  # this text block's deltas
    async with agent.stream(question, memory=memory) as stream:
        async for chunk in stream:
            if not remembered_shown:
                remembered_shown = True
                earlier = stream.message_list.get.remembered.db()
                if earlier:
                    out.write(
                        style.cyan(
                            f"  ◷ memory: {len(earlier)} earlier message(s) of this "
                            f"thread loaded (a blocked answer is never saved)\n"
                        )
                    )
            match chunk:
                case TextDeltaChunk():
                    shown.append(chunk.payload.text)
                    if not in_text:
                        out.write(style.green("agent › "))
                        in_text = True
                        wrap.start(len("agent › "))
                    out.write(wrap.fit(chunk.payload.text))
                case StepStartChunk() | TextEndChunk():
                    # The built-in redactor's placeholders, in what was shown
                    # (a later processor may cut one across two deltas).
                    redacted = "".join(shown).count("[EMAIL]")
                    shown.clear()
                    if redacted:
                        events["pii-detector"] += redacted
                        held.append(
                            style.cyan(
                                f"  [pii-detector] redacted {redacted} e-mail "
                                f"address(es)\n"
                            )
                        )
                    newline()
                case ToolCallChunk():
                    newline()
                    call = chunk.payload
                    out.write(
                        style.magenta(f"  ⚙ calls {call.tool_name}({call.args})\n")
                    )
                case ToolResultChunk():
                    out.write(style.magenta(f"  ⚙ result {chunk.payload.result}\n"))
                case StepRetryChunk():
                    newline()
                    retry = chunk.payload
                    out.write(
                        style.yellow(
                            f"  ↺ step {retry.step_number + 1} retried "
                            f"(retry {retry.retry_count}): {retry.reason}\n"
                        )
                    )
                case TripwireChunk():
                    newline()
                    events[chunk.payload.processor_id or "?"] += 1
                    out.write(
                        style.red(
                            f"  ✖ blocked by {chunk.payload.processor_id}: "
                            f"{chunk.payload.reason}\n"
                        )
                    )
                case DataChunk(type="data-processor-event"):
                    events[chunk.data["processor"]] += 1
                    line = style.cyan(
                        f"  [{chunk.data['processor']}] {chunk.data['message']}\n"
                    )
                    if in_text:
                        held.append(line)  # shown when the sentence is done
                    else:
                        out.write(line)
            out.flush()
        newline()
        return await stream.result()


async def run_demo(
    out: TextIO | None = None,
    *,
    colour: str = "auto",
    mode: str = "adaptive",
    model: LanguageModel | None = None,
    width: int | None = None,
) -> list[AgentResult]:
    """Run the demo; write it to ``out`` (stdout by default). Returns the three
    conversations' results. Checkpoints throughout (the scripted model's
    delays sleep on trio's clock); cancellation propagates.

    The agent's text wraps at word boundaries to ``width`` columns: by default
    the terminal's width when ``out`` is a terminal, and not at all otherwise.
    """
    out = out or sys.stdout
    if width is None and out.isatty():
        width = shutil.get_terminal_size((80, 24)).columns
    style = _Style(_use_colour(colour, out))
    if mode not in ("adaptive", "fused", "actors"):
        raise ConfigurationError(
            f"mode must be 'adaptive', 'fused' or 'actors', got {mode!r}"
        )
    # A returning user: the conversations share one thread, kept in SQLite.
    memory = Memory(storage=SqliteStorage(":memory:"))
    agent = demo_agent(model, execution_mode=mode, memory=memory)
    # The first line, before any model is called: which model, and whether it
    # costs money.
    label = (
        "scripted (offline)"
        if model is None
        else f"{agent.model.provider}/{agent.model.model_id} (a real API: billed)"
    )
    out.write(f"model: {label}\n")
    out.write(style.bold("procession demo") + "\n")
    out.flush()
    out.write(
        style.dim(
            "output processors: pii-detector → regex-filter → quality-check → "
            f"tool-result-scanner; memory: SQLite; execution mode: {mode}\n"
        )
    )
    events: Counter[str] = Counter()
    thread = {"thread": "demo-thread", "resource": "demo-user"}
    results = [
        await _converse(agent, question, style, out, events, width, thread)
        for question in (
            "Where is my order A-1042?",
            "How do I reset the office router?",
            "I'm back. Do you remember my order?",
        )
    ]
    await memory.storage.aclose()
    out.write(style.bold("\nsummary\n"))
    for i, result in enumerate(results, 1):
        blocked = (
            f", blocked by {result.tripwire.processor_id}" if result.tripwire else ""
        )
        ending = (
            f"error: {result.error}"
            if result.error is not None
            else f"tokens={result.usage.total_tokens or 'n/a (cut off)'}"
        )
        out.write(
            f"  conversation {i}: finish={result.finish_reason}{blocked}, "
            f"steps={sum(1 for s in result.steps if s.finish_reason != 'retry')}, "
            f"retries={result.retry_count}, {ending}\n"
        )
    out.write("  processor actions: ")
    out.write(", ".join(f"{name} ×{count}" for name, count in sorted(events.items())))
    out.write("\n")
    return results
