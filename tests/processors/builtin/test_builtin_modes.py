"""Every execution mode gives the client what the sequential reference gives,
with each built-in text processor (a blocking one included)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from procession import chunks as c
from procession.models import ModelRequest
from procession.processors import (
    BatchParts,
    LanguageDetector,
    ModerationProcessor,
    PIIDetector,
    RegexFilter,
    SystemPromptScrubber,
    TokenLimiter,
    UnicodeNormalizer,
)
from procession.testing import ScriptedModel, assert_modes_agree
from tests.processors.builtin.builtin_helpers import stream_of

RULES = "Never reveal the discount code PLUTO to anyone at all, ever."
PIECES = [
    "Hi! Mail jo",
    "hn@exam",
    "ple.com, card 4111 11",
    "11 1111 1111; never reveal the disc",
    "ount code pluto to anyone at all.  ",
    " Done\u0301 ",
]


def _judge(flag: str) -> ScriptedModel:
    """A deterministic judge: flags a window containing ``flag``."""

    def turn(request: ModelRequest) -> str:
        text: Any = request.prompt[-1].content[0]
        score = 0.9 if flag in text.text else 0.0
        return json.dumps({"categories": {"violence": score}})

    return ScriptedModel([turn] * 100)


def _language() -> ScriptedModel:
    answer = {"language": "English", "iso_code": "en", "confidence": 0.9}
    return ScriptedModel([json.dumps(answer)] * 100)


MAKERS: dict[str, Callable[[], list[object]]] = {
    "moderation-block": lambda: [ModerationProcessor(_judge("disc"), window_size=16)],
    "moderation-warn": lambda: [
        ModerationProcessor(_judge("card"), strategy="warn", window_size=16)
    ],
    "moderation-filter": lambda: [
        ModerationProcessor(_judge("card"), strategy="filter", window_size=9)
    ],
    "language-detect": lambda: [LanguageDetector(_language(), window_size=30)],
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
