"""Tools: schema generation, argument parsing, execution, the decorator, ToolSet."""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Optional

import attrs
import pytest
import trio

from procession import ConfigurationError, ToolArgumentsError
from procession.models import ToolDefinition
from procession.processors import RequestContext
from procession.runtime import (
    Tool,
    ToolContext,
    ToolSet,
    _tools,
    execute_tool,
    json_schema,
    parse_arguments,
    tool,
)

# --------------------------------------------------------------------------- #
# Fixtures: input classes (module level, so their source and annotations resolve)
# --------------------------------------------------------------------------- #


class Color(enum.StrEnum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mixed(enum.Enum):
    ONE = 1
    TWO = "two"


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


@attrs.frozen
class Everything:
    name: str
    count: int
    ratio: float
    flag: bool
    color: Color
    level: Level
    mode: Literal["a", "b"]
    point: Point
    maybe: int | None = None
    seq: Sequence[int] = ()
    tup: tuple[int, ...] = ()
    scores: dict[str, float] = attrs.field(factory=dict)
    anything: Any = None


@attrs.frozen
class Positive:
    n: int = attrs.field(validator=attrs.validators.gt(0))


@attrs.frozen
class Empty:
    pass


@attrs.define
class Node:
    value: int
    children: list[Node] = attrs.field(factory=list)


@attrs.frozen
class Unresolvable:
    thing: DoesNotExist  # type: ignore[name-defined]  # noqa: F821 - deliberately unresolvable


@attrs.frozen
class WithInitFalse:
    a: int
    b: int = attrs.field(init=False, default=3)


def echo(args: Any, context: ToolContext) -> Any:
    return args


def context(name: str = "t") -> ToolContext:
    return ToolContext(tool_call_id="call-1", tool_name=name)


def field_schema(annotation: Any, **field_kwargs: Any) -> dict[str, Any]:
    """The schema of a single field ``f`` of the given type."""
    cls = attrs.make_class("C", {"f": attrs.field(type=annotation, **field_kwargs)})
    return json_schema(cls)["properties"]["f"]  # type: ignore[no-any-return]  # a dict by construction


# --------------------------------------------------------------------------- #
# JSON Schema generation
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (list, {"type": "array"}),
        (list[Any], {"type": "array"}),
        (Sequence[str], {"type": "array", "items": {"type": "string"}}),
        (tuple[bool, ...], {"type": "array", "items": {"type": "boolean"}}),
        (
            dict[str, int],
            {"type": "object", "additionalProperties": {"type": "integer"}},
        ),
        (dict[str, Any], {"type": "object"}),
        (
            Mapping[str, str],
            {"type": "object", "additionalProperties": {"type": "string"}},
        ),
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (Optional[str], {"anyOf": [{"type": "string"}, {"type": "null"}]}),  # noqa: UP045 - the old spelling must work too
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Literal[1, "x", None], {"enum": [1, "x", None]}),
        (Color, {"type": "string", "enum": ["red", "green"]}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (Mixed, {"enum": [1, "two"]}),
        (
            list[Point],
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "x": {"type": "integer", "description": "Horizontal position."},
                        "y": {"type": "integer", "default": 0},
                    },
                    "required": ["x"],
                    "additionalProperties": False,
                },
            },
        ),
    ],
)
def test_schema_of_each_supported_annotation(annotation: Any, expected: Any) -> None:
    assert field_schema(annotation) == expected


def test_schema_of_a_whole_class() -> None:
    assert json_schema(Weather) == {
        "type": "object",
        "properties": {
            "city": {
                "type": "string",
                "description": "The city to look up.\n\nAny spelling the user gave.",
            },
            "unit": {
                "type": "string",
                "enum": ["celsius", "fahrenheit"],
                "default": "celsius",
            },
            "days": {"type": "integer", "description": "How many days.", "default": 1},
            "at": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {
                            "x": {
                                "type": "integer",
                                "description": "Horizontal position.",
                            },
                            "y": {"type": "integer", "default": 0},
                        },
                        "required": ["x"],
                        "additionalProperties": False,
                    },
                    {"type": "null"},
                ],
                "default": None,
            },
            "tags": {"type": "array", "items": {"type": "string"}, "default": []},
            "color": {"type": "string", "enum": ["red", "green"], "default": "red"},
        },
        "required": ["city"],
        "additionalProperties": False,
    }


