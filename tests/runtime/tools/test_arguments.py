"""Argument checking: ``parse_arguments`` with attrs inputs (the strict
converter) and with JSON Schema dict inputs (jsonschema and the built-in
validator)."""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from typing import Any, Literal

import attrs
import pytest

from procession import ToolArgumentsError
from procession.runtime.tools import (
    Tool,
    ToolContext,
    parse_arguments,
)
from procession.wire import _validate  # the checks' home: tool arguments share it

# --------------------------------------------------------------------------- #
# Fixtures: input classes (module level, so their source and annotations resolve)
# --------------------------------------------------------------------------- #


class Color(enum.StrEnum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class Point:
    x: int
    """Horizontal position."""
    y: int = 0


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


def echo(args: Any, context: ToolContext) -> Any:
    return args


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
    with pytest.raises(
        ToolArgumentsError, match=r"arguments for tool 'everything' are invalid"
    ) as info:
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
        monkeypatch.setattr(_validate, "_jsonschema_module", lambda: None)
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
    monkeypatch.setattr(_validate, "_jsonschema_module", lambda: None)
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
    assert _validate._collect(schema, value, "$") == errors
