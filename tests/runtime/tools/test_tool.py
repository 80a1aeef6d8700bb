"""``Tool`` construction, execution, the ``@tool`` decorator and ``ToolSet``."""

from __future__ import annotations

import enum
import importlib
import re
from typing import Any, Literal

import attrs
import pytest
import trio

from procession import ConfigurationError
from procession.models import ToolDefinition
from procession.processors import RequestContext
from procession.runtime.tools import (
    Tool,
    ToolContext,
    ToolSet,
    json_schema,
    parse_arguments,
    tool,
)
from procession.runtime.tools._tool import execute_tool

# --------------------------------------------------------------------------- #
# Fixtures: input classes (module level, so their source and annotations resolve)
# --------------------------------------------------------------------------- #


class Color(enum.StrEnum):
    RED = "red"
    GREEN = "green"


@attrs.frozen
class Point:
    x: int
    """Horizontal position."""
    y: int = 0


@attrs.frozen
class Weather:
    city: str
    """The city to look up.

    Any spelling the user gave."""
    unit: Literal["celsius", "fahrenheit"] = "celsius"
    days: int = attrs.field(default=1, metadata={"description": "How many days."})
    at: Point | None = None
    tags: list[str] = attrs.field(factory=list)
    color: Color = Color.RED


def echo(args: Any, context: ToolContext) -> Any:
    return args


def context(name: str = "t") -> ToolContext:
    return ToolContext(tool_call_id="call-1", tool_name=name)


SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer"},
        "sort": {"enum": ["new", "top"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "filter": {
            "type": "object",
            "properties": {"site": {"type": ["string", "null"]}},
            "required": ["site"],
            "additionalProperties": False,
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}


# --------------------------------------------------------------------------- #
# Tool construction and definition
# --------------------------------------------------------------------------- #


def test_definition_is_what_the_model_sees() -> None:
    weather = Tool(
        name="get_weather",
        description="Weather.",
        input=Weather,
        execute=echo,
        provider_options={"anthropic": {"cache_control": {"type": "ephemeral"}}},
    )
    assert weather.definition() == ToolDefinition(
        name="get_weather",
        description="Weather.",
        input_schema=json_schema(Weather),
        provider_options={"anthropic": {"cache_control": {"type": "ephemeral"}}},
    )


def test_tool_without_input_takes_an_empty_object() -> None:
    assert Tool(name="now", execute=echo).definition().input_schema == {
        "type": "object",
        "properties": {},
    }


def test_dict_schema_is_offered_unchanged_and_copied() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}}
    search = Tool(name="search", input=schema, execute=echo)
    schema["properties"]["q"]["type"] = "integer"
    assert search.definition().input_schema == {
        "type": "object",
        "properties": {"q": {"type": "string"}},
    }


@pytest.mark.parametrize(
    "name", ["", "has space", "x" * 65, "dé", "a.b", "<lambda>", 5, None]
)
def test_invalid_names_are_rejected(name: Any) -> None:
    with pytest.raises(
        ConfigurationError, match=r"tool name .* is not valid: use 1 to 64"
    ):
        Tool(name=name, execute=echo)


@pytest.mark.parametrize("name", ["a", "get_weather", "get-weather", "A9", "x" * 64])
def test_valid_names_are_accepted(name: str) -> None:
    assert Tool(name=name, execute=echo).name == name


def test_execute_must_be_callable() -> None:
    with pytest.raises(
        ConfigurationError, match=r"tool 't': execute must be a function"
    ):
        Tool(name="t", execute="nope")  # type: ignore[arg-type]  # the point of the test


def test_execute_must_take_args_and_context() -> None:
    with pytest.raises(
        ConfigurationError, match=r"must accept two positional arguments"
    ):
        Tool(name="t", execute=lambda args: args)  # type: ignore[arg-type,misc]  # the point of the test


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            int,
            r"input must be an attrs class, a JSON Schema dict or None, "
            r"got <class 'int'>",
        ),
        (Point(1), r"input must be an attrs class"),
        ({"type": "array"}, r"a JSON Schema input must be an object schema"),
        ({"properties": {}}, r"a JSON Schema input must be an object schema"),
    ],
)
def test_input_kind_is_checked(spec: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"tool 't': {message}"):
        Tool(name="t", input=spec, execute=echo)