def test_schema_of_a_class_without_fields() -> None:
    assert json_schema(Empty) == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }


def test_metadata_description_wins_over_docstring() -> None:
    @attrs.frozen
    class Described:
        a: int = attrs.field(metadata={"description": "from metadata"})
        """from the docstring"""

    assert json_schema(Described)["properties"]["a"]["description"] == "from metadata"


def test_defaults_that_are_not_json_are_left_out() -> None:
    sentinel = object()
    assert field_schema(Any, default=sentinel) == {}
    assert field_schema(Any, factory=object) == {}
    assert field_schema(tuple[int, ...], default=(1, 2)) == {
        "type": "array",
        "items": {"type": "integer"},
        "default": [1, 2],
    }
    assert field_schema(float, default=float("nan")) == {"type": "number"}


def test_a_field_annotated_none_is_null() -> None:
    @attrs.frozen
    class Nothing:
        f: None = None

    assert json_schema(Nothing)["properties"]["f"] == {"type": "null", "default": None}
    assert parse_arguments(
        Tool(name="n", input=Nothing, execute=echo), {"f": None}
    ) == (Nothing())


def test_init_false_fields_are_not_arguments() -> None:
    assert json_schema(WithInitFalse)["properties"] == {"a": {"type": "integer"}}


@pytest.mark.parametrize(
    ("annotation", "shown", "hint"),
    [
        (set[int], "set[int]", ""),
        (tuple[int, str], "tuple[int, str]", "only variable-length tuples"),
        (int | str, "int | str", "the only union supported is T | None"),
        (int | str | None, "int | str | None", "the only union supported"),
        (dict[int, str], "dict[int, str]", "JSON object keys are strings"),
        (bytes, "bytes", ""),
        (Literal[Color.RED], "Literal", "Literal values must be"),
    ],
)
def test_unsupported_annotation_names_tool_field_and_type(
    annotation: Any, shown: str, hint: str
) -> None:
    cls = attrs.make_class("Bad", {"f": attrs.field(type=annotation)})
    pattern = rf"tool 'bad': field Bad\.f has the type {re.escape(shown)}.*{hint}"
    with pytest.raises(ConfigurationError, match=pattern):
        Tool(name="bad", input=cls, execute=echo)


def test_recursive_class_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match=r"Node.*refers to itself"):
        json_schema(Node)


def test_unresolvable_annotation_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match=r"Unresolvable.*DoesNotExist"):
        Tool(name="u", input=Unresolvable, execute=echo)


def test_field_without_annotation_is_rejected() -> None:
    untyped = attrs.make_class("Untyped", {"f": attrs.field()})
    with pytest.raises(
        ConfigurationError, match=r"tool 'u': field Untyped\.f has no type"
    ):
        Tool(name="u", input=untyped, execute=echo)


def test_json_schema_needs_an_attrs_class() -> None:
    with pytest.raises(ConfigurationError, match=r"expected an attrs class, got 5"):
        json_schema(5)  # type: ignore[arg-type]  # the point of the test


def test_schemas_handed_out_are_copies() -> None:
    weather = Tool(name="w", input=Weather, execute=echo)
    weather.definition().input_schema["properties"].clear()
    weather.input_schema["required"].append("unit")
    assert weather.definition().input_schema == json_schema(Weather)


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
# parse_arguments with attrs inputs
# --------------------------------------------------------------------------- #

GOOD: dict[str, Any] = {
    "name": "n",
    "count": 5,
    "ratio": 0.5,
    "flag": True,
    "color": "green",
    "level": 2,
    "mode": "b",
    "point": {"x": 1},
}


@pytest.fixture
def everything() -> Tool:
    return Tool(name="everything", input=Everything, execute=echo)


