"""Checking the model's arguments for a tool: a strict cattrs converter for
attrs inputs, JSON Schema validation for dict inputs (the ``jsonschema`` package
when it is installed, else a small built-in validator), and ``parse_arguments``.

Argument checking is strict, as JSON Schema is: ``"5"`` is not an integer and
``1`` is not a boolean. The one leniency, also JSON Schema's, is that an integral
float (``5.0``) is accepted as an integer.
"""

from __future__ import annotations

import collections.abc
import copy
import enum
import functools
import importlib
import json
import reprlib
import types
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import (
    homogenous_tuple_structure_factory,
    list_structure_factory,
    mapping_structure_factory,
)
from cattrs.errors import BaseValidationError, ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn

from ..._errors import ConfigurationError, ToolArgumentsError
from ._schema import _is_json_type, _is_literal, _NoneType, _type_name

if TYPE_CHECKING:
    from ._tool import Tool

__all__ = ["parse_arguments"]

_MAX_REPORTED_ERRORS: Final = 10
"""Argument errors listed in one ToolArgumentsError; the rest are counted."""


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


def _json_equal(a: object, b: object) -> bool:
    """JSON equality: booleans are not numbers, ``1 == 1.0``, otherwise same type."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


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


def _validator_for(tool_name: str, schema: dict[str, Any]) -> Any:
    """A jsonschema validator for the dict input ``schema`` of the tool
    ``tool_name``, or None when jsonschema is not installed (the built-in
    validator is used then).

    Raises:
        ConfigurationError: ``schema`` is not a valid JSON Schema.
    """
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
            f"tool {tool_name!r}: the input is not a valid JSON Schema: "
            f"{error.message} (at {error.json_path})"
        ) from None
    return cls(schema)


# --------------------------------------------------------------------------- #
# Parsing
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
