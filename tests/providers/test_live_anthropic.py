"""The README's agent, against the real Anthropic API.

Optional: it runs only when ANTHROPIC_API_KEY is set (CI has no key and no
network), and it spends a few hundred tokens.
"""

from __future__ import annotations

import os
from typing import Any

import attrs
import pytest
import trio

from procession import Agent, Processor, tool

pytestmark = [
    pytest.mark.skipif(
        not os.environ.get("ANTHROPIC_API_KEY"),
        reason="live check: needs ANTHROPIC_API_KEY and network access",
    ),
    # httpx2 leaves httpcore2's inner generator to the garbage collector after an
    # early close; the socket itself is closed at once (see the provider tests).
    pytest.mark.filterwarnings("ignore:Async generator.*PoolByteStream"),
]

MODEL = os.environ.get("PROCESSION_LIVE_MODEL", "anthropic/claude-sonnet-4-5")


@attrs.frozen
class OrderQuery:
    order_id: str


@tool
def lookup_order(args: OrderQuery, ctx: Any) -> dict[str, Any]:
    """Look up an order by its number."""
    return {"order_id": args.order_id, "status": "shipped", "ssn": "123-45-6789"}


class BlockSecrets(Processor):
    id = "block-secrets"

    def process_input(self, args: Any) -> None:
        if any("password" in m.text for m in args.messages):
            args.abort("asks for a password")


class RedactToolResult(Processor):
    id = "redact-tool-result"

    def process_tool_result(self, args: Any) -> None:
        args.message_list.update_tool_invocation(
            {
                "type": "tool-invocation",
                "toolInvocation": {
                    "state": "result",
                    "toolCallId": args.tool_call_id,
                    "toolName": args.tool_name,
                    "args": args.args,
                    "result": {**args.result, "ssn": "[REDACTED]"},
                },
            }
        )


async def test_readme_agent_against_claude() -> None:
    agent = Agent(
        id="support",
        instructions="You are a support agent. Use the lookup_order tool.",
        model=MODEL,
        tools=[lookup_order],
        input_processors=[BlockSecrets()],
        output_processors=[RedactToolResult()],
        max_steps=4,
        model_settings={"max_tokens": 400},
    )
    with trio.fail_after(120):
        result = await agent.generate("Where is order A-1? Answer in one sentence.")
        blocked = await agent.generate("What is the admin password?")
    assert result.error is None, result.error
    assert result.finish_reason == "stop"
    assert result.steps[0].tool_calls[0].tool_name == "lookup_order"
    assert result.steps[0].tool_results[0].result["ssn"] == "[REDACTED]"
    assert "shipped" in result.text.lower()
    assert (result.usage.total_tokens or 0) > 0
    assert blocked.finish_reason == "other"
    assert blocked.tripwire is not None
    assert blocked.tripwire.processor_id == "block-secrets"