def test_arguments_are_structured(everything: Tool) -> None:
    raw = {
        **GOOD,
        "maybe": 3,
        "seq": [1, 2],
        "tup": [3, 4],
        "scores": {"a": 1},
        "anything": {"z": [1, None]},
    }
    assert parse_arguments(everything, raw) == Everything(
        name="n",
        count=5,
        ratio=0.5,
        flag=True,
        color=Color.GREEN,
        level=Level.HIGH,
        mode="b",
        point=Point(1, 0),
        maybe=3,
        seq=[1, 2],
        tup=(3, 4),
        scores={"a": 1.0},
        anything={"z": [1, None]},
    )


def test_json_string_arguments(everything: Tool) -> None:
    assert parse_arguments(everything, json.dumps(GOOD)) == parse_arguments(
        everything, GOOD
    )


def test_integral_floats_are_integers_and_integers_are_numbers(
    everything: Tool,
) -> None:
    parsed = parse_arguments(everything, {**GOOD, "count": 5.0, "ratio": 2})
    assert (parsed.count, type(parsed.count)) == (5, int)
    assert (parsed.ratio, type(parsed.ratio)) == (2.0, float)


@pytest.mark.parametrize("raw", [None, "", "  ", {}, "{}"])
def test_no_arguments_mean_an_empty_object(raw: Any) -> None:
    point = Tool(
        name="p",
        input=attrs.make_class("All", {"a": attrs.field(type=int, default=1)}),
        execute=echo,
    )
    assert parse_arguments(point, raw).a == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": 5}, r"expected a string, got 5 @ \$\.name"),
        ({"count": "5"}, r"expected an integer, got '5' @ \$\.count"),
        ({"count": True}, r"expected an integer, got True @ \$\.count"),
        ({"count": 1.5}, r"expected an integer, got 1\.5 @ \$\.count"),
        ({"ratio": "0.5"}, r"expected a number, got '0\.5' @ \$\.ratio"),
        ({"ratio": False}, r"expected a number, got False @ \$\.ratio"),
        ({"flag": 1}, r"expected a boolean, got 1 @ \$\.flag"),
        ({"flag": "true"}, r"expected a boolean, got 'true' @ \$\.flag"),
        ({"color": "blue"}, r"expected one of 'red', 'green', got 'blue' @ \$\.color"),
        ({"level": True}, r"expected one of 1, 2, got True @ \$\.level"),
        ({"level": "1"}, r"expected one of 1, 2, got '1' @ \$\.level"),
        ({"mode": "c"}, r"expected one of 'a', 'b', got 'c' @ \$\.mode"),
        ({"point": [1, 2]}, r"expected an object, got \[1, 2\] @ \$\.point"),
        ({"point": {"x": "1"}}, r"expected an integer, got '1' @ \$\.point\.x"),
        ({"point": {}}, r"required property is missing @ \$\.point\.x"),
        ({"point": {"x": 1, "z": 2}}, r"unexpected property 'z' @ \$\.point$"),
        ({"maybe": "3"}, r"expected an integer, got '3' @ \$\.maybe"),
        ({"seq": "ab"}, r"expected an array, got 'ab' @ \$\.seq"),
        ({"seq": [1, "2"]}, r"expected an integer, got '2' @ \$\.seq\[1\]"),
        ({"tup": {"a": 1}}, r"expected an array, got \{'a': 1\} @ \$\.tup"),
        ({"scores": [1]}, r"expected an object, got \[1\] @ \$\.scores"),
        ({"scores": {"a": "b"}}, r"expected a number, got 'b' @ \$\.scores\['a'\]"),
        ({"name": None}, r"expected a string, got None @ \$\.name"),
        ({"extra": 1, "more": 2}, r"unexpected properties 'extra', 'more' @ \$$"),
    ],
)
def test_each_kind_of_bad_argument_is_named(
    everything: Tool, change: dict[str, Any], message: str
) -> None:
    with pytest.raises(
        ToolArgumentsError,
        match=rf"^arguments for tool 'everything' are invalid: {message}",
    ) as info:
        parse_arguments(everything, {**GOOD, **change})
    assert info.value.tool_name == "everything"


def test_missing_required_fields_are_each_named(everything: Tool) -> None:
    raw = {k: v for k, v in GOOD.items() if k not in ("name", "point")}
    with pytest.raises(
        ToolArgumentsError,
        match=(
            r": required property is missing @ \$\.name; "
            r"required property is missing @ \$\.point$"
        ),
    ):
        parse_arguments(everything, raw)


