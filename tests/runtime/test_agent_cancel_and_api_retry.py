"""Cancelling a run from another task, and what an API-error retry tells the
model (nothing: there was no answer to reject)."""

from __future__ import annotations

from typing import Any

import trio

from procession import Agent, ProviderError
from procession.runtime import RETRY_FEEDBACK_TAG
from procession.testing import Delay, ScriptedModel, text_turn


async def test_cancel_from_another_task_ends_with_an_abort_chunk(
    autojump_clock: trio.abc.Clock,
) -> None:
    model = ScriptedModel([[*text_turn("a"), Delay(20), *text_turn("b", id="x")]])
    agent = Agent(id="a", model=model)
    seen: list[Any] = []
    async with agent.stream("hi") as stream:
        async with trio.open_nursery() as nursery:

            async def cancel_soon() -> None:
                await trio.sleep(1)
                await stream.cancel()

            nursery.start_soon(cancel_soon)
            async for chunk in stream:
                seen.append(chunk.type)
        result = await stream.result()
    assert seen[-1] == "abort"
    assert "text-delta" in seen  # "a" arrived before the cancel
    assert seen.count("text-delta") == 1  # "b" never did
    assert result.finish_reason == "aborted"
    assert result.tripwire is None
    assert model.closed_early == 1
    assert trio.current_time() < 20  # the 20 s pause was cut short


async def test_an_api_error_retry_adds_no_feedback_to_the_prompt(
    autojump_clock: trio.abc.Clock,
) -> None:
    class RetryOnce:
        id = "retry-once"

        def process_api_error(self, args: Any) -> Any:
            return {"retry": args.retry_count == 0}

    model = ScriptedModel([ProviderError("overloaded", status_code=529), "fine"])
    agent = Agent(id="a", model=model, error_processors=[RetryOnce()])
    result = await agent.generate("hi")
    assert result.text == "fine"
    assert result.retry_count == 1
    second_prompt = model.calls[1].prompt
    assert model.calls[0].prompt == second_prompt  # unchanged: nothing to reject
    assert result.message_list.get_system_messages(RETRY_FEEDBACK_TAG) == []
