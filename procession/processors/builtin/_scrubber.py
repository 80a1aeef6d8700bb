"""``SystemPromptScrubber``: catch the agent's own instructions leaking into
its output, across chunks and through small edits, without a model."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final, Literal, TypeAlias

import attrs

from ..._errors import ConfigurationError
from .._contract import Processor, ProcessOutputStreamArgs
from ._window import HoldBackWindow

__all__ = ["SystemPromptScrubber"]

ScrubStrategy: TypeAlias = Literal["block", "warn", "filter", "redact"]
_WORD: Final = re.compile(r"\w+")


@attrs.frozen
class _Grams:
    """The instructions' word n-grams, and every proper prefix of one."""

    size: int
    grams: frozenset[tuple[str, ...]]
    prefixes: frozenset[tuple[str, ...]]

    def __pause__(self) -> None:
        """Made from the instructions: dropped at a pause, made again."""

    @classmethod
    def of(cls, texts: Sequence[str], size: int) -> _Grams:
        grams: set[tuple[str, ...]] = set()
        for text in texts:
            words = [w.casefold() for w in _WORD.findall(text)]
            grams.update(
                tuple(words[i : i + size]) for i in range(len(words) - size + 1)
            )
        prefixes = {g[:k] for g in grams for k in range(1, size)}
        return cls(size, frozenset(grams), frozenset(prefixes))


