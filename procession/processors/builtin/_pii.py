"""``RegexFilter`` and ``PIIDetector``: deterministic pattern guards on input
messages, the output stream and tool results, however the text is split.

Both share ``_PatternGuard``: a ``PatternMatcher`` over their rules, a
``HoldBackWindow`` for the stream, and the four strategies, as Mastra names
them:

* ``"block"``: a tripwire. In the stream, the clean text before the match is
  released first and the tripwire comes with the next chunk, so the client
  sees the same text however the provider cut it (the match itself never);
* ``"warn"``: the text passes; each detection is reported to ``on_violation``
  (``args.report_violation``), nothing stops;
* ``"filter"``: an input message with a detection is dropped; in the stream the
  text block is cut off from the first detection to its end (what was shown
  before it cannot be taken back); a tool result becomes ``"[filtered]"``;
* ``"redact"``: each match is replaced (how depends on the processor).

Tripwire metadata and violations name the detection types and rules, never the
matched text (the tripwire chunk is sent to the client).
"""

from __future__ import annotations

import abc
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias

from ..._errors import ConfigurationError
from ...data import Message, TextPart
from .._contract import (
    ProcessInputArgs,
    Processor,
    ProcessOutputStreamArgs,
    ProcessToolResultArgs,
)
from ._patterns import PII_TYPES, PRESET_RULES, Detection, PatternMatcher, PatternRule
from ._window import HoldBackWindow

__all__ = [
    "PIIDetector",
    "RedactionMethod",
    "RegexFilter",
    "RegexPreset",
    "Strategy",
]

Strategy: TypeAlias = Literal["block", "warn", "filter", "redact"]
RedactionMethod: TypeAlias = Literal["mask", "hash", "remove", "placeholder"]
Phase: TypeAlias = Literal["input", "output", "all"]
RegexPreset: TypeAlias = Literal["pii", "secrets", "urls"]

_STRATEGIES: Final = ("block", "warn", "filter", "redact")
_METHODS: Final = ("mask", "hash", "remove", "placeholder")
_PRESET_TYPES: Final[Mapping[str, tuple[str, ...]]] = {
    "pii": ("email", "phone", "ssn", "credit-card"),
    "secrets": ("api-key",),
    "urls": ("url",),
}
_KEEP_LAST_FOUR: Final = frozenset({"credit-card", "phone", "ssn"})


def _choice(name: str, value: object, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ConfigurationError(
            f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}"
        )


def _names(detections: Iterable[Detection], attr: str) -> list[str]:
    return list(dict.fromkeys(getattr(d, attr) for d in detections))


