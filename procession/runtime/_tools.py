"""Tools: what the model is offered, how its arguments are checked, how a tool runs.

A ``Tool`` has a name, a description, an input and an ``execute`` function::

    @attrs.frozen
    class WeatherInput:
        city: str
        unit: Literal["celsius", "fahrenheit"] = "celsius"
        \"\"\"Temperature unit.\"\"\"

    @tool
    async def get_weather(args: WeatherInput, context: ToolContext) -> str:
        \"\"\"Current weather in a city.\"\"\"
        ...

The input is one of:

* an attrs class: the JSON Schema the model sees is generated from it
  (``json_schema``) and the model's arguments are structured into an instance
  with a strict cattrs converter;
* a JSON Schema dict (an object schema): the arguments are validated against it
  (with the ``jsonschema`` package when it is installed — the ``jsonschema``
  extra — else with a small built-in validator) and passed on as a ``dict``;
* ``None``: the tool takes no arguments (``{"type": "object", "properties": {}}``);
  whatever object the model sends is passed on as a ``dict``.

The agent loop uses the three steps separately: ``ToolSet.definitions()`` for the
model request, ``parse_arguments`` when a tool call arrives (a
``ToolArgumentsError`` goes back to the model as a ``tool-error`` chunk, so it can
correct itself) and ``execute_tool`` to run it.

Argument checking is strict, as JSON Schema is: ``"5"`` is not an integer and
``1`` is not a boolean. The one leniency, also JSON Schema's, is that an integral
float (``5.0``) is accepted as an integer.
"""

from __future__ import annotations

import ast
import collections.abc
import copy
import enum
import functools
import importlib
import inspect
import itertools
import json
import math
import re
import reprlib
import textwrap
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import (
    Annotated,
    Any,
    Final,
    Literal,
    TypeAlias,
    get_args,
    get_origin,
    overload,
)

import attrs
import cattrs
import trio
from cattrs.cols import (
    homogenous_tuple_structure_factory,
    list_structure_factory,
    mapping_structure_factory,
)
from cattrs.errors import BaseValidationError, ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn

from .._errors import ConfigurationError, ToolArgumentsError
from ..models import ToolDefinition
from ..processors import AbortSignal, ProcessorStreamWriter, RequestContext

__all__ = [
    "Tool",
    "ToolContext",
    "ToolInput",
    "ToolSet",
    "execute_tool",
    "json_schema",
    "parse_arguments",
    "tool",
]

ToolInput: TypeAlias = type[Any] | Mapping[str, Any] | None
"""What a tool's ``input`` may be: an attrs class, a JSON Schema dict or None."""

_NAME_RE: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""Tool names model providers accept (Anthropic's and OpenAI's common rule)."""

_NO_ARGUMENTS_SCHEMA: Final[Mapping[str, Any]] = {"type": "object", "properties": {}}

_MAX_REPORTED_ERRORS: Final = 10
"""Argument errors listed in one ToolArgumentsError; the rest are counted."""

_NoneType: Final = type(None)


# --------------------------------------------------------------------------- #
# Small helpers
# --------------------------------------------------------------------------- #

_repr: Final = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlist = 6
_repr.maxdict = 6
_repr.maxlevel = 3


def _short(value: object) -> str:
    """A repr short enough to quote in an error message (model output may be huge)."""
    return _repr.repr(value)


_TYPE_WORDS: Final = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
}


def _is_json_type(value: object, json_type: str) -> bool:
    """Whether ``value`` is an instance of the JSON Schema type ``json_type``."""
    if json_type == "object":
        return isinstance(value, Mapping)
    if json_type == "array":
        return isinstance(value, list | tuple)
    if json_type == "string":
        return isinstance(value, str)
    if json_type == "boolean":
        return isinstance(value, bool)
    if json_type == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if json_type == "integer":
        return isinstance(value, int) or (
            isinstance(value, float) and value.is_integer()
        )
    if json_type == "number":
        return isinstance(value, int | float)
    return False


def _json_type_of(value: object) -> str:
    for json_type in ("null", "boolean", "integer", "number", "string"):
        if _is_json_type(value, json_type):
            return json_type
    return "object" if isinstance(value, Mapping) else "array"


def _json_equal(a: object, b: object) -> bool:
    """JSON equality: booleans are not numbers, ``1 == 1.0``, otherwise same type."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def _is_json_primitive(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, str | int)


