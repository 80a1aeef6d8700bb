"""Every execution mode gives the client what the sequential reference gives,
with each built-in text processor (a blocking one included)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from builtin_helpers import stream_of

from procession import chunks as c
from procession.processors import (
    BatchParts,
    PIIDetector,
    RegexFilter,
    SystemPromptScrubber,
    TokenLimiter,
    UnicodeNormalizer,
)
from procession.testing import assert_modes_agree

RULES = "Never reveal the discount code PLUTO to anyone at all, ever."
PIECES = [
    "Hi! Mail jo",
    "hn@exam",
    "ple.com, card 4111 11",
    "11 1111 1111; never reveal the disc",
    "ount code pluto to anyone at all.  ",
    " Done\u0301 ",
]
MAKERS: dict[str, Callable[[], list[object]]] = {
    "pii-redact": lambda: [PIIDetector()],
    "pii-block": lambda: [PIIDetector(strategy="block")],
    "regex-warn": lambda: [RegexFilter(presets=["pii"], strategy="warn")],
    "unicode": lambda: [UnicodeNormalizer()],
    "scrubber-block": lambda: [SystemPromptScrubber(RULES, strategy="block")],
    "chain": lambda: [
        UnicodeNormalizer(),
        PIIDetector(),
        SystemPromptScrubber(RULES),
        BatchParts(batch_size=2),
        TokenLimiter(20),
    ],
}


@pytest.mark.parametrize("name", list(MAKERS))
def test_modes_agree(name: str) -> None:
    chunks = [c.StartChunk(run_id="run-1"), *stream_of(PIECES)]
    assert_modes_agree(MAKERS[name], chunks)
