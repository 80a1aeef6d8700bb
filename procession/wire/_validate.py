"""Checking a decoded JSON value against an attrs class (a strict cattrs
converter) or a JSON Schema dict (the ``jsonschema`` package when it is
installed, else a small built-in validator): ``ValueSchema``.

Shared by tool arguments (``procession.runtime.tools``) and structured output
(``procession.processors.builtin.StructuredOutput``), so it sits below both.

Checking is strict, as JSON Schema is: ``"5"`` is not an integer and ``1`` is
not a boolean. The one leniency, also JSON Schema's, is that an integral float
(``5.0``) is accepted as an integer.
"""

from __future__ import annotations

import collections.abc
import copy
import enum
import functools
import importlib
import reprlib
import types
from collections.abc import Callable, Mapping
from typing import Any, Final, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import (
    homogenous_tuple_structure_factory,
    list_structure_factory,
    mapping_structure_factory,
)
from cattrs.errors import BaseValidationError, ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn

from .._errors import ConfigurationError
from ._schema import (
    _class_schema,
    _is_json_type,
    _is_literal,
    _NoneType,
    _SchemaError,
    _type_name,
)

__all__ = ["ValueMismatch", "ValueSchema", "short_repr"]

_MAX_REPORTED_ERRORS: Final = 10
"""Problems listed in one message; the rest are counted."""


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
# Strict cattrs converter
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
"""Structures decoded JSON into attrs classes, strictly. Private: use
``ValueSchema``."""


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


def _validator_for(owner: str, schema: Mapping[str, Any], what: str) -> Any:
    """A jsonschema validator for ``schema`` (``what`` of ``owner``, for the
    error message), or None when jsonschema is not installed (the built-in
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
            f"{owner}: {what} is not a valid JSON Schema: "
            f"{error.message} (at {error.json_path})"
        ) from None
    return cls(schema)


# --------------------------------------------------------------------------- #
# The face: ValueSchema
# --------------------------------------------------------------------------- #


def short_repr(value: object) -> str:
    """A repr short enough to quote in an error message (model output may be
    huge): strings cut at 60 characters, containers at 6 items, 3 levels."""
    return _short(value)


class ValueMismatch(ValueError):
    """A value that does not fit a ``ValueSchema``. ``problems`` lists each
    way, with its JSON path (``expected an integer, got '5' @ $.count``);
    ``str()`` joins up to ten of them. The cattrs or attrs error, if any, is the
    ``__cause__``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(_problem(list(problems)))
        self.problems = list(problems)


@attrs.frozen(kw_only=True)
class ValueSchema:
    """What a decoded JSON value must look like: an attrs class (checked and
    built by a strict cattrs converter) or a JSON Schema dict (validated; the
    value stays a dict). Build one with ``ValueSchema.of``."""

    spec: Any
    """The attrs class or the JSON Schema dict it was made from."""
    schema: dict[str, Any] = attrs.field(repr=False)
    """The JSON Schema (generated for an attrs class); do not modify it."""
    validator: Any = attrs.field(default=None, repr=False, eq=False)
    """A jsonschema validator for a dict schema, when jsonschema is installed
    (else the built-in validator is used)."""

    @classmethod
    def of(
        cls,
        spec: type[Any] | Mapping[str, Any],
        *,
        owner: str,
        what: str = "the schema",
    ) -> ValueSchema:
        """The checker for ``spec``, an attrs class or a JSON Schema dict.

        Raises:
            ConfigurationError: ``spec`` is neither, an attrs field's type
                cannot be described or structured, or the dict is not a valid
                JSON Schema; the message starts with ``owner`` (``"tool 'x'"``).
        """
        if isinstance(spec, type) and attrs.has(spec):
            try:
                schema = _class_schema(spec, ())
            except _SchemaError as error:
                raise ConfigurationError(f"{owner}: {error}") from None
            try:
                _converter.get_structure_hook(spec)
            except Exception as error:
                raise ConfigurationError(
                    f"{owner}: cannot build a structuring hook for "
                    f"{spec.__qualname__}: {error}"
                ) from error
            return cls(spec=spec, schema=schema)
        if isinstance(spec, Mapping):
            schema = copy.deepcopy(dict(spec))
            return cls(
                spec=spec, schema=schema, validator=_validator_for(owner, schema, what)
            )
        raise ConfigurationError(
            f"{owner}: expected an attrs class or a JSON Schema dict, got "
            f"{_short(spec)}"
        )

    def check(self, value: Any) -> Any:
        """``value`` (decoded JSON) as the schema wants it: an instance of the
        attrs class, or ``value`` itself for a dict schema. Pure.

        Raises:
            ValueMismatch: listing every problem with its path.
        """
        spec = self.spec
        if isinstance(spec, type):
            try:
                return _converter.structure(value, spec)
            except BaseValidationError as error:
                problems = cattrs.transform_error(
                    error, format_exception=_format_exception
                )
                raise ValueMismatch(problems) from error
            except (ValueError, TypeError) as error:
                # Raised by the class itself (an attrs validator, say).
                raise ValueMismatch([f"{type(error).__name__}: {error} @ $"]) from error
        messages: list[str]
        if self.validator is not None:
            found = sorted(
                self.validator.iter_errors(value),
                key=lambda e: (e.json_path, e.message),
            )
            messages = [f"{e.message} @ {e.json_path}" for e in found]
        else:
            messages = _collect(self.schema, value, "$")
        if messages:
            raise ValueMismatch(messages)
        return value