class _PatternGuard(Processor, abc.ABC):
    """The machinery ``RegexFilter`` and ``PIIDetector`` share (see the module
    docstring). Subclasses set the reasons and how a match is replaced."""

    strategy: Strategy
    phase: Phase = "all"
    include_detections: bool = False

    def __init__(self, rules: Sequence[PatternRule], strategy: Strategy) -> None:
        _choice("strategy", strategy, _STRATEGIES)
        self.strategy = strategy
        self._matcher = PatternMatcher(rules)
        self._window = HoldBackWindow(self._scan, key=f"{self.id}:window")

    @property
    def rules(self) -> tuple[PatternRule, ...]:
        return self._matcher.rules

    # what subclasses say ---------------------------------------------------------

    @abc.abstractmethod
    def _reason(self, detections: Sequence[Detection], where: str) -> str:
        """The tripwire's or violation's reason for ``detections``."""

    @abc.abstractmethod
    def _replace(self, detection: Detection) -> str:
        """What a redacted ``detection`` becomes."""

    def _metadata(self, detections: Sequence[Detection]) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "types": _names(detections, "type"),
            "rules": [d.rule.name for d in detections],
            "strategy": self.strategy,
        }
        if self.include_detections:
            metadata["detections"] = [
                {"type": d.type, "rule": d.rule.name, "length": len(d.text)}
                for d in detections
            ]
        return metadata

    def _warn(self, args: Any, detections: Sequence[Detection], where: str) -> None:
        for detection in detections:  # one each: the count is split-invariant
            args.report_violation(
                self._reason([detection], where), self._metadata([detection])
            )

    def _redacted(
        self, text: str, detections: Sequence[Detection], start: int = 0
    ) -> str:
        out: list[str] = []
        pos = start
        for detection in detections:
            out.append(text[pos : detection.start])
            out.append(self._replace(detection))
            pos = detection.end
        out.append(text[pos:])
        return "".join(out)

    # input -------------------------------------------------------------------------

    def process_input(self, args: ProcessInputArgs) -> list[Message] | None:
        """Check every text part of the new input messages (one pass each)."""
        if self.phase == "output":
            return None
        found: list[Detection] = []
        dropped: set[str] = set()
        for message in args.messages:
            for part in message.content.parts:
                if not isinstance(part, TextPart):
                    continue
                detections = self._matcher.find_all(part.text)
                if not detections:
                    continue
                found.extend(detections)
                if self.strategy == "redact":
                    part.text = self._redacted(part.text, detections)
                elif self.strategy == "filter":
                    dropped.add(message.id)
            content = message.content.content
            if self.strategy == "redact" and isinstance(content, str):
                message.content.content = self._redacted(
                    content, self._matcher.find_all(content)
                )
        if not found:
            return None
        if self.strategy == "block":
            args.abort(self._reason(found, "input"), metadata=self._metadata(found))
        if self.strategy == "warn":
            self._warn(args, found, "input")
        if dropped:
            return [m for m in args.messages if m.id not in dropped]
        return None

    # tool results ----------------------------------------------------------------

    def process_tool_result(self, args: ProcessToolResultArgs) -> None:
        """Check every string in a tool's result before the model sees it."""
        if self.phase == "input":
            return
        found: list[Detection] = []
        result = self._walk(args.result, found)
        if not found:
            return
        if self.strategy == "block":
            args.abort(
                self._reason(found, "tool result"), metadata=self._metadata(found)
            )
        if self.strategy == "warn":
            self._warn(args, found, "tool result")
            return
        if self.strategy == "filter":
            result = "[filtered]"
        args.message_list.update_tool_invocation(
            {
                "type": "tool-invocation",
                "toolInvocation": {
                    "state": "result",
                    "toolCallId": args.tool_call_id,
                    "toolName": args.tool_name,
                    "args": args.args,
                    "result": result,
                },
            }
        )

    def _walk(self, value: Any, found: list[Detection]) -> Any:
        """``value`` with every string redacted; detections into ``found``."""
        if isinstance(value, str):
            detections = self._matcher.find_all(value)
            found.extend(detections)
            return self._redacted(value, detections) if detections else value
        if isinstance(value, Mapping):
            return {key: self._walk(item, found) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self._walk(item, found) for item in value]
        return value

    # the stream --------------------------------------------------------------------

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        """Text through the hold-back window; other chunks pass (see the module
        docstring for what each strategy does)."""
        if self.phase == "input":
            return args.part
        return self._window.process(args)

    def _scan(
        self,
        args: ProcessOutputStreamArgs,
        text: str,
        start: int,
        final: bool,
        memo: dict[str, Any],
    ) -> tuple[str, int]:
        if memo.get("filtered"):
            return "", len(text)
        detections, end = self._matcher.scan(text, start, final)
        if not detections:
            return text[start:end], end
        strategy = self.strategy
        if strategy == "redact":
            return self._redacted(text[:end], detections, start), end
        if strategy == "warn":
            self._warn(args, detections, "streaming content")
            return text[start:end], end
        first = detections[0].start
        if strategy == "filter":
            memo["filtered"] = True
            return text[start:first], len(text)
        reason = self._reason(detections[:1], "streaming content")
        metadata = self._metadata(detections[:1])
        if first == start:
            args.abort(reason, metadata=metadata)
        self._window.trip_after(args, reason, metadata)
        return text[start:first], len(text)


# --- RegexFilter ----------------------------------------------------------------