def _as_json(value: object) -> tuple[bool, Any]:
    """``(True, json_value)`` if ``value`` can be written as JSON (tuples become
    lists, enum members their values), else ``(False, None)``."""
    if isinstance(value, enum.Enum):
        value = value.value
    if _is_json_primitive(value):
        return True, value
    if isinstance(value, list | tuple):
        items = [_as_json(item) for item in value]
        if all(ok for ok, _ in items):
            return True, [item for _, item in items]
        return False, None
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        pairs = {k: _as_json(v) for k, v in value.items()}
        if all(ok for ok, _ in pairs.values()):
            return True, {k: v for k, (_, v) in pairs.items()}
    return False, None


def _type_name(tp: object) -> str:
    if isinstance(tp, type) and not get_args(tp):
        return tp.__qualname__
    return repr(tp).replace("typing.", "")


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    paragraph = inspect.cleandoc(doc).strip().split("\n\n", 1)[0]
    return " ".join(line.strip() for line in paragraph.splitlines())


# --------------------------------------------------------------------------- #
# JSON Schema from attrs classes
# --------------------------------------------------------------------------- #


class _SchemaError(Exception):
    """Raised inside schema generation; turned into a ConfigurationError naming
    the tool (or the class, for ``json_schema``)."""


class _UnsupportedTypeError(_SchemaError):
    """A field whose type has no JSON Schema (the message lists what has)."""

    def __init__(self, where: str, tp: object, hint: str = "") -> None:
        supported = (
            "str, int, float, bool, None, list[T], tuple[T, ...], dict[str, T], "
            "T | None, Literal[...], an Enum, an attrs class or Any"
        )
        super().__init__(
            f"{where} has the type {_type_name(tp)}, which procession cannot "
            f"describe as JSON Schema{': ' + hint if hint else ''}; use {supported}"
        )


