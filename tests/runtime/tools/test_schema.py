"""JSON Schema generation from attrs input classes (``json_schema``)."""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Optional

import attrs
import pytest

from procession import ConfigurationError
from procession.runtime.tools import (
    Tool,
    ToolContext,
    json_schema,
    parse_arguments,
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