def test_many_errors_are_listed_up_to_ten(everything: Tool) -> None:
    raw = {**GOOD, "seq": ["x"] * 14}
    with pytest.raises(ToolArgumentsError) as info:
        parse_arguments(everything, raw)
    problems = info.value.problem.split("; ")
    assert len(problems) == 11
    assert problems[-1] == "and 4 more"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{nope", r"not valid JSON \(Expecting property name.*\): '\{nope'"),
        ('{"count": NaN}', r"not valid JSON \(NaN is not JSON\)"),
        ("[1, 2]", r"expected a JSON object, got \[1, 2\]"),
        ('"text"', r"expected a JSON object, got 'text'"),
        (42, r"expected a JSON object, got 42"),
        ("x" * 500, r"not valid JSON .*: 'x{20,}\.\.\.x+'$"),
    ],
)
def test_arguments_that_are_not_a_json_object(
    everything: Tool, raw: Any, message: str
) -> None:
    with pytest.raises(ToolArgumentsError, match=message):
        parse_arguments(everything, raw)


def test_validators_of_the_input_class_become_argument_errors() -> None:
    positive = Tool(name="positive", input=Positive, execute=echo)
    assert parse_arguments(positive, {"n": 1}) == Positive(1)
    with pytest.raises(
        ToolArgumentsError, match=r"ValueError: 'n' must be > 0: -1 @ \$"
    ):
        parse_arguments(positive, {"n": -1})


def test_argument_error_keeps_the_cattrs_error_as_cause(everything: Tool) -> None:
    with pytest.raises(ToolArgumentsError, match="count") as info:
        parse_arguments(everything, {**GOOD, "count": "5"})
    assert info.value.__cause__ is not None


def test_no_input_tool_passes_a_copy_of_the_object() -> None:
    now = Tool(name="now", execute=echo)
    raw = {"anything": [1]}
    parsed = parse_arguments(now, raw)
    assert parsed == raw
    parsed["anything"].append(2)
    assert raw == {"anything": [1]}
    assert parse_arguments(now, None) == {}
    with pytest.raises(ToolArgumentsError, match=r"expected a JSON object, got \[\]"):
        parse_arguments(now, "[]")


# --------------------------------------------------------------------------- #
# parse_arguments with JSON Schema dict inputs: jsonschema and the fallback
# --------------------------------------------------------------------------- #

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