class SystemPromptScrubber(Processor):
    """Detects the agent's instructions in its streamed output (Mastra's
    ``SystemPromptScrubber``, deterministic: no model, no per-chunk call).

    The output's words (case-folded; punctuation and whitespace ignored) are
    cut into n-grams of ``ngram_size`` words (default 4) and looked up among
    the instructions' n-grams. Hits at most ``max_gap`` n-grams apart
    (default: twice ``ngram_size``, so an edited or inserted word or two do not
    break a run) form a span; a span with ``min_ngrams`` hits (default 3:
    about six words quoted in order) is a leak. Strategies: ``"redact"``
    (default: the span becomes
    ``placeholder_text``, default ``[SYSTEM_PROMPT]``, or ``*``\\ s with
    ``redaction_method="mask"``), ``"block"`` (the clean text before the span,
    then a tripwire ``System prompt detected``), ``"filter"`` (the text block is
    cut off where the span begins), ``"warn"`` (a violation per span).

    ``instructions``: the text(s) to protect; by default the run's untagged
    system messages (the agent's instructions) at its first streamed chunk.
    The window holds only a span that may still grow into a leak, or the last
    words that begin an instructions n-gram, and the word being written.
    Cost: a tokenisation of the held text per delta (see the README's table).
    """

    id = "system-prompt-scrubber"

    def __init__(
        self,
        instructions: str | Sequence[str] | None = None,
        *,
        strategy: ScrubStrategy = "redact",
        redaction_method: Literal["placeholder", "mask"] = "placeholder",
        placeholder_text: str = "[SYSTEM_PROMPT]",
        ngram_size: int = 4,
        min_ngrams: int = 3,
        max_gap: int | None = None,
    ) -> None:
        if strategy not in ("block", "warn", "filter", "redact"):
            raise ConfigurationError(
                f"strategy must be 'block', 'warn', 'filter' or 'redact'; got "
                f"{strategy!r}"
            )
        if ngram_size < 1 or min_ngrams < 1:
            raise ConfigurationError(
                f"ngram_size and min_ngrams must be 1 or more, got {ngram_size!r} "
                f"and {min_ngrams!r}"
            )
        self.strategy = strategy
        self.redaction_method = redaction_method
        self.placeholder_text = placeholder_text
        self.ngram_size = ngram_size
        self.min_ngrams = min_ngrams
        self.max_gap = 2 * ngram_size if max_gap is None else max_gap
        if self.max_gap < ngram_size - 1:
            # Spans closer than an n-gram would overlap: a leak's last words
            # could then begin the next span.
            raise ConfigurationError(
                f"max_gap must be at least ngram_size - 1 ({ngram_size - 1}), got "
                f"{self.max_gap!r}"
            )
        texts = [instructions] if isinstance(instructions, str) else instructions
        self._fixed = None if texts is None else _Grams.of(list(texts), ngram_size)
        self._window = HoldBackWindow(self._scan, lookbehind=0, key=f"{self.id}:window")

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        """Text through the hold-back window (see the class docstring)."""
        return self._window.process(args)

    def _grams(self, args: ProcessOutputStreamArgs) -> _Grams:
        if self._fixed is not None:
            return self._fixed
        grams = args.state.get(f"{self.id}:grams")
        if grams is None:
            message_list = args.message_list
            system = [] if message_list is None else message_list.get_system_messages()
            grams = args.state[f"{self.id}:grams"] = _Grams.of(
                [m.content for m in system], self.ngram_size
            )
        assert isinstance(grams, _Grams)
        return grams

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
        grams = self._grams(args)
        size = grams.size
        words = [
            (m.group().casefold(), m.start(), m.end())
            for m in _WORD.finditer(text, start)
        ]
        if words and not final and words[-1][2] == len(text):
            words.pop()  # still being written
        names = [w for w, _, _ in words]
        hits = [
            i
            for i in range(len(words) - size + 1)
            if tuple(names[i : i + size]) in grams.grams
        ]
        evaluated = len(words) - size  # the last n-gram whose words are known
        spans: list[list[int]] = []  # [first hit, last hit, hits]
        for hit in hits:
            if spans and hit - spans[-1][1] <= self.max_gap:
                spans[-1][1] = hit
                spans[-1][2] += 1
            else:
                spans.append([hit, hit, 1])
        leaks = [
            (words[first][1], words[last + size - 1][2])
            for first, last, count in spans
            if count >= self.min_ngrams
        ]
        settle = len(text)
        if not final:
            if spans and evaluated < spans[-1][1] + self.max_gap:
                # The last span may still grow: hold it whole.
                first = spans[-1][0]
                settle = words[first][1]
                leaks = [leak for leak in leaks if leak[1] <= settle]
            else:
                settle = self._prefix_start(grams, names, words, text)
                if leaks:
                    settle = max(settle, leaks[-1][1])
        return self._release(args, text, start, settle, leaks, memo)

    @staticmethod
    def _prefix_start(
        grams: _Grams, names: list[str], words: list[tuple[str, int, int]], text: str
    ) -> int:
        """Where to hold from when no span is open: the first of the last words
        that begin an instructions n-gram, else the word being written."""
        size = grams.size
        for i in range(max(len(words) - size + 1, 0), len(words)):
            if tuple(names[i:]) in grams.prefixes:
                return words[i][1]
        last = _WORD.search(text, words[-1][2] if words else 0)
        return last.start() if last is not None else len(text)

    def _release(
        self,
        args: ProcessOutputStreamArgs,
        text: str,
        start: int,
        settle: int,
        leaks: list[tuple[int, int]],
        memo: dict[str, Any],
    ) -> tuple[str, int]:
        if not leaks:
            return text[start:settle], settle
        reason = "System prompt detected"
        if self.strategy == "warn":
            for _ in leaks:
                args.report_violation(reason, {"strategy": "warn"})
            return text[start:settle], settle
        first_start = leaks[0][0]
        if self.strategy == "block":
            if first_start == start:
                args.abort(reason, metadata={"strategy": "block"})
            self._window.trip_after(args, reason, {"strategy": "block"})
            return text[start:first_start], len(text)
        if self.strategy == "filter":
            memo["filtered"] = True
            return text[start:first_start], len(text)
        out: list[str] = []
        pos = start
        for begin, end in leaks:
            out.append(text[pos:begin])
            out.append(
                "*" * (end - begin)
                if self.redaction_method == "mask"
                else self.placeholder_text
            )
            pos = end
        out.append(text[pos:settle])
        return "".join(out), settle
