"""JSON Schema from attrs classes, and the JSON-value helpers it shares with the
value checks (``_validate``).

``json_schema(cls)`` describes an attrs class as the object schema a model is
offered (a tool's input, a structured output). It lives here, below the
processors, so ``procession.runtime.tools`` and the built-in processors share
it. Internally ``_class_schema`` raises ``_SchemaError``, which
``json_schema`` and ``Tool`` turn into a ``ConfigurationError`` naming the class
or the tool.
"""

from __future__ import annotations

import ast
import collections.abc
import enum
import inspect
import itertools
import math
import textwrap
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Final, Literal, get_args, get_origin

import attrs

from .._errors import ConfigurationError

__all__ = ["json_schema"]

_NoneType: Final = type(None)


# --------------------------------------------------------------------------- #
# JSON values and Python types
# --------------------------------------------------------------------------- #


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


def _is_literal(tp: Any) -> bool:
    origin: object = get_origin(tp)
    return origin is Literal


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
