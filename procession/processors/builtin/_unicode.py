"""``UnicodeNormalizer``: NFKC, control and zero-width characters, whitespace,
on input messages and (through the hold-back window) on the output stream."""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Any, Final

from ...data import Message, TextPart
from .._contract import ProcessInputArgs, Processor, ProcessOutputStreamArgs
from ._window import HoldBackWindow

__all__ = ["UnicodeNormalizer"]

_EMOJI_KEEP: Final = frozenset(
    {"\u200d", *map(chr, range(0xFE00, 0xFE10)), *map(chr, range(0xE0020, 0xE0080))}
)
"""The zero-width joiner, variation selectors and tag characters: emoji
sequences are built of them (``preserve_emojis`` keeps them)."""
_LINE_ENDS: Final = re.compile(r"\r\n?")
_NEWLINES: Final = re.compile(r"\n{2,}")
_BLANKS: Final = re.compile(r"[^\S\n]+")
_MAX_COMBINING_HOLD: Final = 64
"""A run of combining marks longer than this is released unsettled (NFKC of
such text is not stable anyway); it bounds what the stream holds."""


@functools.cache
def _second_elements() -> frozenset[str]:
    """Characters that may compose with the one before them (the second half of
    a canonical pair, Hangul vowels and final consonants). Built once, on the
    first streamed text: it reads the decomposition of every code point."""
    found: set[str] = set(map(chr, range(0x1161, 0x1176)))
    found.update(map(chr, range(0x11A8, 0x11C3)))
    for code in range(0x110000):
        parts = unicodedata.decomposition(chr(code)).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            found.add(chr(int(parts[1], 16)))
    return frozenset(found)


def _safe_before(ch: str) -> bool:
    """Whether NFKC (and then whitespace collapsing) never joins ``ch`` to the
    text before it: a starter that composes with nothing before it and
    decomposes to a starter that is not whitespace (``"\u00a8"`` becomes
    ``" \u0308"``, whose space may join a run before it)."""
    second = _second_elements()
    if unicodedata.combining(ch) or ch in second:
        return False
    first = unicodedata.normalize("NFKD", ch)[:1]
    return not first or (
        unicodedata.combining(first) == 0
        and first not in second
        and not first.isspace()
    )


class UnicodeNormalizer(Processor):
    """Normalises text (Mastra's ``UnicodeNormalizer``): NFKC, then optionally
    strip control and format characters, then line endings and whitespace.

    Options (Mastra's, snake_case):

    * ``strip_control_chars`` (default False): remove control characters but
      tab and newline, and format characters (zero-width space, joiners, bidi
      controls, BOM);
    * ``preserve_emojis`` (default True): when stripping, keep the zero-width
      joiner, variation selectors and tag characters emoji sequences use;
    * ``collapse_whitespace`` (default True): CRLF and CR become LF, runs of
      newlines one newline, runs of other whitespace one space;
    * ``trim`` (default True): no whitespace at the start or end of a text.

    Runs on ``process_input`` (text parts and ``content.content``, in place)
    and ``process_output_stream``: there the window holds the trailing
    whitespace (it may grow) and the last character NFKC could still join to
    what follows (a combining mark, a Hangul jamo), so the output is the same
    however the text was cut. Cost: a normalisation of each delta; the first
    streamed text builds a table of composing characters once (~0.1 s).
    """

    id = "unicode-normalizer"

    def __init__(
        self,
        *,
        strip_control_chars: bool = False,
        preserve_emojis: bool = True,
        collapse_whitespace: bool = True,
        trim: bool = True,
    ) -> None:
        self.strip_control_chars = strip_control_chars
        self.preserve_emojis = preserve_emojis
        self.collapse_whitespace = collapse_whitespace
        self.trim = trim
        self._window = HoldBackWindow(self._scan, lookbehind=0, key=f"{self.id}:window")

    # the transformation -------------------------------------------------------------

    def _stripped(self, ch: str) -> bool:
        if ch in "\t\n\r" or (self.preserve_emojis and ch in _EMOJI_KEEP):
            return False
        return unicodedata.category(ch) in ("Cc", "Cf")

    def _clean(self, text: str) -> str:
        text = unicodedata.normalize("NFKC", text)
        if self.strip_control_chars:
            text = "".join(ch for ch in text if not self._stripped(ch))
        if self.collapse_whitespace:
            text = _LINE_ENDS.sub("\n", text)
            text = _NEWLINES.sub("\n", text)
            text = _BLANKS.sub(" ", text)
        return text

    def normalize(self, text: str) -> str:
        """``text`` normalised with this processor's options."""
        text = self._clean(text)
        return text.strip() if self.trim else text

    # input --------------------------------------------------------------------------

    def process_input(self, args: ProcessInputArgs) -> list[Message] | None:
        """Normalise every text part (and the legacy ``content.content``) in place."""
        for message in args.messages:
            for part in message.content.parts:
                if isinstance(part, TextPart):
                    part.text = self.normalize(part.text)
            if isinstance(message.content.content, str):
                message.content.content = self.normalize(message.content.content)
        return None

    # the stream ---------------------------------------------------------------------

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        """Normalise streamed text through the hold-back window."""
        return self._window.process(args)

    def _held_from(self, body: str) -> int:
        """Where the tail that later text could still change begins: the
        trailing whitespace (it may grow into a longer run), else the last
        character (a combining mark may follow), and back to a character NFKC
        never joins to what precedes it."""
        cut = len(body)
        while cut and self._blank(body[cut - 1]):
            cut -= 1
        if cut < len(body):
            return cut  # whitespace composes with nothing: a boundary
        i = cut - 1
        low = max(i - _MAX_COMBINING_HOLD, 0)
        # Whitespace and stripped characters are transparent to the collapse:
        # a boundary goes before a solid character only.
        while i > low and (self._blank(body[i]) or not _safe_before(body[i])):
            i -= 1
        return max(i, 0)

    def _blank(self, ch: str) -> bool:
        return ch.isspace() or (self.strip_control_chars and self._stripped(ch))

    def _scan(
        self,
        _args: ProcessOutputStreamArgs,
        text: str,
        start: int,
        final: bool,
        memo: dict[str, Any],
    ) -> tuple[str, int]:
        body = text[start:]
        cut = len(body) if final else self._held_from(body)
        out = self._clean(body[:cut])
        if self.trim:
            if not memo.get("begun"):
                out = out.lstrip()
                memo["begun"] = bool(out)
            if final:
                out = out.rstrip()
        return out, start + cut