def _field_docstrings(cls: type[Any]) -> dict[str, str]:
    """Attribute docstrings (a string literal right after a field) of an attrs
    class and its attrs bases, read from the source. Best effort: a class whose
    source is not available has none."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not attrs.has(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        node = tree.body[0] if tree.body else None
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt, following in itertools.pairwise(node.body):
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                name = stmt.target.id
            elif (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
            ):
                name = stmt.targets[0].id
            else:
                continue
            if (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[name] = inspect.cleandoc(following.value.value)
    return docs


def _resolve(cls: type[Any]) -> None:
    try:
        attrs.resolve_types(cls)
    except NameError as error:
        raise _SchemaError(
            f"an annotation of {cls.__qualname__} does not resolve ({error}); "
            f"define the types it names at module level"
        ) from error


def _enum_schema(values: Sequence[Any]) -> dict[str, Any]:
    json_types = {_json_type_of(v) for v in values}
    if len(json_types) == 1:
        return {"type": json_types.pop(), "enum": list(values)}
    return {"enum": list(values)}


def _class_schema(cls: type[Any], stack: tuple[type[Any], ...]) -> dict[str, Any]:
    if cls in stack:
        raise _SchemaError(
            f"{cls.__qualname__} refers to itself; recursive inputs have no inline "
            f"JSON Schema (use a JSON Schema dict input)"
        )
    stack = (*stack, cls)
    _resolve(cls)
    docs = _field_docstrings(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(cls):
        if not field.init:
            continue
        where = f"field {cls.__qualname__}.{field.name}"
        if field.type is None:
            raise _SchemaError(f"{where} has no type annotation")
        schema = _type_schema(field.type, where, stack)
        description = field.metadata.get("description", docs.get(field.name))
        if description:
            schema["description"] = description
        if field.default is attrs.NOTHING:
            required.append(field.name)
        else:
            ok, default = _default_value(field.default)
            if ok:
                schema["default"] = default
        properties[field.name] = schema
    result: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        result["required"] = required
    result["additionalProperties"] = False
    return result


def _default_value(default: Any) -> tuple[bool, Any]:
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]  # attrs.Factory is a class at runtime; its stub is a function
        # Calling an arbitrary factory could have side effects; the common
        # empty containers are safe to describe.
        empty: dict[Any, Any] = {list: [], tuple: [], dict: {}}
        factory = default.factory
        if not default.takes_self and factory in empty:
            return True, empty[factory]
        return False, None
    return _as_json(default)


def _type_schema(tp: Any, where: str, stack: tuple[type[Any], ...]) -> dict[str, Any]:
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        return _type_schema(args[0], where, stack)
    if tp is Any:
        return {}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if tp in simple:
        return {"type": simple[tp]}
    if tp is None or tp is _NoneType:
        return {"type": "null"}
    if _is_literal(tp):
        if not all(
            _is_json_primitive(v) and not isinstance(v, enum.Enum) for v in args
        ):
            raise _UnsupportedTypeError(
                where, tp, "Literal values must be str, int, bool or None"
            )
        return _enum_schema(args)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [member.value for member in tp]
        if not values or not all(_is_json_primitive(v) for v in values):
            raise _UnsupportedTypeError(
                where, tp, "enum values must be str, int, float, bool or None"
            )
        return _enum_schema(values)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not _NoneType]
        if len(members) == 1 and len(args) == 2:
            return {"anyOf": [_type_schema(members[0], where, stack), {"type": "null"}]}
        raise _UnsupportedTypeError(
            where,
            tp,
            "the only union supported is T | None (use an attrs class or Any)",
        )
    if tp in (list, tuple) or origin in (list, collections.abc.Sequence):
        item = args[0] if args else Any
        return _array_schema(_type_schema(item, where, stack))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _array_schema(_type_schema(args[0], where, stack))
        raise _UnsupportedTypeError(
            where, tp, "only variable-length tuples (tuple[T, ...]) are supported"
        )
    if tp is dict or origin in (dict, collections.abc.Mapping):
        key, value = args if args else (str, Any)
        if key is not str:
            raise _UnsupportedTypeError(where, tp, "JSON object keys are strings")
        value_schema = _type_schema(value, where, stack)
        if not value_schema:
            return {"type": "object"}
        return {"type": "object", "additionalProperties": value_schema}
    if isinstance(tp, type) and attrs.has(tp):
        return _class_schema(tp, stack)
    raise _UnsupportedTypeError(where, tp)


def _array_schema(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items} if items else {"type": "array"}


def json_schema(cls: type[Any]) -> dict[str, Any]:
    """The JSON Schema (an object schema) of the attrs class ``cls``.

    A fresh dict each call. Fields without a default are ``required``; a field's
    ``metadata={"description": ...}``, or else the docstring written under it,
    becomes its ``description``; JSON-able defaults are written as ``default``.
    Nested attrs classes are inlined and, like ``cls``, forbid extra properties.

    Raises:
        ConfigurationError: ``cls`` is not an attrs class, or a field's type
            cannot be described (the message names the field and the type).
    """
    if not (isinstance(cls, type) and attrs.has(cls)):
        raise ConfigurationError(f"expected an attrs class, got {cls!r}")
    try:
        return _class_schema(cls, ())
    except _SchemaError as error:
        raise ConfigurationError(str(error)) from None


# --------------------------------------------------------------------------- #
# Strict cattrs converter for tool arguments
# --------------------------------------------------------------------------- #


class _MismatchError(ValueError):
    """A value of the wrong JSON type, or not one of the allowed values. Its text
    is the whole message ``transform_error`` shows."""


def _mismatch(expected: str, value: object) -> _MismatchError:
    return _MismatchError(f"expected {expected}, got {_short(value)}")


def _structure_str(value: Any, _: Any) -> str:
    if isinstance(value, str):
        return value
    raise _mismatch("a string", value)


def _structure_int(value: Any, _: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _mismatch("an integer", value)


def _structure_float(value: Any, _: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise _mismatch("a number", value)


def _structure_bool(value: Any, _: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise _mismatch("a boolean", value)


def _structure_none(value: Any, _: Any) -> None:
    if value is not None:
        raise _mismatch("null", value)


def _literal_hook(tp: Any) -> Callable[[Any, Any], Any]:
    allowed = get_args(tp)
    expected = f"one of {', '.join(repr(v) for v in allowed)}"

    def structure(value: Any, _: Any) -> Any:
        for candidate in allowed:
            if _json_equal(value, candidate):
                return candidate
        raise _mismatch(expected, value)

    return structure


def _structure_enum(value: Any, tp: type[enum.Enum]) -> enum.Enum:
    for member in tp:
        if _json_equal(value, member.value):
            return member
    expected = f"one of {', '.join(repr(m.value) for m in tp)}"
    raise _mismatch(expected, value)


_SCALAR_HOOKS: Final[Mapping[Any, Callable[[Any, Any], Any]]] = {
    str: _structure_str,
    int: _structure_int,
    float: _structure_float,
    bool: _structure_bool,
    _NoneType: _structure_none,
}


def _structure_scalar(value: Any, tp: Any) -> Any:
    """The hook for str, int, float, bool, None and enums. One hook, because
    cattrs dispatches classes with ``functools.singledispatch``, which would
    send a ``str``-valued enum to the ``str`` hook."""
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _structure_enum(value, tp)
    hook = _SCALAR_HOOKS.get(tp)
    if hook is None:  # a subclass of a scalar type: json_schema rejects those
        raise _MismatchError(f"cannot structure {_type_name(tp)}")
    return hook(value, tp)


def _checked(
    inner: Callable[[Any, Any], Any], accepts: type | tuple[type, ...], expected: str
) -> Callable[[Any, Any], Any]:
    """``inner`` behind a type check, so cattrs never turns a string into a list
    of characters or a list into a dict."""

    def structure(value: Any, tp: Any) -> Any:
        if not isinstance(value, accepts):
            raise _mismatch(expected, value)
        return inner(value, tp)

    return structure


def _is_literal(tp: Any) -> bool:
    origin: object = get_origin(tp)
    return origin is Literal


def _is_list_like(tp: Any) -> bool:
    return tp is list or get_origin(tp) in (list, collections.abc.Sequence)


def _is_tuple(tp: Any) -> bool:
    return tp is tuple or get_origin(tp) is tuple


def _is_mapping(tp: Any) -> bool:
    return tp is dict or get_origin(tp) in (dict, collections.abc.Mapping)


def _new_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    for cls in (*_SCALAR_HOOKS, enum.Enum):
        converter.register_structure_hook(cls, _structure_scalar)
    converter.register_structure_hook_factory(_is_literal, _literal_hook)
    converter.register_structure_hook_factory(
        _is_list_like,
        lambda t, c: _checked(
            list_structure_factory(list[Any] if t is list else t, c),
            (list, tuple),
            "an array",
        ),
    )
    converter.register_structure_hook_factory(
        _is_tuple,
        lambda t, c: _checked(
            homogenous_tuple_structure_factory(tuple[Any, ...] if t is tuple else t, c),
            (list, tuple),
            "an array",
        ),
    )
    converter.register_structure_hook_factory(
        _is_mapping,
        lambda t, c: _checked(
            mapping_structure_factory(dict[str, Any] if t is dict else t, c),
            Mapping,
            "an object",
        ),
    )
    converter.register_structure_hook_factory(
        lambda t: isinstance(t, type) and attrs.has(t),
        lambda t, c: _checked(make_dict_structure_fn(t, c), Mapping, "an object"),
    )
    return converter


_converter: Final = _new_converter()
"""Structures tool arguments into attrs inputs. Private: use ``parse_arguments``."""


def _format_exception(error: BaseException, _type: type | None) -> str:
    if isinstance(error, _MismatchError):
        return str(error)
    if isinstance(error, KeyError):
        return "required property is missing"
    if isinstance(error, ForbiddenExtraKeysError):
        names = ", ".join(repr(k) for k in sorted(error.extra_fields))
        noun = "property" if len(error.extra_fields) == 1 else "properties"
        return f"unexpected {noun} {names}"
    # e.g. an attrs validator of the input class rejecting a value.
    return f"{type(error).__name__}: {error}"


def _problem(messages: list[str]) -> str:
    shown = messages[:_MAX_REPORTED_ERRORS]
    if len(messages) > len(shown):
        shown.append(f"and {len(messages) - len(shown)} more")
    return "; ".join(shown)


# --------------------------------------------------------------------------- #
# JSON Schema validation (jsonschema if installed, else built in)
# --------------------------------------------------------------------------- #


@functools.cache
def _jsonschema_module() -> types.ModuleType | None:
    """The ``jsonschema`` package, if installed (imported on first need: it is
    an optional dependency and slow to import). Untyped, hence ``ModuleType``."""
    try:
        return importlib.import_module("jsonschema")
    except ImportError:
        return None


def _builtin_errors(schema: Any, value: Any, path: str, out: list[str]) -> None:
    """Append to ``out`` each way ``value`` fails ``schema``. Covers ``type``,
    ``enum``, ``const``, ``anyOf``, ``required``, ``properties``,
    ``additionalProperties`` and ``items``; other keywords are not enforced."""
    if schema is True or schema == {}:
        return
    if schema is False:
        out.append(f"no value is allowed here, got {_short(value)} @ {path}")
        return
    if not isinstance(schema, Mapping):
        return
    if "type" in schema:
        json_types = (
            [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
        )
        if not any(_is_json_type(value, t) for t in json_types):
            words = " or ".join(_TYPE_WORDS.get(t, repr(t)) for t in json_types)
            out.append(f"expected {words}, got {_short(value)} @ {path}")
            return
    if "enum" in schema and not any(_json_equal(value, v) for v in schema["enum"]):
        allowed = ", ".join(repr(v) for v in schema["enum"])
        out.append(f"expected one of {allowed}, got {_short(value)} @ {path}")
    if "const" in schema and not _json_equal(value, schema["const"]):
        out.append(f"expected {schema['const']!r}, got {_short(value)} @ {path}")
    if "anyOf" in schema:
        branches = schema["anyOf"]
        if not any(not _collect(branch, value, path) for branch in branches):
            out.append(
                f"{_short(value)} matches none of the {len(branches)} allowed "
                f"schemas @ {path}"
            )
    if isinstance(value, Mapping):
        _object_errors(schema, value, path, out)
    elif isinstance(value, list | tuple):
        items = schema.get("items")
        if isinstance(items, Mapping | bool):
            for index, item in enumerate(value):
                _builtin_errors(items, item, f"{path}[{index}]", out)


def _collect(schema: Any, value: Any, path: str) -> list[str]:
    found: list[str] = []
    _builtin_errors(schema, value, path, found)
    return found


def _object_errors(
    schema: Mapping[str, Any], value: Mapping[str, Any], path: str, out: list[str]
) -> None:
    for name in schema.get("required", ()):
        if name not in value:
            out.append(f"required property is missing @ {path}.{name}")
    properties = schema.get("properties", {})
    additional = schema.get("additionalProperties", True)
    extra: list[str] = []
    for key, item in value.items():
        if key in properties:
            _builtin_errors(properties[key], item, f"{path}.{key}", out)
        elif additional is False:
            extra.append(key)
        else:
            _builtin_errors(additional, item, f"{path}.{key}", out)
    if extra:
        noun = "property" if len(extra) == 1 else "properties"
        out.append(f"unexpected {noun} {', '.join(map(repr, extra))} @ {path}")


# --------------------------------------------------------------------------- #
# Tool, ToolContext, decorator
# --------------------------------------------------------------------------- #


@attrs.frozen(kw_only=True)
class ToolContext:
    """What a tool's ``execute`` receives besides its arguments."""

    tool_call_id: str
    tool_name: str
    writer: ProcessorStreamWriter | None = None
    """Emits custom ``data-*`` chunks into the stream at the tool call's position."""
    request_context: RequestContext = attrs.field(factory=RequestContext)
    abort_signal: AbortSignal | None = None
    """Set when the run is being cancelled (a tool may also just be cancelled)."""
    messages: Sequence[Any] = ()
    """The conversation so far (read it; do not edit it)."""