def _preset_rules(presets: Iterable[str], types: Sequence[str]) -> list[PatternRule]:
    wanted: list[str] = []
    for preset in presets:
        _choice("a preset", preset, tuple(_PRESET_TYPES))
        wanted.extend(_PRESET_TYPES[preset])
    wanted.extend(types)
    return [r for r in PRESET_RULES if r.type in wanted]


class RegexFilter(_PatternGuard):
    """Finds regular expressions in input, streamed output and tool results
    (Mastra's ``RegexFilterProcessor``), also when a match spans chunks.

    Options:

    * ``rules``: ``PatternRule``\\ s, or ``{"name", "pattern", "replacement"?}``
      dicts (Mastra's shape; other ``PatternRule`` fields may be given too);
    * ``presets``: ``"pii"`` (email, phone, SSN, credit card), ``"secrets"``
      (API keys and tokens of the common providers, JWTs, bearer tokens),
      ``"urls"``;
    * ``strategy``: ``"block"`` (default), ``"warn"``, ``"filter"``,
      ``"redact"`` (a rule's ``replacement``, else ``[REDACTED]``; a preset's
      is its placeholder, e.g. ``[EMAIL]``);
    * ``phase``: ``"input"`` (input messages), ``"output"`` (the stream and
      tool results) or ``"all"`` (default).

    Block reasons: ``Regex filter: blocked <content|streaming content|tool
    result> matching patterns: <names>``. Cost: one regex search per text delta
    over the held tail plus the delta (the window holds only the trailing run
    of characters a match could contain), one more per match.
    """

    id = "regex-filter"

    def __init__(
        self,
        rules: Iterable[PatternRule | Mapping[str, Any]] = (),
        *,
        presets: Iterable[RegexPreset] = (),
        strategy: Strategy = "block",
        phase: Phase = "all",
    ) -> None:
        _choice("phase", phase, ("input", "output", "all"))
        custom = [
            r if isinstance(r, PatternRule) else _rule_from_dict(r) for r in rules
        ]
        combined = [*custom, *_preset_rules(presets, ())]
        if not combined:
            raise ConfigurationError("RegexFilter requires at least one rule or preset")
        self.phase = phase
        self._custom = frozenset(r.name for r in custom)
        super().__init__(combined, strategy)

    def _reason(self, detections: Sequence[Detection], where: str) -> str:
        where = "content" if where == "input" else where
        names = ", ".join(dict.fromkeys(d.rule.name for d in detections))
        return f"Regex filter: blocked {where} matching patterns: {names}"

    def _replace(self, detection: Detection) -> str:
        rule = detection.rule
        if rule.replacement is not None:
            return rule.replacement
        return "[REDACTED]" if rule.name in self._custom else rule.placeholder


def _rule_from_dict(spec: Mapping[str, Any]) -> PatternRule:
    try:
        return PatternRule(**spec)
    except TypeError as error:
        raise ConfigurationError(
            f"a rule must be a PatternRule or a dict with 'name' and 'pattern' "
            f"(and optionally 'replacement', 'alphabet', 'max_length', "
            f"'lookahead', 'validate'); got {dict(spec)!r}: {error}"
        ) from None


# --- PIIDetector ----------------------------------------------------------------


