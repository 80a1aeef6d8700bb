"""``ToolSet`` with tool sources (``ToolSource``): what the set offers is what
its sources have now; a closed source is an error naming it, at the call.
The source here is a small in-memory one; ``tests/mcp`` runs the real one,
``MCPTools``, against real MCP servers."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

import pytest

from procession import Agent, ConfigurationError, ToolSourceNotOpenError
from procession.runtime.tools import Tool, ToolSet, ToolSource
from procession.testing import ScriptedModel, collect_stream, tool_call_turn


def make(name: str) -> Tool:
    return Tool(name=name, execute=lambda args, context: name)


class Source:
    """A tool source whose tool list the test sets."""

    def __init__(self, name: str, *tools: Tool) -> None:
        self._name = name
        self.listed: tuple[Tool, ...] = tools
        self.is_open = False

    @property
    def name(self) -> str:
        return self._name

    def tools(self) -> Sequence[Tool]:
        if not self.is_open:
            raise ToolSourceNotOpenError(f"source {self._name!r} is not open")
        return self.listed

    async def __aenter__(self) -> Source:
        self.is_open = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.is_open = False

    def __repr__(self) -> str:
        return f"<Source {self._name!r}>"


def test_a_source_is_a_tool_source() -> None:
    assert isinstance(Source("s"), ToolSource)
    assert not isinstance(make("a"), ToolSource)


async def test_the_set_offers_what_its_sources_have_now() -> None:
    source = Source("s", make("b"))
    tools = ToolSet([make("a"), source, make("c")])
    assert tools.sources == (source,)
    assert repr(tools) == "ToolSet(['a', <Source 's'>, 'c'])"
    async with source:
        assert list(tools) == ["a", "b", "c"]
        source.listed = (make("b"), make("d"))
        snapshot = tools.snapshot()
        assert list(snapshot) == ["a", "b", "d", "c"]
        assert snapshot.sources == ()
        source.listed = ()
        assert list(snapshot) == ["a", "b", "d", "c"]  # a snapshot stays
        assert list(tools) == ["a", "c"]


def test_a_closed_source_is_an_error_naming_it_unless_skipped() -> None:
    tools = ToolSet([make("a"), Source("files", make("b"))])
    with pytest.raises(ToolSourceNotOpenError, match="source 'files' is not open"):
        tools.snapshot()
    with pytest.raises(ToolSourceNotOpenError, match="'files'"):
        list(tools)
    assert list(tools.snapshot(skip_closed=True)) == ["a"]


async def test_a_name_a_source_shares_with_a_tool_is_an_error_naming_both() -> None:
    source = Source("files", make("a"))
    tools = ToolSet([make("a"), source])
    async with source:
        with pytest.raises(
            ConfigurationError,
            match=r"two tools are named 'a': .* and .* \(from files\); .*prefix=",
        ):
            tools.snapshot()


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ({"x": Source("s")}, r"tools key 'x': <Source 's'> is a tool source.*list"),
        ([Source("s")] * 2, r"the tool source <Source 's'> is listed twice"),
    ],
)
def test_sources_are_listed_once_in_a_list(tools: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ToolSet(tools)


async def test_an_agent_offers_each_step_the_tools_its_source_has_then() -> None:
    source = Source("s", make("first"))

    def grow(args: Any, context: Any) -> str:
        source.listed = (*source.listed, make("second"))
        return "grown"

    source.listed = (Tool(name="grow", execute=grow),)
    model = ScriptedModel([tool_call_turn("grow", {}), "done"])
    agent = Agent(id="a", model=model, tools=[source])
    with pytest.raises(ToolSourceNotOpenError, match="source 's' is not open"):
        agent.stream("hi")
    async with source:
        run = await collect_stream(agent, "hi")
    assert run.result.error is None
    assert [d.name for d in model.calls[0].tools] == ["grow"]
    assert [d.name for d in model.calls[1].tools] == ["grow", "second"]


def test_extended_keeps_the_sources() -> None:
    source = Source("s")
    tools = ToolSet([make("a"), source]).extended([make("z")])
    assert tools.sources == (source,)
    assert repr(tools) == "ToolSet(['a', <Source 's'>, 'z'])"
    assert ToolSet(tools).sources == (source,)
