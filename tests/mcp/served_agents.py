"""Agents the reverse-direction tests serve as MCP tools (``procession serve
--mcp tests/mcp/served_agents.py:agents`` loads them in a subprocess too).

``EchoModel`` answers any number of calls: "You said: <the last user
text>", one delta per word; a message containing "slowly" waits a minute
first (a call to cancel), "leak" says a word the guardrail blocks."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from procession import Agent
from procession.data import PromptTextPart
from procession.memory import Memory, SqliteStorage
from procession.models import ModelFinish, ModelRequest
from procession.processors import PatternRule, RegexFilter
from procession.testing import Delay, ScriptedModel, text_turn


class EchoModel:
    provider = "test"
    model_id = "echo"

    def stream(self, request: ModelRequest) -> AbstractAsyncContextManager[Any]:
        users = [m for m in request.prompt if m.role == "user"]
        said = "".join(
            p.text for p in users[-1].content if isinstance(p, PromptTextPart)
        )
        turn: list[Any] = []
        if "slowly" in said:
            turn.append(Delay(60))
        turn += [*text_turn(f"You said: {said}"), ModelFinish(finish_reason="stop")]
        return ScriptedModel(
            [turn], provider=self.provider, model_id=self.model_id
        ).stream(request)


def echo_agent(*, guarded: bool = True, **options: Any) -> Agent:
    """The echo agent; ``guarded`` adds a guardrail that blocks "hunter2"
    (it holds the text back until it can tell, so the text comes at once)."""
    guard = RegexFilter(
        rules=[PatternRule(name="secret", pattern="hunter2")], strategy="block"
    )
    return Agent(
        id="echo",
        name="Echo",
        model=EchoModel(),
        output_processors=[guard] if guarded else [],
        **options,
    )


def memory_agent() -> Agent:
    return Agent(
        id="notes.keeper",
        model=EchoModel(),
        memory=Memory(storage=SqliteStorage(":memory:")),
    )


agents = [echo_agent()]
