"""``ToolSet``, the tools of an agent or a call, and ``ToolSource``, tools that
come from outside the program (``procession.mcp.MCPTools``) and exist only
while the source is open.

A set holds ``Tool`` objects and sources, in the order given. A set with no
source is a plain immutable mapping. A set with sources answers every mapping
question with the tools the sources have *now*; the runtime takes one
``snapshot()`` when a call starts (which is where a source that is not open is
a ``ToolSourceNotOpenError``, at ``agent.stream()`` / ``generate()``) and one
at the start of every step, so a source whose tool list changes (MCP's
``notifications/tools/list_changed``) offers the new list from the next step.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

import attrs

from ..._errors import ConfigurationError
from ...models import ToolDefinition
from ._tool import Tool

__all__ = ["ToolSet", "ToolSource", "open_tool_sources"]


@runtime_checkable
class ToolSource(Protocol):
    """Tools that come from outside the program and exist only while the
    source is open; ``procession.mcp.MCPTools`` is one. It goes in an agent's
    ``tools=`` list beside ``Tool`` objects, and several agents may share it.

    ``async with source:`` opens it; ``procession.server.create_app`` (and so
    ``procession serve``) opens the sources of its agents that are not open
    yet, in the app's lifespan.
    """

    @property
    def name(self) -> str:
        """What error messages call the source (never a secret)."""
        ...

    @property
    def is_open(self) -> bool:
        """Whether ``tools()`` answers now."""
        ...

    def tools(self) -> Sequence[Tool]:
        """The tools the source has now, each a ``Tool`` whose ``execute``
        goes through the source. Pure: no I/O.

        Raises:
            ToolSourceNotOpenError: the source is not open (the message names
                it and says how to open it).
        """
        ...

    async def __aenter__(self) -> Any:
        """Open the source (connect, list its tools). Checkpoints; a
        cancellation leaves it closed."""
        ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        """Close the source. Checkpoints; finishes its cleanup even when
        cancelled."""
        ...


class ToolSet(Mapping[str, Tool]):
    """The tools of an agent or a call: a read-only mapping name -> ``Tool``,
    in the order given.

    Built from a list of tools and tool sources (tool names must be unique;
    a source's tools keep the source's names, which may carry a prefix), or a
    dict. In a dict the key is the name the model sees, as in Mastra's
    ``tools: {name: tool}``: a tool whose own name differs is re-made under
    the key (``attrs.evolve``), so ``toolset[key].name == key`` always holds.
    A source cannot be a dict value (its tools have their own names): put it
    in a list.

    With sources, the mapping is the tools the sources have now (see the
    module docstring); ``snapshot()`` freezes it.

    Raises:
        ConfigurationError: a value that is neither a ``Tool`` nor a
            ``ToolSource``, a duplicate name, or a key that is not a valid
            tool name.
    """

    __slots__ = ("_entries", "_sources", "_tools")

    def __init__(
        self, tools: Iterable[Tool | ToolSource] | Mapping[str, Tool] = ()
    ) -> None:
        self._tools: dict[str, Tool] = {}
        """The set's own tools (a set without sources is just these)."""
        self._entries: tuple[Tool | ToolSource, ...] = ()
        """Tools and sources in the order given (for a set with sources)."""
        self._sources: tuple[ToolSource, ...] = ()
        if isinstance(tools, ToolSet):
            # A copy of another set: the same class, so its fields are ours to read.
            self._tools = dict(tools._tools)  # noqa: SLF001
            self._entries = tools._entries  # noqa: SLF001
            self._sources = tools._sources  # noqa: SLF001
            return
        if isinstance(tools, Mapping):
            for key, value in tools.items():
                if not isinstance(key, str):
                    raise ConfigurationError(
                        f"tool names must be str, got the key {key!r}"
                    )
                if not isinstance(value, Tool) and isinstance(value, ToolSource):
                    raise ConfigurationError(
                        f"tools key {key!r}: {value!r} is a tool source, whose tools "
                        f"have their own names; put it in a list (tools=[...]), and "
                        f"give it a prefix= to rename its tools"
                    )
                self._tools[key] = self._renamed(_check_tool(value), key)
            self._entries = tuple(self._tools.values())
            return
        given: object = tools  # typed loosely: callers do pass a str by mistake
        if isinstance(given, str | bytes) or not isinstance(given, Iterable):
            raise ConfigurationError(
                f"tools must be a list of Tool (and tool sources such as MCPTools) "
                f"or a dict name -> Tool, got {tools!r}"
            )
        entries: list[Tool | ToolSource] = []
        sources: list[ToolSource] = []
        for value in tools:
            if not isinstance(value, Tool) and isinstance(value, ToolSource):
                if any(value is seen for seen in sources):
                    raise ConfigurationError(
                        f"the tool source {value!r} is listed twice; list it once"
                    )
                sources.append(value)
                entries.append(value)
                continue
            item = _check_tool(value)
            if item.name in self._tools:
                raise ConfigurationError(
                    f"two tools are named {item.name!r}: {self._tools[item.name]!r} "
                    f"and {item!r}; tool names must be unique"
                )
            self._tools[item.name] = item
            entries.append(item)
        self._entries, self._sources = tuple(entries), tuple(sources)

    @staticmethod
    def _renamed(item: Tool, key: str) -> Tool:
        if item.name == key:
            return item
        try:
            return attrs.evolve(item, name=key)
        except ConfigurationError as error:
            raise ConfigurationError(
                f"tools key {key!r} (for tool {item.name!r}) is not a valid tool "
                f"name: {error}"
            ) from None

    def _current(self, *, skip_closed: bool = False) -> dict[str, Tool]:
        """Name -> tool for the set's own tools and its sources' tools now."""
        if not self._sources:
            return self._tools
        current: dict[str, Tool] = {}
        origin: dict[str, ToolSource | None] = {}
        for entry in self._entries:
            if isinstance(entry, Tool):
                items: Sequence[Tool] = (entry,)
                source: ToolSource | None = None
            else:
                source = entry
                if skip_closed and not source.is_open:
                    continue
                items = source.tools()
            for item in items:
                clash = current.get(item.name)
                if clash is not None:
                    raise ConfigurationError(
                        f"two tools are named {item.name!r}: {clash!r}"
                        f"{_from(origin[item.name])} and {item!r}{_from(source)}; "
                        f"tool names must be unique: give the tool source a prefix="
                    )
                current[item.name] = item
                origin[item.name] = source
        return current

    @property
    def sources(self) -> tuple[ToolSource, ...]:
        """The tool sources in the set, in the order given."""
        return self._sources

    def snapshot(self, *, skip_closed: bool = False) -> ToolSet:
        """The set as it is now: itself when it has no source (sets are
        immutable), else a set of the tools the sources have now. Pure.

        Raises:
            ToolSourceNotOpenError: a source is not open (unless
                ``skip_closed``, which leaves its tools out).
            ConfigurationError: two tools have one name.
        """
        if not self._sources:
            return self
        return ToolSet(self._current(skip_closed=skip_closed))

    def extended(self, more: Iterable[Tool | ToolSource]) -> ToolSet:
        """A new set: this one's tools and sources, then ``more``.

        Raises:
            ConfigurationError: as the constructor does.
        """
        return ToolSet([*self._entries, *more])

    def __getitem__(self, name: str) -> Tool:
        return self._current()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        if not self._sources:
            return f"ToolSet({list(self._tools)!r})"
        shown = [e.name if isinstance(e, Tool) else e for e in self._entries]
        return f"ToolSet({shown!r})"

    @classmethod
    def of(
        cls, tools: ToolSet | Iterable[Tool | ToolSource] | Mapping[str, Tool]
    ) -> ToolSet:
        """``tools`` itself if it is a ``ToolSet`` (they are immutable), else a
        new one built from it."""
        return tools if isinstance(tools, ToolSet) else cls(tools)

    def names(self, active: Sequence[str] | None = None) -> list[str]:
        """The names of the tools on offer, in this set's order: all of them, or
        those named in ``active`` (duplicates in ``active`` are ignored).

        Raises:
            ConfigurationError: ``active`` names a tool not in the set, or is a
                str rather than a sequence of names.
        """
        current = self._current()
        if active is None:
            return list(current)
        if isinstance(active, str):
            raise ConfigurationError(
                f"active tools must be a sequence of names, got the str {active!r}; "
                f"did you mean [{active!r}]?"
            )
        unknown = [name for name in active if name not in current]
        if unknown:
            raise ConfigurationError(
                f"active tools {unknown!r} are not in the tool set "
                f"(known: {list(current)!r})"
            )
        wanted = set(active)
        return [name for name in current if name in wanted]

    def definitions(self, active: Sequence[str] | None = None) -> list[ToolDefinition]:
        """The definitions to offer the model, for the
        tools ``names(active)`` returns (a fresh schema copy each).

        Raises:
            ConfigurationError: as ``names`` does.
        """
        current = self._current()
        return [current[name].definition() for name in self.names(active)]


@asynccontextmanager
async def open_tool_sources(
    toolsets: Iterable[ToolSet],
) -> AsyncIterator[tuple[ToolSource, ...]]:
    """Open the tool sources of ``toolsets`` (``[agent.tools for agent in
    agents]``) that are not open yet, each once however many sets list it;
    close those when leaving. Yields the sources it opened. Checkpoints; a
    source that fails to open closes the ones opened before it and raises.

    A source someone else opened is left alone: it stays theirs to close.
    """
    found: dict[int, ToolSource] = {}
    for toolset in toolsets:
        for source in toolset.sources:
            found.setdefault(id(source), source)
    async with AsyncExitStack() as stack:
        opened = []
        for source in found.values():
            if not source.is_open:
                await stack.enter_async_context(source)
                opened.append(source)
        yield tuple(opened)


def _from(source: ToolSource | None) -> str:
    return "" if source is None else f" (from {source.name})"


def _check_tool(value: object) -> Tool:
    if not isinstance(value, Tool):
        raise ConfigurationError(
            f"expected a Tool (make one with Tool(...) or @tool) or a tool source "
            f"such as procession.mcp.MCPTools, got {value!r}"
        )
    return value
