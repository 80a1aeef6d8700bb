"""``create_app(step_text="hold")``: each step goes out whole once every
``process_output_step`` has passed it, so what a client receives is what the
run accepted; ``"stream"`` (the default) sends chunks as they are made."""

from __future__ import annotations

import re
from typing import Any

import pytest
import trio
import trio.testing

from procession import ConfigurationError, ProviderError
from procession.server import create_app
from procession.testing import Delay, text_turn
from tests.server.server_helpers import (
    BlockSecrets,
    RetryOnce,
    make_agent,
    request,
    sse_events,
)


def _types(body: bytes) -> list[str]:
    events = sse_events(re.sub(rb"id: [0-9-]+\n", b"", body))
    return [e if isinstance(e, str) else e["type"] for e in events]


def _text(body: bytes) -> str:
    return "".join(
        e["payload"]["text"]
        for e in sse_events(body)
        if isinstance(e, dict) and e["type"] == "text-delta"
    )


def _retrying() -> Any:
    return make_agent(
        [text_turn("a draft"), text_turn("The full answer.")],
        output_processors=[RetryOnce()],
        max_processor_retries=1,
    )


async def _stream(app: Any) -> bytes:
    answer = await request(
        app, "POST", "/api/agents/helper/stream", json_body={"messages": "Hi"}
    )
    assert answer.status == 200
    return answer.body


async def test_a_held_retry_sends_only_the_accepted_attempt() -> None:
    streamed = await _stream(create_app([_retrying()]))
    held = await _stream(create_app([_retrying()], step_text="hold"))
    assert _text(streamed) == "a draftThe full answer."
    assert _text(held) == "The full answer."
    # Held, the withdrawn attempt left nothing but the step-retry itself.
    types = [t for i, t in enumerate(_types(held)) if t != _types(held)[i - 1]]
    assert types == [
        "start",
        "step-retry",
        "step-start",
        "text-start",
        "text-delta",
        "text-end",
        "step-finish",
        "finish",
        "[DONE]",
    ]


async def test_a_held_step_that_trips_is_never_sent() -> None:
    agent = make_agent(
        [text_turn("The secret is 42.")], output_processors=[BlockSecrets()]
    )
    held = await _stream(create_app([agent], step_text="hold"))
    assert _text(held) == ""
    assert _types(held) == ["start", "tripwire", "[DONE]"]


async def test_what_was_held_goes_out_before_an_error() -> None:
    overloaded = ProviderError("Overloaded", status_code=529, is_retryable=True)
    agent = make_agent([[*text_turn("Partial"), overloaded]])
    held = await _stream(create_app([agent], step_text="hold"))
    assert _text(held) == "Partial"
    assert _types(held)[-4:] == ["error", "step-finish", "finish", "[DONE]"]


async def test_a_held_step_goes_out_at_its_step_finish_not_before(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from tests.server.server_helpers import open_exchange

    slow = [Delay(10), *text_turn("late")]
    app = create_app([make_agent([slow])], step_text="hold")
    async with open_exchange(
        app, "POST", "/api/agents/helper/stream", json_body={"messages": "Hi"}
    ) as exchange:
        first = await exchange.next_part()  # the run's start goes out at once
        assert first is not None
        assert b'"start"' in first
        started = trio.current_time()
        body = await exchange.read_all()
    assert trio.current_time() - started >= 10
    assert _text(body) == "late"


async def test_a_cancel_while_a_step_is_held_ends_with_abort() -> None:
    from tests.server.server_helpers import open_exchange

    app = create_app([make_agent([[Delay(30), *text_turn("never")]])], step_text="hold")
    with trio.fail_after(10):
        async with open_exchange(
            app,
            "POST",
            "/api/agents/helper/stream",
            json_body={"messages": "Hi", "runId": "r-held"},
        ) as exchange:
            await exchange.next_part()
            cancel = await request(app, "POST", "/api/agents/helper/runs/r-held/cancel")
            body = await exchange.read_all()
    assert cancel.status == 200
    assert _types(body)[-2:] == ["abort", "[DONE]"]


async def test_step_text_may_be_chosen_per_agent() -> None:
    held, streamed = _retrying(), _retrying()
    held.id = "held"
    app = create_app([held, streamed], step_text={"held": "hold"})
    a = await request(
        app, "POST", "/api/agents/held/stream", json_body={"messages": "x"}
    )
    b = await request(
        app, "POST", "/api/agents/helper/stream", json_body={"messages": "x"}
    )
    assert _text(a.body) == "The full answer."
    assert _text(b.body) == "a draftThe full answer."


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("buffered", "must be 'stream' or 'hold'"),
        ({"nobody": "hold"}, "names agent 'nobody'"),
        ({"helper": "later"}, r"step_text\['helper'\] must be"),
        (3, "must be 'stream', 'hold' or a mapping"),
    ],
)
def test_a_bad_step_text_is_refused_by_name(value: Any, words: str) -> None:
    with pytest.raises(ConfigurationError, match=words):
        create_app([make_agent(["x"])], step_text=value)