class PIIDetector(_PatternGuard):
    """Finds personal data and secrets (Mastra's ``PIIDetector``, without the
    model): in input messages, the output stream (across chunks) and tool
    results. ``PIIDetector()`` redacts every preset type with masks.

    Options:

    * ``detection_types``: which types to look for (default ``PII_TYPES``:
      ``email``, ``phone``, ``credit-card`` (Luhn-checked; spaces, dashes or
      neither), ``ssn`` (US), ``iban`` (mod-97 checked), ``ip-address`` (IPv4
      and IPv6), ``api-key`` (Anthropic ``sk-ant-``, OpenAI ``sk-``/
      ``sk-proj-``, GitHub ``ghp_``/``github_pat_``, AWS ``AKIA``, Slack
      ``xoxb-``/``xoxp-``, Google ``AIza``, Stripe ``sk_live_``, JWTs, bearer
      tokens)); ``"url"`` may be added;
    * ``custom_patterns``: more ``PatternRule``\\ s (or dicts, as ``RegexFilter``);
    * ``strategy``: ``"redact"`` (default), ``"block"``, ``"warn"``, ``"filter"``;
    * ``redaction_method``: ``"mask"`` (default: ``*`` for letters and digits;
      card, phone and SSN keep their last four digits, an e-mail its first
      letter and top-level domain), ``"hash"`` (``[HASH:<8 hex of sha256>]``:
      for correlating, not for secrecy: a short number's hash is guessable),
      ``"remove"``, ``"placeholder"`` (``[EMAIL]``, ``[CREDIT_CARD]``...);
    * ``preserve_format``: masks keep separators (default True);
    * ``include_detections``: tripwire and violation metadata list each
      detection's type, rule and length (never its text);
    * ``model``, ``threshold``: Mastra's LLM second opinion. Planned, not here:
      passing a model raises ``ConfigurationError`` rather than ignoring it.

    Reasons: ``PII detected. Types: <types>`` (input, tool result) and ``PII
    detected in streaming content. Types: <types>``. Cost: as ``RegexFilter``
    with about 16 rules: a few µs per text delta (see the README's table).
    """

    id = "pii-detector"

    def __init__(
        self,
        *,
        detection_types: Iterable[str] = PII_TYPES,
        custom_patterns: Iterable[PatternRule | Mapping[str, Any]] = (),
        strategy: Strategy = "redact",
        redaction_method: RedactionMethod = "mask",
        preserve_format: bool = True,
        include_detections: bool = False,
        threshold: float = 0.6,
        model: Any = None,
    ) -> None:
        if model is not None:
            raise ConfigurationError(
                "PIIDetector(model=...): the LLM second opinion (at step level) is "
                "planned but not implemented yet; leave model out to use the "
                "deterministic detector alone"
            )
        _choice("redaction_method", redaction_method, _METHODS)
        types = list(detection_types)
        known = {r.type for r in PRESET_RULES}
        for name in types:
            _choice("a detection type", name, sorted(known))
        custom = [
            r if isinstance(r, PatternRule) else _rule_from_dict(r)
            for r in custom_patterns
        ]
        rules = [*_preset_rules((), types), *custom]
        if not rules:
            raise ConfigurationError(
                "PIIDetector needs at least one detection type or custom pattern"
            )
        self.detection_types = tuple(types)
        self.redaction_method = redaction_method
        self.preserve_format = preserve_format
        self.include_detections = include_detections
        self.threshold = threshold
        super().__init__(rules, strategy)

    def _reason(self, detections: Sequence[Detection], where: str) -> str:
        types = ", ".join(_names(detections, "type"))
        if where == "streaming content":
            return f"PII detected in streaming content. Types: {types}"
        return f"PII detected. Types: {types}"

    def _replace(self, detection: Detection) -> str:
        method = self.redaction_method
        if method == "placeholder":
            return detection.rule.placeholder
        if method == "remove":
            return ""
        if method == "hash":
            digest = hashlib.sha256(detection.text.encode()).hexdigest()[:8]
            return f"[HASH:{digest}]"
        return _mask(detection, self.preserve_format)


def _mask(detection: Detection, preserve_format: bool) -> str:
    text = detection.text
    if not preserve_format:
        return "*" * len(text)
    if detection.type == "email":
        local, _, domain = text.partition("@")
        head, dot, tld = domain.rpartition(".")
        return f"{local[:1]}{'*' * (len(local) - 1)}@{'*' * len(head)}{dot}{tld}"
    keep = 4 if detection.type in _KEEP_LAST_FOUR else 0
    out: list[str] = []
    for ch in reversed(text):
        if ch.isalnum():
            out.append(ch if keep > 0 else "*")
            keep -= 1
        else:
            out.append(ch)
    return "".join(reversed(out))
