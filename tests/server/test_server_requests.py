"""``RunRequest.stream``: the options a request body sets reach the agent's
call; the ones it leaves out keep the agent's values."""

from __future__ import annotations

from typing import Any

from procession import Agent, tool
from procession.server._requests import parse_run_body
from procession.testing import ScriptedModel, tool_call_turn


def _agent(**options: Any) -> tuple[Agent, ScriptedModel]:
    """An agent with two tools whose model calls one of them, then answers."""

    @tool
    def echo(args: dict[str, Any], ctx: Any) -> str:
        """Echo."""
        return "echoed"

    @tool
    def other(args: dict[str, Any], ctx: Any) -> str:
        """Another."""
        return "other"

    model = ScriptedModel([tool_call_turn("echo", {}), "never asked"])
    return Agent(id="a", model=model, tools=[echo, other], **options), model


async def test_the_options_a_body_sets_reach_the_run() -> None:
    agent, model = _agent(
        max_steps=5, model_settings={"temperature": 0.1, "top_p": 0.9}
    )
    request = parse_run_body(
        {
            "messages": "hi",
            "runId": "run-from-the-client",
            "maxSteps": 1,
            "modelSettings": {"temperature": 0.5},
            "providerOptions": {"anthropic": {"k": 1}},
            "activeTools": ["echo"],
        }
    )
    async with request.stream(agent) as stream:
        await stream.result()
    assert stream.run_id == "run-from-the-client"
    [call] = model.calls  # maxSteps=1: no step after the tool call
    assert call.settings == {"temperature": 0.5, "top_p": 0.9}
    assert call.provider_options == {"anthropic": {"k": 1}}
    assert [t.name for t in call.tools] == ["echo"]


async def test_a_body_without_options_keeps_the_agents_values() -> None:
    agent, model = _agent(max_steps=1, model_settings={"temperature": 0.1})
    async with parse_run_body({"messages": "hi"}).stream(agent) as stream:
        await stream.result()
    assert stream.run_id.startswith("run-")
    [call] = model.calls  # the agent's max_steps=1
    assert call.settings == {"temperature": 0.1}
    assert call.provider_options == {}
    assert [t.name for t in call.tools] == ["echo", "other"]