def _accepts_two_positional(fn: Callable[..., Any]) -> bool:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no signature: trust them
        return True
    try:
        signature.bind(None, None)
    except TypeError:
        return False
    return True


def _is_async_callable(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    # A callable object with ``async def __call__``.
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - we want the method itself
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(call)


@attrs.frozen(kw_only=True, eq=False)
class Tool:
    """A function the model may call.

    Args:
        name: what the model calls it: 1 to 64 letters, digits, ``_`` or ``-``.
        description: what it does, for the model.
        input: an attrs class, a JSON Schema object schema, or None (see the
            module docstring).
        execute: ``execute(args, context)``, sync or async (detected once, here).
            A sync ``execute`` runs inline in the agent's task: blocking I/O
            belongs in ``await trio.to_thread.run_sync(...)`` inside an async one.
        provider_options: passed to the model provider with the definition.

    Tools compare by identity. Construction validates everything and builds the
    schema, so a bad tool fails when it is defined, not when it is called.

    Raises:
        ConfigurationError: naming the tool and what was expected.
    """

    name: str
    description: str = ""
    input: type[Any] | Mapping[str, Any] | None = None
    execute: Callable[[Any, ToolContext], Any]
    provider_options: Mapping[str, Any] | None = None
    _schema: dict[str, Any] = attrs.field(init=False, repr=False)
    _validator: Any = attrs.field(init=False, repr=False)
    """A jsonschema validator for a dict input, when jsonschema is installed."""
    _is_async: bool = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.fullmatch(self.name):
            raise ConfigurationError(
                f"tool name {self.name!r} is not valid: use 1 to 64 letters, digits, "
                f"'_' or '-' (what model providers accept)"
            )
        if not isinstance(self.description, str):
            raise ConfigurationError(
                f"tool {self.name!r}: description must be a str, got "
                f"{self.description!r}"
            )
        if not callable(self.execute):
            raise ConfigurationError(
                f"tool {self.name!r}: execute must be a function (args, context), "
                f"got {self.execute!r}"
            )
        if not _accepts_two_positional(self.execute):
            raise ConfigurationError(
                f"tool {self.name!r}: execute {self.execute!r} must accept two "
                f"positional arguments (args, context)"
            )
        if self.provider_options is not None and not isinstance(
            self.provider_options, Mapping
        ):
            raise ConfigurationError(
                f"tool {self.name!r}: provider_options must be a mapping or None, "
                f"got {self.provider_options!r}"
            )
        schema, validator = self._build_schema()
        object.__setattr__(self, "_schema", schema)
        object.__setattr__(self, "_validator", validator)
        object.__setattr__(self, "_is_async", _is_async_callable(self.execute))

    def _build_schema(self) -> tuple[dict[str, Any], Any]:
        spec = self.input
        if spec is None:
            return copy.deepcopy(dict(_NO_ARGUMENTS_SCHEMA)), None
        if isinstance(spec, type) and attrs.has(spec):
            try:
                schema = _class_schema(spec, ())
            except _SchemaError as error:
                raise ConfigurationError(f"tool {self.name!r}: {error}") from None
            try:
                _converter.get_structure_hook(spec)
            except Exception as error:
                raise ConfigurationError(
                    f"tool {self.name!r}: cannot build a structuring hook for "
                    f"{spec.__qualname__}: {error}"
                ) from error
            return schema, None
        if isinstance(spec, Mapping):
            if spec.get("type") != "object":
                raise ConfigurationError(
                    f"tool {self.name!r}: a JSON Schema input must be an object "
                    f'schema ({{"type": "object", ...}}), got {_short(spec)}'
                )
            schema = copy.deepcopy(dict(spec))
            return schema, self._make_validator(schema)
        raise ConfigurationError(
            f"tool {self.name!r}: input must be an attrs class, a JSON Schema dict "
            f"or None, got {spec!r}"
        )

    def _make_validator(self, schema: dict[str, Any]) -> Any:
        jsonschema = _jsonschema_module()
        if jsonschema is None:
            return None
        cls = jsonschema.validators.validator_for(
            schema, default=jsonschema.Draft202012Validator
        )
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as error:
            raise ConfigurationError(
                f"tool {self.name!r}: the input is not a valid JSON Schema: "
                f"{error.message} (at {error.json_path})"
            ) from None
        return cls(schema)

    @property
    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments (a fresh copy)."""
        return copy.deepcopy(self._schema)

    @property
    def is_async(self) -> bool:
        """Whether ``execute`` is a coroutine function."""
        return self._is_async

    def definition(self) -> ToolDefinition:
        """The tool as the model is offered it (a fresh schema copy each call,
        so a provider adapter may edit it)."""
        return ToolDefinition(
            name=self.name,
            description=self.description,
            input_schema=self.input_schema,
            provider_options=self.provider_options,
        )


def _adapt(fn: Callable[..., Any]) -> Callable[[Any, ToolContext], Any]:
    """``fn`` as ``execute(args, context)``: functions of one parameter are
    called with the arguments only, of none with nothing."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return fn
    kinds = inspect.Parameter
    if any(p.kind is kinds.KEYWORD_ONLY and p.default is p.empty for p in parameters):
        raise ConfigurationError(
            f"tool function {fn!r} has required keyword-only parameters; it is "
            f"called as fn(args, context)"
        )
    if any(p.kind is kinds.VAR_POSITIONAL for p in parameters):
        return fn
    positional = [
        p
        for p in parameters
        if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
    ]
    if len(positional) >= 2:
        return fn
    takes_args = len(positional) == 1
    adapted: Callable[[Any, ToolContext], Any]
    if inspect.iscoroutinefunction(fn):

        async def adapted_async(args: Any, context: ToolContext) -> Any:
            return await (fn(args) if takes_args else fn())

        adapted = adapted_async
    else:

        def adapted_sync(args: Any, context: ToolContext) -> Any:
            return fn(args) if takes_args else fn()

        adapted = adapted_sync
    # Not functools.wraps: its __wrapped__ would make inspect.signature report
    # fn's own (shorter) signature.
    adapted.__name__ = getattr(fn, "__name__", adapted.__name__)
    adapted.__qualname__ = getattr(fn, "__qualname__", adapted.__qualname__)
    adapted.__doc__ = fn.__doc__
    return adapted


def _input_from_annotation(fn: Callable[..., Any]) -> type[Any] | None:
    """The attrs class the first parameter of ``fn`` is annotated with, if any."""
    try:
        first = next(iter(inspect.signature(fn).parameters.values()), None)
    except (TypeError, ValueError):
        return None
    if first is None:
        return None
    try:
        annotation = typing.get_type_hints(fn).get(first.name)
    except Exception:  # an unresolvable forward reference: no inference
        annotation = first.annotation
    if isinstance(annotation, type) and attrs.has(annotation):
        return annotation
    return None


def _make_tool(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    input: ToolInput,
    provider_options: Mapping[str, Any] | None,
) -> Tool:
    if not callable(fn):
        raise ConfigurationError(f"@tool decorates a function, got {fn!r}")
    if name is None:
        name = getattr(fn, "__name__", None)
        if not isinstance(name, str):
            raise ConfigurationError(f"@tool cannot name {fn!r}; pass name=...")
    if input is None:
        input = _input_from_annotation(fn)
    return Tool(
        name=name,
        description=(
            description
            if description is not None
            else _first_paragraph(inspect.getdoc(fn))
        ),
        input=input,
        execute=_adapt(fn),
        provider_options=provider_options,
    )


@overload
def tool(name: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    name: str | None = None,
    *,
    description: str | None = None,
    input: ToolInput = None,
    provider_options: Mapping[str, Any] | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    name: str | Callable[..., Any] | None = None,
    *,
    description: str | None = None,
    input: ToolInput = None,
    provider_options: Mapping[str, Any] | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a ``Tool`` of a function: ``@tool`` or ``@tool("name", ...)``.

    * ``name`` defaults to the function's name; ``description`` to the first
      paragraph of its docstring.
    * ``input`` defaults to the attrs class the first parameter is annotated
      with (else None: no arguments).
    * The function is called as ``fn(args, context)``; one that takes a single
      parameter is called as ``fn(args)``, one that takes none as ``fn()``.

    The decorated name is bound to the ``Tool``, not the function.

    Raises:
        ConfigurationError: as ``Tool`` does.
    """
    if callable(name):
        return _make_tool(name, None, description, input, provider_options)

    def decorate(fn: Callable[..., Any]) -> Tool:
        return _make_tool(fn, name, description, input, provider_options)

    return decorate


# --------------------------------------------------------------------------- #
# Parsing and execution
# --------------------------------------------------------------------------- #


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def _decode(tool_name: str, raw: object) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            raw = json.loads(raw, parse_constant=_reject_constant)
        except ValueError as error:  # JSONDecodeError is a ValueError
            raise ToolArgumentsError(
                tool_name, f"not valid JSON ({error}): {_short(raw)}"
            ) from None
    if not isinstance(raw, Mapping):
        raise ToolArgumentsError(
            tool_name, f"expected a JSON object, got {_short(raw)}"
        )
    # A copy: the arguments arrived in a chunk, an immutable value that earlier
    # stages may still hold, and the tool may edit what it receives.
    return copy.deepcopy(dict(raw))


def parse_arguments(tool: Tool, raw: Mapping[str, Any] | str | None) -> Any:
    """Check the model's arguments for ``tool`` and return what ``execute`` gets.

    ``raw`` is a dict, its JSON text, or None; None and an empty string mean
    ``{}`` (providers send either for a call without arguments). Returns an
    instance of the tool's attrs input, else a ``dict`` (a copy of ``raw``).
    Pure: no I/O, no checkpoint.

    Raises:
        ToolArgumentsError: the arguments are not JSON, not an object, or fail
            the input; the message lists every problem with its path, e.g.
            ``expected an integer, got '5' @ $.count`` (up to ten).
    """
    data = _decode(tool.name, raw)
    spec = tool.input
    if spec is None:
        return data
    if isinstance(spec, type):
        try:
            return _converter.structure(data, spec)
        except BaseValidationError as error:
            problems = cattrs.transform_error(error, format_exception=_format_exception)
            raise ToolArgumentsError(tool.name, _problem(problems)) from error
        except (ValueError, TypeError) as error:
            # Raised by the input class itself (an attrs validator, say).
            raise ToolArgumentsError(
                tool.name, f"{type(error).__name__}: {error} @ $"
            ) from error
    messages: list[str]
    if tool._validator is not None:
        found = sorted(
            tool._validator.iter_errors(data), key=lambda e: (e.json_path, e.message)
        )
        messages = [f"{e.message} @ {e.json_path}" for e in found]
    else:
        messages = _collect(tool._schema, data, "$")
    if messages:
        raise ToolArgumentsError(tool.name, _problem(messages))
    return data


async def execute_tool(tool: Tool, args: Any, context: ToolContext) -> Any:
    """Run ``tool.execute(args, context)`` and return its result.

    ``args`` is what ``parse_arguments`` returned. An async ``execute`` is
    awaited (it checkpoints as it does). A sync one runs inline, after a check
    for cancellation and followed by a cancel-shielded schedule point, so its
    result is never lost to a cancellation that arrives while it runs; it blocks
    the run while it runs, so blocking I/O belongs in
    ``trio.to_thread.run_sync``. A sync ``execute`` that returns a coroutine has
    it awaited. Exceptions propagate unchanged (the agent turns them into
    ``tool-error`` chunks).
    """
    if tool.is_async:
        return await tool.execute(args, context)
    await trio.lowlevel.checkpoint_if_cancelled()
    result = tool.execute(args, context)
    if inspect.iscoroutine(result):
        return await result
    await trio.lowlevel.cancel_shielded_checkpoint()
    return result


# --------------------------------------------------------------------------- #
# ToolSet
# --------------------------------------------------------------------------- #


class ToolSet(Mapping[str, Tool]):
    """The tools of an agent or a call: a read-only mapping name -> ``Tool``,
    in the order given.

    Built from a list of tools (names must be unique) or a dict. In a dict the
    key is the name the model sees, as in Mastra's ``tools: {name: tool}``: a
    tool whose own name differs is re-made under the key (``attrs.evolve``), so
    ``toolset[key].name == key`` always holds.

    Raises:
        ConfigurationError: a value that is not a ``Tool``, a duplicate name, or
            a key that is not a valid tool name.
    """

    __slots__ = ("_tools",)

    def __init__(self, tools: Iterable[Tool] | Mapping[str, Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        if isinstance(tools, Mapping):
            for key, value in tools.items():
                if not isinstance(key, str):
                    raise ConfigurationError(
                        f"tool names must be str, got the key {key!r}"
                    )
                self._tools[key] = self._renamed(_check_tool(value), key)
            return
        given: object = tools  # typed loosely: callers do pass a str by mistake
        if isinstance(given, str | bytes) or not isinstance(given, Iterable):
            raise ConfigurationError(
                f"tools must be a list of Tool or a dict name -> Tool, got {tools!r}"
            )
        for value in tools:
            item = _check_tool(value)
            if item.name in self._tools:
                raise ConfigurationError(
                    f"two tools are named {item.name!r}: {self._tools[item.name]!r} "
                    f"and {item!r}; tool names must be unique"
                )
            self._tools[item.name] = item

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

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolSet({list(self._tools)!r})"

    @classmethod
    def of(cls, tools: ToolSet | Iterable[Tool] | Mapping[str, Tool]) -> ToolSet:
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
        if active is None:
            return list(self._tools)
        if isinstance(active, str):
            raise ConfigurationError(
                f"active tools must be a sequence of names, got the str {active!r}; "
                f"did you mean [{active!r}]?"
            )
        unknown = [name for name in active if name not in self._tools]
        if unknown:
            raise ConfigurationError(
                f"active tools {unknown!r} are not in the tool set "
                f"(known: {list(self._tools)!r})"
            )
        wanted = set(active)
        return [name for name in self._tools if name in wanted]

    def definitions(self, active: Sequence[str] | None = None) -> list[ToolDefinition]:
        """The definitions to offer the model, for the tools ``names(active)``
        returns (a fresh schema copy each).

        Raises:
            ConfigurationError: as ``names`` does.
        """
        return [self._tools[name].definition() for name in self.names(active)]


def _check_tool(value: object) -> Tool:
    if not isinstance(value, Tool):
        raise ConfigurationError(
            f"expected a Tool (make one with Tool(...) or @tool), got {value!r}"
        )
    return value