def test_invalid_json_schema_is_rejected_when_jsonschema_is_installed() -> None:
    pytest.importorskip("jsonschema")
    bad = {"type": "object", "properties": {"a": {"type": 5}}}
    with pytest.raises(
        ConfigurationError, match=r"tool 't': the input is not a valid JSON Schema"
    ):
        Tool(name="t", input=bad, execute=echo)


def test_description_and_provider_options_are_checked() -> None:
    with pytest.raises(ConfigurationError, match=r"description must be a str, got 5"):
        Tool(name="t", description=5, execute=echo)  # type: ignore[arg-type]  # the point of the test
    with pytest.raises(ConfigurationError, match=r"provider_options must be a mapping"):
        Tool(name="t", execute=echo, provider_options=["x"])  # type: ignore[arg-type]  # the point of the test


def test_tools_compare_by_identity() -> None:
    a = Tool(name="t", execute=echo)
    assert a == a
    assert a != Tool(name="t", execute=echo)


def test_evolve_revalidates() -> None:
    renamed = attrs.evolve(Tool(name="t", input=Point, execute=echo), name="u")
    assert renamed.definition().input_schema == json_schema(Point)
    with pytest.raises(ConfigurationError, match=r"tool name 'a b' is not valid"):
        attrs.evolve(renamed, name="a b")


# --------------------------------------------------------------------------- #
# Execution
# --------------------------------------------------------------------------- #


async def test_sync_execute_gets_args_and_context() -> None:
    seen: list[tuple[Any, ToolContext]] = []

    def run(args: Point, ctx: ToolContext) -> int:
        seen.append((args, ctx))
        return args.x * 2

    double = Tool(name="double", input=Point, execute=run)
    ctx = context("double")
    assert not double.is_async
    assert await execute_tool(double, parse_arguments(double, '{"x": 21}'), ctx) == 42
    assert seen == [(Point(21), ctx)]


async def test_async_execute_is_awaited() -> None:
    async def run(args: dict[str, Any], ctx: ToolContext) -> str:
        await trio.lowlevel.checkpoint()
        return f"{ctx.tool_call_id}:{args['q']}"

    lookup = Tool(name="lookup", input=SEARCH_SCHEMA, execute=run)
    assert lookup.is_async
    assert await execute_tool(lookup, {"q": "x"}, context()) == "call-1:x"


async def test_callable_object_with_async_call_is_async() -> None:
    class Runner:
        async def __call__(self, args: Any, ctx: ToolContext) -> str:
            return "ran"

    runner = Tool(name="r", execute=Runner())
    assert runner.is_async
    assert await execute_tool(runner, {}, context()) == "ran"


async def test_sync_execute_returning_a_coroutine_is_awaited() -> None:
    async def later() -> str:
        return "later"

    lazy = Tool(name="lazy", execute=lambda args, ctx: later())
    assert not lazy.is_async
    assert await execute_tool(lazy, {}, context()) == "later"


@pytest.mark.parametrize("is_async", [False, True])
async def test_execute_errors_propagate(is_async: bool) -> None:
    def boom(args: Any, ctx: ToolContext) -> None:
        raise LookupError("no such city")

    async def aboom(args: Any, ctx: ToolContext) -> None:
        raise LookupError("no such city")

    failing = Tool(name="f", execute=aboom if is_async else boom)
    with pytest.raises(LookupError, match="no such city"):
        await execute_tool(failing, {}, context())


async def test_sync_execute_does_not_start_when_cancelled() -> None:
    calls: list[Any] = []
    recording = Tool(name="rec", execute=lambda args, ctx: calls.append(args))
    with trio.CancelScope() as scope:
        scope.cancel()
        await execute_tool(recording, {}, context())
    assert scope.cancelled_caught
    assert calls == []