@pytest.fixture(params=["jsonschema", "builtin"])
def validator(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test with the jsonschema package and with the built-in validator."""
    if request.param == "jsonschema":
        pytest.importorskip("jsonschema")
    else:
        monkeypatch.setattr(_tools, "_jsonschema_module", lambda: None)
    return str(request.param)


@pytest.fixture
def search(validator: str) -> Tool:
    made = Tool(name="search", input=SEARCH_SCHEMA, execute=echo)
    # Make sure the fixture really exercises the path it claims to.
    assert (made._validator is None) == (validator == "builtin")
    return made


def test_dict_schema_arguments_pass_as_a_dict(search: Tool) -> None:
    raw = {
        "query": "q",
        "limit": 3,
        "sort": "top",
        "tags": ["a"],
        "filter": {"site": None},
    }
    assert parse_arguments(search, raw) == raw
    assert parse_arguments(search, json.dumps(raw)) == raw
    assert parse_arguments(search, raw) is not raw


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"query": 5}, r"\$\.query"),
        ({"query": "q", "limit": "3"}, r"\$\.limit"),
        ({"query": "q", "limit": True}, r"\$\.limit"),
        ({"query": "q", "limit": 1.5}, r"\$\.limit"),
        ({"query": "q", "sort": "old"}, r"\$\.sort"),
        ({"query": "q", "tags": ["a", 1]}, r"\$\.tags\[1\]"),
        ({"query": "q", "tags": "a"}, r"\$\.tags"),
        ({"query": "q", "filter": {"site": 1}}, r"\$\.filter\.site"),
        ({"query": "q", "filter": {}}, r"\$\.filter"),
        ({"query": "q", "extra": 1}, r"\$"),
        ({}, r"\$"),
    ],
)
def test_dict_schema_violations_name_the_path(
    search: Tool, raw: dict[str, Any], path: str
) -> None:
    with pytest.raises(
        ToolArgumentsError,
        match=rf"^arguments for tool 'search' are invalid: .* @ {path}",
    ):
        parse_arguments(search, raw)


def test_dict_schema_accepts_integral_float_as_integer(search: Tool) -> None:
    assert parse_arguments(search, {"query": "q", "limit": 3.0}) == {
        "query": "q",
        "limit": 3.0,
    }


def test_jsonschema_messages_are_passed_through() -> None:
    pytest.importorskip("jsonschema")
    search = Tool(name="search", input=SEARCH_SCHEMA, execute=echo)
    with pytest.raises(
        ToolArgumentsError,
        match=(
            r"invalid: '3' is not of type 'integer' @ \$\.limit; "
            r"'old' is not one of \['new', 'top'\] @ \$\.sort$"
        ),
    ):
        parse_arguments(search, {"query": "q", "limit": "3", "sort": "old"})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"query": 5}, r"expected a string, got 5 @ \$\.query"),
        ({"query": "q", "limit": "3"}, r"expected an integer, got '3' @ \$\.limit"),
        (
            {"query": "q", "sort": "old"},
            r"expected one of 'new', 'top', got 'old' @ \$\.sort",
        ),
        ({"query": "q", "tags": ["a", 1]}, r"expected a string, got 1 @ \$\.tags\[1\]"),
        (
            {"query": "q", "filter": {"site": 1}},
            r"expected a string or null, got 1 @ \$\.filter\.site",
        ),
        (
            {"query": "q", "filter": {}},
            r"required property is missing @ \$\.filter\.site",
        ),
        ({"query": "q", "a": 1, "b": 2}, r"unexpected properties 'a', 'b' @ \$"),
        ({}, r"required property is missing @ \$\.query"),
    ],
)
def test_builtin_validator_messages(
    monkeypatch: pytest.MonkeyPatch, raw: dict[str, Any], message: str
) -> None:
    monkeypatch.setattr(_tools, "_jsonschema_module", lambda: None)
    search = Tool(name="search", input=SEARCH_SCHEMA, execute=echo)
    with pytest.raises(ToolArgumentsError, match=rf"invalid: {message}$"):
        parse_arguments(search, raw)


@pytest.mark.parametrize(
    ("schema", "value", "errors"),
    [
        ({"type": "number"}, 1, []),
        ({"type": "number"}, True, ["expected a number, got True @ $"]),
        ({"type": "boolean"}, 0, ["expected a boolean, got 0 @ $"]),
        ({"type": "null"}, None, []),
        ({"type": "null"}, 0, ["expected null, got 0 @ $"]),
        ({"type": "integer"}, 2.0, []),
        ({"const": 1}, 1.0, []),
        ({"const": 1}, True, ["expected 1, got True @ $"]),
        ({"enum": [1, "a"]}, True, ["expected one of 1, 'a', got True @ $"]),
        (True, "anything", []),
        (False, 1, ["no value is allowed here, got 1 @ $"]),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 3, []),
        (
            {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            [],
            ["[] matches none of the 2 allowed schemas @ $"],
        ),
        (
            {"type": "object", "additionalProperties": {"type": "integer"}},
            {"a": 1, "b": "x"},
            ["expected an integer, got 'x' @ $.b"],
        ),
        (
            {"type": "array", "items": {"type": "object", "required": ["id"]}},
            [{"id": 1}, {}],
            ["required property is missing @ $[1].id"],
        ),
        ({"type": "string", "minLength": 5}, "ab", []),  # not enforced: documented
    ],
)
def test_builtin_validator_keywords(schema: Any, value: Any, errors: list[str]) -> None:
    assert _tools._collect(schema, value, "$") == errors


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
        ("abc", r"tools must be a list of Tool or a dict name -> Tool, got 'abc'"),
        (5, r"tools must be a list of Tool or a dict"),
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


def test_public_names() -> None:
    assert _tools.__all__ == sorted(_tools.__all__)
    for name in _tools.__all__:
        assert hasattr(_tools, name)
