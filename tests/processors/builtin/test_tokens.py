"""``TokenLimiter``: input trimmed to a budget, output stopped or tripped."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from procession import ConfigurationError, TripWire
from procession.messages import Message, SystemMessage
from procession.processors import MessageList, ProcessInputArgs, TokenLimiter
from procession.processors.builtin import estimate_tokens
from procession.testing.strategies import text_splits
from tests.processors.builtin.builtin_helpers import client_text, run_pieces


@given(st.data())
def test_truncation_is_the_same_for_every_split(data: st.DataObject) -> None:
    text = data.draw(st.text(max_size=60))
    limit = data.draw(st.integers(min_value=1, max_value=12))
    run = run_pieces([TokenLimiter(limit)], data.draw(text_splits(text)))
    assert client_text(run.chunks) == text[: limit * 4]
    reached = [x for x in run.chunks if x.type == "data-token-limit-reached"]
    assert len(reached) == (1 if len(text) > limit * 4 else 0)


def test_abort_names_the_limit() -> None:
    run = run_pieces([TokenLimiter(2, strategy="abort")], ["abcdef", "ghij"])
    assert run.outcome.tripwire is not None
    assert run.outcome.tripwire.reason == "Token limit of 2 exceeded (current: 3)"
    assert client_text(run.chunks) == "abcdef"


def test_a_custom_counter_is_summed_per_delta() -> None:
    words = TokenLimiter(3, counter=lambda text: len(text.split()))
    run = run_pieces([words], ["one two ", "three ", "four five"])
    assert client_text(run.chunks) == "one two three "


def _args(*texts: str, system: str = "") -> ProcessInputArgs:
    messages = [Message.user(t) for t in texts]
    return ProcessInputArgs(
        processor_id="token-limiter",
        state={},
        messages=messages,
        system_messages=[SystemMessage(content=system)] if system else [],
        message_list=MessageList(),
    )


def test_input_keeps_the_newest_messages_that_fit() -> None:
    args = _args("a" * 40, "b" * 8, "c" * 8)  # 14, 6 and 6 tokens with overhead
    kept = TokenLimiter(12).process_input(args)
    assert kept is not None
    assert [m.content.content for m in kept] == ["b" * 8, "c" * 8]
    assert TokenLimiter(100).process_input(_args("short")) is None


def test_input_trips_when_nothing_fits() -> None:
    with pytest.raises(TripWire, match="No messages fit"):
        TokenLimiter(5).process_input(_args("x" * 100))
    with pytest.raises(TripWire, match="System messages alone exceed"):
        TokenLimiter(5).process_input(_args("hi", system="s" * 100))


def test_the_heuristic_and_bad_limits() -> None:
    assert [estimate_tokens(t) for t in ("", "abc", "abcd", "abcde")] == [0, 1, 1, 2]
    with pytest.raises(ConfigurationError, match="limit must be a positive integer"):
        TokenLimiter(0)
    bad: Any = "cut"
    with pytest.raises(ConfigurationError, match="strategy must be 'truncate'"):
        TokenLimiter(3, strategy=bad)