async def test_sync_execute_result_survives_a_cancel_during_the_call() -> None:
    def cancel_then_return(args: Any, ctx: ToolContext) -> str:
        scope.cancel()
        return "done"

    results: list[Any] = []
    cancelling = Tool(name="c", execute=cancel_then_return)
    with trio.CancelScope() as scope:
        results.append(await execute_tool(cancelling, {}, context()))
        await trio.lowlevel.checkpoint()
    assert results == ["done"]
    assert scope.cancelled_caught


def test_tool_context_defaults() -> None:
    a, b = context(), context()
    assert isinstance(a.request_context, RequestContext)
    assert a.request_context is not b.request_context
    assert (a.writer, a.abort_signal, a.messages) == (None, None, ())


# --------------------------------------------------------------------------- #
# The @tool decorator
# --------------------------------------------------------------------------- #


async def test_decorator_takes_name_description_and_input_from_the_function() -> None:
    @tool
    def get_weather(args: Weather, context: ToolContext) -> str:
        """Current weather
        in a city.

        The rest is for humans.
        """
        return f"{context.tool_name}: sunny in {args.city}"

    assert isinstance(get_weather, Tool)
    assert get_weather.name == "get_weather"
    assert get_weather.description == "Current weather in a city."
    assert get_weather.input is Weather
    args = parse_arguments(get_weather, {"city": "Taipei"})
    result = await execute_tool(get_weather, args, context("get_weather"))
    assert result == "get_weather: sunny in Taipei"


def test_decorator_with_arguments() -> None:
    @tool(
        "search-web",
        description="Search.",
        input=SEARCH_SCHEMA,
        provider_options={"p": 1},
    )
    def whatever(args: dict[str, Any], context: ToolContext) -> None:
        """Ignored docstring."""

    assert whatever.definition() == ToolDefinition(
        name="search-web",
        description="Search.",
        input_schema=SEARCH_SCHEMA,
        provider_options={"p": 1},
    )


def test_decorator_with_name_keyword_and_empty_parentheses() -> None:
    @tool(name="renamed")
    def f(args: Point, context: ToolContext) -> None:
        pass

    @tool()
    def g(args: Point, context: ToolContext) -> None:
        pass

    assert (f.name, f.description, f.input) == ("renamed", "", Point)
    assert g.name == "g"


def test_decorator_without_attrs_annotation_means_no_input() -> None:
    @tool
    def ping(args: dict[str, Any], context: ToolContext) -> str:
        return "pong"

    assert ping.input is None
    assert ping.definition().input_schema == {"type": "object", "properties": {}}


async def test_decorated_functions_may_skip_context_or_args() -> None:
    @tool
    def area(args: Point) -> int:
        return args.x * args.y

    @tool
    async def slow_area(args: Point) -> int:
        await trio.lowlevel.checkpoint()
        return args.x * args.y

    @tool
    def now() -> str:
        return "noon"

    @tool
    def variadic(*everything: Any) -> int:
        return len(everything)

    args = parse_arguments(area, {"x": 2, "y": 3})
    assert area.input is Point
    assert await execute_tool(area, args, context()) == 6
    assert slow_area.is_async
    assert await execute_tool(slow_area, args, context()) == 6
    assert await execute_tool(now, {}, context()) == "noon"
    assert await execute_tool(variadic, {}, context()) == 2
    assert repr(area.execute).startswith("<function test_decorated_functions_may_skip")


def test_decorator_rejects_required_keyword_only_parameters() -> None:
    def f(args: Any, *, extra: int) -> None:
        pass

    with pytest.raises(ConfigurationError, match=r"required keyword-only parameters"):
        tool(f)


def test_decorator_rejects_unnameable_functions() -> None:
    with pytest.raises(ConfigurationError, match=r"tool name '<lambda>' is not valid"):
        tool(lambda args, context: None)
    with pytest.raises(ConfigurationError, match=r"@tool decorates a function, got 5"):
        tool("n")(5)  # type: ignore[arg-type]  # the point of the test


