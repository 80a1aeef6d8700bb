"""Pattern rules, the presets (PII and secrets), and the matcher that scans
streamed text with them, deciding only what later text cannot change.

A ``PatternRule`` is a regular expression plus what the streaming matcher needs
to know to hold back as little as possible: the *alphabet* (a character class
every character of a match belongs to), the longest match (``max_length``) and
how far past a match the pattern looks ahead (``lookahead``). A match can then
only still grow inside the trailing run of alphabet characters, so the matcher
settles everything before that run (see ``PatternMatcher.scan``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Final

import attrs

from ..._errors import ConfigurationError

__all__ = [
    "PII_TYPES",
    "PRESET_RULES",
    "Detection",
    "PatternMatcher",
    "PatternRule",
    "iban_is_valid",
    "luhn_is_valid",
]

_DEFAULT_MAX_LENGTH: Final = 256
_HINT_BEHIND: Final = 8
"""How far before a match its rule's hint may sit (the window keeps as much
released text as context)."""


def _compile(value: str | re.Pattern[str]) -> re.Pattern[str]:
    if isinstance(value, re.Pattern):
        return value
    try:
        return re.compile(value)
    except (re.error, TypeError) as exc:
        raise ConfigurationError(
            f"pattern {value!r} is not a regular expression: {exc}"
        ) from exc


def _compile_class(value: str | None) -> re.Pattern[str] | None:
    return None if value is None else re.compile(f"(?:{value})*")


@attrs.frozen(kw_only=True)
class PatternRule:
    """One pattern to find in text.

    * ``name``: shown in reasons and detections (``"credit-card"``);
    * ``pattern``: a regular expression (string or compiled); a match must not
      be empty;
    * ``type``: the detection type it belongs to (default: ``name``); the
      presets group several rules under ``"api-key"``;
    * ``replacement``: the text a ``redact`` with placeholders puts instead
      (default ``[<TYPE>]``, e.g. ``[CREDIT_CARD]``);
    * ``alphabet``: a regex character class every character of a match belongs
      to (``r"[\\d -]"``); ``None`` means any character. The narrower, the less
      streamed text is held back;
    * ``max_length``: the longest match (default 256); a longer one may be
      missed when it arrives in pieces;
    * ``lookahead``: how many characters after a match the pattern looks at
      (1 for ``\\b`` or ``(?!\\w)``, the default);
    * ``validate``: a check on the matched text (Luhn, mod-97...); a match that
      fails it is not a detection;
    * ``hint``: a regex found in every match, or in the 8 characters before it
      (``"@"`` for e-mail addresses; ``"Bearer "`` before a token matched by a
      look-behind), searched first as a cheap filter: when every rule has
      one, text without any hint costs one quick search.
    """

    name: str
    pattern: re.Pattern[str] = attrs.field(converter=_compile)
    type: str = attrs.field()
    replacement: str | None = None
    alphabet: re.Pattern[str] | None = attrs.field(
        default=None, converter=_compile_class
    )
    max_length: int = _DEFAULT_MAX_LENGTH
    lookahead: int = 1
    validate: Callable[[str], bool] | None = None
    hint: str | None = None

    @type.default
    def _type(self) -> str:
        return self.name

    def __attrs_post_init__(self) -> None:
        if self.pattern.fullmatch(""):
            raise ConfigurationError(
                f"the pattern of rule {self.name!r} ({self.pattern.pattern!r}) "
                f"matches the empty string; a rule must match some text"
            )
        if self.max_length < 1 or self.lookahead < 0:
            raise ConfigurationError(
                f"rule {self.name!r}: max_length must be 1 or more and lookahead "
                f"0 or more, got {self.max_length!r} and {self.lookahead!r}"
            )

    @property
    def placeholder(self) -> str:
        """What ``redaction_method="placeholder"`` writes for this rule."""
        if self.replacement is not None:
            return self.replacement
        return f"[{self.type.upper().replace('-', '_')}]"


@attrs.frozen
class Detection:
    """One match of a rule: where it is in the scanned text, and what it is."""

    rule: PatternRule
    start: int
    end: int
    text: str

    @property
    def type(self) -> str:
        return self.rule.type


# --- validators ------------------------------------------------------------------


def luhn_is_valid(text: str) -> bool:
    """Whether the digits of ``text`` (13 to 19 of them) pass the Luhn check that
    card numbers carry."""
    digits = [int(ch) for ch in text if ch.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, digit in enumerate(reversed(digits)):
        if i % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def iban_is_valid(text: str) -> bool:
    """Whether ``text`` (spaces allowed) is an IBAN with a valid mod-97 check."""
    compact = text.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    digits = "".join(str(int(ch, 36)) for ch in moved)
    return int(digits) % 97 == 1


def _ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def _ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return sum(ch != ":" for ch in text) >= 3  # not "::" or "a::b"


def _phone(text: str) -> bool:
    digits = sum(ch.isdigit() for ch in text)
    return 10 <= digits <= 15


# --- presets ----------------------------------------------------------------------

# Alphabets shared by several rules: one trailing-run check each, per delta
# (a wider alphabet than a rule needs only ever holds a little more).
_WORDISH: Final = r"[\w.%+@~/=:-]"
_NUMERIC: Final = r"[\d +().-]"


def _key(name: str, prefix: str, body: str, max_length: int = 300) -> PatternRule:
    return PatternRule(
        name=name,
        type="api-key",
        pattern=rf"(?<![\w-]){prefix}{body}(?![\w-])",
        alphabet=_WORDISH,
        max_length=max_length,
        hint=prefix,
    )


PRESET_RULES: Final[tuple[PatternRule, ...]] = (
    PatternRule(
        name="email",
        pattern=r"(?<![\w.%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}"
        r"(?:\.[A-Za-z0-9-]{1,63}){0,6}\.[A-Za-z]{2,24}(?![\w-])",
        alphabet=_WORDISH,
        max_length=64 + 1 + 64 * 8,
        hint="@",
    ),
    PatternRule(
        name="credit-card",
        # 4-4-4-4(-3) and Amex 4-6-5, written with spaces, dashes or neither
        # (one separator throughout), then the Luhn check.
        pattern=r"(?<![\w-])\d{4}(?: \d{4} \d{4} \d{4}(?: \d{3})?"
        r"|-\d{4}-\d{4}-\d{4}(?:-\d{3})?|\d{12}(?:\d{3})?"
        r"| \d{6} \d{5}|-\d{6}-\d{5}|\d{11})(?![\w-])",
        alphabet=_NUMERIC,
        max_length=23,
        validate=luhn_is_valid,
        hint=r"\d",
    ),
    PatternRule(
        name="ssn",
        pattern=r"(?<![\w-])(?!000|666|9\d\d)\d{3}(?:-(?!00)\d{2}-|"
        r" (?!00)\d{2} )(?!0000)\d{4}(?![\w-])",
        alphabet=_NUMERIC,
        max_length=11,
        hint=r"\d",
    ),
    PatternRule(
        name="phone",
        # North American numbers, or international ones with a leading +.
        pattern=r"(?<![\w+])(?:\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,5}"
        r"|(?:\(\d{3}\) ?|\d{3}[ .-]?)\d{3}[ .-]?\d{4})(?![\w])",
        alphabet=_NUMERIC,
        max_length=40,
        validate=_phone,
        hint=r"\d",
    ),
    PatternRule(
        name="iban",
        pattern=r"(?<![\w])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?"
        r"(?![\w])",
        alphabet=r"[A-Z0-9 ]",
        max_length=42,
        validate=iban_is_valid,
        hint=r"[A-Z]{2}\d\d",
    ),
    PatternRule(
        name="ipv4",
        type="ip-address",
        pattern=r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\w)",
        alphabet=_WORDISH,
        max_length=15,
        validate=_ipv4,
        hint=r"\d\.",
    ),
    PatternRule(
        name="ipv6",
        type="ip-address",
        pattern=r"(?<![\w:.])(?=[0-9A-Fa-f:]{0,39}:[0-9A-Fa-f]{0,4}:)"
        r"[0-9A-Fa-f:]{2,39}(?![\w:])",
        alphabet=_WORDISH,
        max_length=46,  # the look-ahead at its start reads that far
        validate=_ipv6,
        hint=r"[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:",
    ),
    _key("anthropic-api-key", "sk-ant-", r"[A-Za-z0-9_-]{20,250}"),
    _key("openai-api-key", "sk-", r"(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,250}"),
    _key("github-token", "gh[pousr]_", r"[A-Za-z0-9]{36,251}"),
    _key("github-fine-grained-token", "github_pat_", r"\w{22,250}"),
    _key("aws-access-key", "(?:AKIA|ASIA)", r"[A-Z0-9]{16}", 20),
    _key("slack-token", "xox[bp]-", r"[A-Za-z0-9-]{10,250}"),
    _key("google-api-key", "AIza", r"[0-9A-Za-z_-]{35}", 39),
    _key("stripe-key", "[sr]k_live_", r"[A-Za-z0-9]{16,247}"),
    PatternRule(
        name="jwt",
        type="api-key",
        pattern=r"(?<![\w.-])eyJ[\w-]{5,2000}\.eyJ[\w-]{5,4000}\.[\w-]{10,2000}"
        r"(?![\w-])",
        alphabet=_WORDISH,
        max_length=8008,
        hint="eyJ",
    ),
    PatternRule(
        name="bearer-token",
        type="api-key",
        pattern=r"(?<=Bearer )[A-Za-z0-9._~+/-]{20,500}=*(?![\w.~+/=-])",
        alphabet=_WORDISH,
        max_length=600,
        hint="Bearer ",
    ),
    PatternRule(
        name="url",
        pattern=r"(?<![\w])https?://[^\s<>\"'`]{1,2000}(?<![.,;:!?)])",
        alphabet=r"[^\s<>\"'`]",
        max_length=2008,
        hint="https?://",
    ),
)
"""Every preset rule, in priority order (a longer match wins over a shorter one
at the same place; at the same length, the earlier rule)."""

PII_TYPES: Final = (
    "email",
    "phone",
    "credit-card",
    "ssn",
    "iban",
    "ip-address",
    "api-key",
)
"""The detection types ``PIIDetector`` looks for by default (``"url"`` is a
preset too, off by default)."""


# --- the matcher ------------------------------------------------------------------


def _reaches(
    rules: Sequence[PatternRule],
) -> tuple[tuple[re.Pattern[str] | None, int, int], ...]:
    """``(alphabet run, max_length, lookahead - 1)`` per group of rules sharing
    an alphabet and a lookahead (the matcher's per-delta loop reads tuples)."""
    grouped: dict[tuple[str | None, int], int] = {}
    for rule in rules:
        key = (rule.alphabet.pattern if rule.alphabet else None, rule.lookahead)
        grouped[key] = max(grouped.get(key, 0), rule.max_length)
    return tuple(
        (re.compile(alphabet) if alphabet else None, length, max(lookahead, 1) - 1)
        for (alphabet, lookahead), length in grouped.items()
    )


class PatternMatcher:
    """Finds the rules' matches in text that may still be growing.

    Matches are the leftmost, then longest, then the earliest rule's, and do not
    overlap; a match that fails its rule's ``validate`` is skipped and the
    search goes on one character later. The same text gives the same matches
    however it was cut into pieces (``scan``'s promise).
    """

    __slots__ = ("_hints", "_prefilter", "_reaches", "_rules")

    def __init__(self, rules: Iterable[PatternRule]) -> None:
        self._rules = tuple(rules)
        if not self._rules:
            raise ConfigurationError("a pattern matcher needs at least one rule")
        self._reaches = _reaches(self._rules)
        # One search over every rule finds where the first candidate could be;
        # a pattern with groups of its own (backreferences) cannot join it.
        plain = [r for r in self._rules if r.pattern.groups == 0]
        self._prefilter = (
            re.compile("|".join(_scoped(r.pattern) for r in plain))
            if len(plain) == len(self._rules)
            else None
        )
        hints = [r.hint for r in self._rules]
        self._hints = (
            re.compile("|".join(f"(?:{h})" for h in hints if h is not None))
            if all(h is not None for h in hints)
            else None
        )

    @property
    def rules(self) -> tuple[PatternRule, ...]:
        return self._rules

    def settled(self, text: str, start: int, final: bool) -> int:
        """The first position of ``text`` (from ``start``) whose match decisions
        later text could still change: the trailing run of a rule's alphabet
        (no further back than its ``max_length``), extended by its lookahead.
        ``len(text)`` when ``final``."""
        n = len(text)
        if final:
            return n
        hold = n
        for run, max_length, back in self._reaches:
            # A decision reads up to ``lookahead`` characters past a match, and
            # at least the one character that stopped it.
            limit = n - back
            if limit <= start:
                return start
            low = limit - max_length
            if low < start:
                low = start
            if run is None:
                cut = low
            else:
                found = run.match(text[low:limit][::-1])
                cut = limit - (found.end() if found is not None else 0)
            if cut < hold:
                hold = cut
        return hold

    def scan(self, text: str, start: int, final: bool) -> tuple[list[Detection], int]:
        """The matches settled in ``text[start:]`` and where the settled text
        ends (every match found ends before it).

        ``text[:start]`` is already settled context (look-behinds see it). Each
        match starting before ``settled(...)`` is final: it depends on no text
        after ``text``, because a match consists of alphabet characters only,
        and the matcher reads at most ``lookahead`` characters past one. The end
        is ``len(text)`` when ``final``.
        """
        hold = self.settled(text, start, final)
        found: list[Detection] = []
        pos = start
        while pos < hold:
            detection = self._next(text, pos, hold)
            if detection is None:
                break
            found.append(detection)
            pos = detection.end
        return found, max(pos, hold)

    def find_all(self, text: str) -> list[Detection]:
        """Every match in a complete ``text``."""
        return self.scan(text, 0, True)[0]

    def _next(self, text: str, pos: int, hold: int) -> Detection | None:
        hints = self._hints
        if hints is not None and hints.search(text, max(pos - _HINT_BEHIND, 0)) is None:
            return None  # every match has a hint in or just before it: none here
        if self._prefilter is not None:
            first = self._prefilter.search(text, pos)
            if first is None or first.start() >= hold:
                return None
            pos = first.start()
        best: Detection | None = None
        for rule in self._rules:
            match = rule.pattern.search(text, pos)
            while match is not None and match.start() < hold:
                if match.end() > match.start() and (
                    rule.validate is None or rule.validate(match.group())
                ):
                    break
                match = rule.pattern.search(text, match.start() + 1)
            if match is None or match.start() >= hold:
                continue
            if (
                best is None
                or match.start() < best.start
                or (match.start() == best.start and match.end() > best.end)
            ):
                best = Detection(rule, match.start(), match.end(), match.group())
        return best


_FLAGS: Final = (
    (re.ASCII, "a"),
    (re.IGNORECASE, "i"),
    (re.MULTILINE, "m"),
    (re.DOTALL, "s"),
    (re.VERBOSE, "x"),
)


_GLOBAL_FLAGS = re.compile(r"\A(?:\(\?[aiLmsux]+\))+")
"""Leading inline flag groups, ``(?i)``: already in ``pattern.flags``, and not
allowed in the middle of the combined expression."""


def _scoped(pattern: re.Pattern[str]) -> str:
    flags = "".join(letter for flag, letter in _FLAGS if pattern.flags & flag)
    body = _GLOBAL_FLAGS.sub("", pattern.pattern)
    return f"(?{flags}:{body})" if flags else f"(?:{body})"