# --------------------------------------------------------------------------- #
# ToolSet
# --------------------------------------------------------------------------- #


def make(name: str) -> Tool:
    return Tool(name=name, description=f"{name}.", execute=echo)


def test_toolset_from_a_list_keeps_order() -> None:
    a, b = make("a"), make("b")
    tools = ToolSet([b, a])
    assert list(tools) == ["b", "a"]
    assert len(tools) == 2
    assert tools["a"] is a
    assert "b" in tools
    assert "c" not in tools
    assert repr(tools) == "ToolSet(['b', 'a'])"
    assert len(ToolSet()) == 0


def test_toolset_rejects_duplicate_names() -> None:
    with pytest.raises(
        ConfigurationError, match=r"two tools are named 'a'.*must be unique"
    ):
        ToolSet([make("a"), make("b"), make("a")])


def test_toolset_dict_keys_are_the_names() -> None:
    original = make("lookup")
    kept = make("keep")
    tools = ToolSet({"search": original, "keep": kept})
    assert tools["search"].name == "search"
    assert tools["search"].execute is original.execute
    assert original.name == "lookup"
    assert tools["keep"] is kept
    assert [d.name for d in tools.definitions()] == ["search", "keep"]


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        (
            {"bad key": make("a")},
            r"tools key 'bad key' \(for tool 'a'\) is not a valid tool name",
        ),
        ({5: make("a")}, r"tool names must be str, got the key 5"),
        ({"a": "not a tool"}, r"expected a Tool .*got 'not a tool'"),
        ([make("a"), echo], r"expected a Tool .*got <function echo"),
        (
            "abc",
            r"tools must be a list of Tool \(and tool sources such as MCPTools\) "
            r"or a dict name -> Tool, got 'abc'",
        ),
        (5, r"tools must be a list of Tool .*or a dict"),
    ],
)
def test_toolset_rejects_bad_input(tools: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ToolSet(tools)


def test_toolset_from_a_toolset() -> None:
    tools = ToolSet([make("a")])
    assert ToolSet(tools) == tools
    assert ToolSet.of(tools) is tools
    assert list(ToolSet.of([make("b")])) == ["b"]
    assert list(ToolSet.of({"c": make("b")})) == ["c"]


def test_names_filtered_by_active_in_set_order() -> None:
    tools = ToolSet([make("a"), make("b"), make("c")])
    assert tools.names() == ["a", "b", "c"]
    assert tools.names(["c", "a", "c"]) == ["a", "c"]
    assert tools.names([]) == []
    with pytest.raises(ConfigurationError, match=r"active tools \['x'\] are not"):
        tools.names(["x"])


def test_definitions_filtered_by_active_in_set_order() -> None:
    tools = ToolSet([make("a"), make("b"), make("c")])
    assert [d.name for d in tools.definitions()] == ["a", "b", "c"]
    assert [d.name for d in tools.definitions(["c", "a", "c"])] == ["a", "c"]
    assert tools.definitions([]) == []
    assert tools.definitions(["b"]) == [
        ToolDefinition(
            name="b",
            description="b.",
            input_schema={"type": "object", "properties": {}},
        )
    ]


def test_definitions_rejects_unknown_active_names() -> None:
    tools = ToolSet([make("a"), make("b")])
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "active tools ['x', 'y'] are not in the tool set (known: ['a', 'b'])"
        ),
    ):
        tools.definitions(["a", "x", "y"])
    with pytest.raises(
        ConfigurationError, match=r"got the str 'a'; did you mean \['a'\]\?"
    ):
        tools.definitions("a")


@pytest.mark.parametrize(
    "module_name",
    [
        "procession.runtime.tools",
        "procession.runtime.tools._arguments",
        "procession.runtime.tools._schema",
        "procession.runtime.tools._tool",
        "procession.runtime.tools._toolset",
    ],
)
def test_public_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name)
