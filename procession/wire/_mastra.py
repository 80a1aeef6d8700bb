"""Mastra wire JSON for chunks and messages: one cattrs converter, one place.

``to_wire`` / ``from_wire`` turn chunks into Mastra's JSON objects and back;
``message_to_wire`` / ``message_from_wire`` do the same for ``MastraDBMessage``.
Nothing here does I/O; the dicts are ready for ``json.dumps``.

Rules, chosen so a round trip is exact in both directions:

* Keys are camelCase (``runId``, ``toolCallId``, ``providerMetadata``; Mastra's
  own ``experimental_attachments`` keeps its underscore). Envelope chunks are
  ``{"type", "runId"?, "from"?, "payload", "metadata"?}``; data chunks
  ``{"type", "data", "id"?, "transient"?}``; object chunks
  ``{"type", "runId"?, "from"?, "object", "metadata"?}``.
* A field that is ``None`` is not written, unless the key is required by Mastra:
  ``result`` (tool-result), ``error`` (tool-error, error), ``object``, ``data``
  and the tripwire payload, which always has exactly ``reason``, ``retry``,
  ``metadata`` and ``processorId``.
* Keys we do not model are kept in the ``extra`` of the object they appeared in
  (envelope, payload, sub-object, message, content, part) and written back. A
  modelled optional key that arrives as an explicit ``null`` is kept there too
  (as ``None``), so ``null`` and "absent" both survive; a value set on the field
  itself always wins over ``extra``.
* ``Message.created_at`` is written as ISO-8601 text, UTC as ``Z``, with
  millisecond precision when the time has no finer part (what JavaScript's
  ``Date.toJSON`` writes) and microseconds otherwise. Read: any ISO-8601 string
  Python's ``datetime.fromisoformat`` accepts (``Z`` included) or epoch
  milliseconds. So JavaScript dates and our own times round-trip exactly; a
  time read from epoch milliseconds or a second-precision string is written back
  as millisecond ISO text.
* An exception in an ``error`` (or any ``Any``) field is written as
  ``{"name": <class name>, "message": str(exc)}``, plus ``statusCode``,
  ``isRetryable`` and ``code`` of a ``ProviderError`` when set. It reads back as
  that dict, not as an exception.
* A part whose ``type`` was renamed in place (``reasoning`` -> ``thinking``) is
  written with its new type and its fields; it reads back as an ``UnknownPart``.

Bad input raises a ``WireFormatError`` naming the chunk type and the field path
(``payload.text``, ``content.parts[1].toolInvocation.toolName``):
``MissingFieldError`` for an absent required key (and for input that is not a
JSON object at all), ``UnknownChunkTypeError`` for an unknown ``type``.
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Literal, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    BaseValidationError,
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from .. import data as c
from .. import data as m
from .._errors import (
    MissingFieldError,
    ProviderError,
    UnknownChunkTypeError,
    WireFormatError,
)
from .._secrets import redact, redact_deep

__all__ = ["from_wire", "message_from_wire", "message_to_wire", "to_wire"]

_converter: Final = cattrs.Converter()
"""The converter for Mastra JSON. Private: users go through the functions below."""

# Python field names whose wire name is not plain camelCase.
_WIRE_NAME_EXCEPTIONS: Final = {
    "from_": "from",
    "experimental_attachments": "experimental_attachments",
}


def _wire_name(name: str) -> str:
    """The JSON key for attribute ``name`` (snake_case -> camelCase)."""
    special = _WIRE_NAME_EXCEPTIONS.get(name)
    if special is not None:
        return special
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def _describe(value: object) -> str:
    return f"{type(value).__name__} {value!r}"


# --------------------------------------------------------------------------- #
# Leaf hooks: strict primitives (cattrs would happily call str(5)), JSON
# containers, datetimes, exceptions.
# --------------------------------------------------------------------------- #


def _structure_str(value: Any, _type: object) -> str:
    if isinstance(value, str):
        return value
    raise ValueError(f"expected a string, got {_describe(value)}")


def _structure_bool(value: Any, _type: object) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError(f"expected a boolean, got {_describe(value)}")


def _structure_int(value: Any, _type: object) -> int:
    # bool is an int subclass, but true is not a token count.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"expected an integer, got {_describe(value)}")


def _structure_json_object(value: Any, _type: object) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    raise ValueError(f"expected a JSON object, got {_describe(value)}")


def _format_datetime(value: _dt.datetime) -> str:
    timespec = "milliseconds" if value.microsecond % 1000 == 0 else "microseconds"
    text = value.isoformat(timespec=timespec)
    if text.endswith("+00:00"):
        text = text[:-6] + "Z"
    return text


_EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def _parse_datetime(value: Any, _type: object) -> _dt.datetime:
    if isinstance(value, str):
        try:
            return _dt.datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(
                f"expected an ISO-8601 date-time string, got {value!r}"
            ) from None
    if isinstance(value, int | float) and not isinstance(value, bool):
        # Exact for integer milliseconds, unlike fromtimestamp(value / 1000).
        return _EPOCH + _dt.timedelta(milliseconds=value)
    raise ValueError(
        f"expected an ISO-8601 date-time string or epoch milliseconds, "
        f"got {_describe(value)}"
    )


def _unstructure_exception(exc: BaseException) -> dict[str, Any]:
    out: dict[str, Any] = {"name": type(exc).__name__, "message": redact(str(exc))}
    if isinstance(exc, ProviderError):
        for attr, key in (
            ("status_code", "statusCode"),
            ("is_retryable", "isRetryable"),
            ("code", "code"),
        ):
            value = getattr(exc, attr)
            if value is not None:
                out[key] = value
    return out


def _is_literal_type(type_: Any) -> bool:
    return get_origin(type_) is Literal


def _literal_structure_factory(type_: Any) -> Callable[[Any, Any], Any]:
    allowed = get_args(type_)

    def structure_literal(value: Any, _type: object) -> Any:
        # type() too: 1 == True, but JSON true is not the literal 1.
        if any(value == a and type(value) is type(a) for a in allowed):
            return value
        choices = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"expected one of {choices}, got {value!r}")

    return structure_literal


def _is_list_type(type_: Any) -> bool:
    return get_origin(type_) is list and len(get_args(type_)) == 1


def _list_structure_factory(type_: Any) -> Callable[[Any, Any], list[Any]]:
    # cattrs' own list hook accepts any iterable (a string becomes a list of
    # characters); JSON arrays only, with per-index error notes for the path.
    (item_type,) = get_args(type_)
    item_hook = _converter.get_structure_hook(item_type)

    def structure_list(value: Any, _type: object) -> list[Any]:
        if not isinstance(value, list):
            raise ValueError(f"expected a JSON array, got {_describe(value)}")
        out: list[Any] = []
        errors: list[Exception] = []
        for index, item in enumerate(value):
            try:
                out.append(item_hook(item, item_type))
            except Exception as exc:
                exc.add_note(
                    IterableValidationNote(
                        f"Structuring {type_} @ index {index}", index, item_type
                    )
                )
                errors.append(exc)
        if errors:
            raise IterableValidationError(f"While structuring {type_}", errors, type_)
        return out

    return structure_list


_converter.register_structure_hook(str, _structure_str)
_converter.register_structure_hook(bool, _structure_bool)
_converter.register_structure_hook(int, _structure_int)
_converter.register_structure_hook_func(
    lambda t: t == dict[str, Any], _structure_json_object
)
_converter.register_structure_hook_factory(_is_list_type, _list_structure_factory)
_converter.register_structure_hook_factory(_is_literal_type, _literal_structure_factory)
_converter.register_structure_hook(_dt.datetime, _parse_datetime)
_converter.register_unstructure_hook(_dt.datetime, _format_datetime)
# singledispatch: covers every exception class, ProviderError and TripWire too.
_converter.register_unstructure_hook(BaseException, _unstructure_exception)


# --------------------------------------------------------------------------- #
# Records: attrs classes with camelCase keys and an ``extra`` slot.
# --------------------------------------------------------------------------- #


def _merge_extra(out: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """Write ``extra`` into ``out`` under the keys the fields did not write."""
    for key, value in extra.items():
        if key not in out:
            out[key] = _converter.unstructure(value)


def _register_record(
    cls: type[Any],
    *,
    always: frozenset[str] = frozenset(),
    required: frozenset[str] = frozenset(),
) -> None:
    """Register camelCase structure/unstructure hooks for attrs class ``cls``.

    Fields defaulting to ``None`` are omitted while ``None`` unless named in
    ``always``; other fields are always written. Keys of fields without a
    default, plus ``required`` (attribute names), must be present on input.
    """
    attrs.resolve_types(cls)
    fields = [f for f in attrs.fields(cls) if f.name != "extra"]
    wire = {f.name: _wire_name(f.name) for f in fields}
    omittable = {f.name for f in fields if f.default is None and f.name not in always}
    unstructure_overrides: dict[str, Any] = {
        f.name: override(rename=wire[f.name], omit_if_default=f.name in omittable)
        for f in fields
    }
    structure_overrides: dict[str, Any] = {
        f.name: override(rename=wire[f.name]) for f in fields
    }
    unstructure_base = make_dict_unstructure_fn(
        cls,
        _converter,
        _cattrs_omit_if_default=True,
        extra=override(omit=True),
        **unstructure_overrides,
    )
    structure_base = make_dict_structure_fn(
        cls,
        _converter,
        _cattrs_detailed_validation=True,
        extra=override(omit=True),
        **structure_overrides,
    )
    known_keys = frozenset(wire.values())
    null_keys = frozenset(wire[name] for name in omittable)
    required_keys = tuple(
        wire[f.name] for f in fields if f.default is attrs.NOTHING or f.name in required
    )
    what = cls.__name__

    def unstructure(obj: Any) -> dict[str, Any]:
        out = unstructure_base(obj)
        if obj.extra:
            _merge_extra(out, obj.extra)
        return out

    def structure(data: Any, _type: object) -> Any:
        if not isinstance(data, Mapping):
            raise ValueError(f"expected a JSON object, got {_describe(data)}")
        for key in required_keys:
            if key not in data:
                raise MissingFieldError(what, key, data)
        obj = structure_base(data, cls)
        extra = {
            key: value
            for key, value in data.items()
            if key not in known_keys or (value is None and key in null_keys)
        }
        if extra:
            obj = attrs.evolve(obj, extra=extra)
        return obj

    _converter.register_unstructure_hook(cls, unstructure)
    _converter.register_structure_hook(cls, structure)


# Dependencies first: generated functions look up nested hooks when made.
_CHUNK_RECORDS: Final[tuple[type[Any], ...]] = (
    c.Usage,
    c.StepResultInfo,
    c.StepOutput,
    c.StartPayload,
    c.StepStartPayload,
    c.ResponseMetadataPayload,
    c.TextStartPayload,
    c.TextDeltaPayload,
    c.TextEndPayload,
    c.ReasoningStartPayload,
    c.ReasoningDeltaPayload,
    c.ReasoningEndPayload,
    c.ReasoningSignaturePayload,
    c.RedactedReasoningPayload,
    c.SourcePayload,
    c.FilePayload,
    c.ToolCallInputStreamingStartPayload,
    c.ToolCallDeltaPayload,
    c.ToolCallInputStreamingEndPayload,
    c.ToolCallPayload,
    c.ToolResultPayload,
    c.ToolErrorPayload,
    c.ToolOutputPayload,
    c.ToolCallApprovalPayload,
    c.ToolCallSuspendedPayload,
    c.ToolApproval,
    c.ToolOutputDeniedPayload,
    c.ErrorPayload,
    c.AbortPayload,
    c.RawPayload,
    c.StepRetryPayload,
    c.StepFinishPayload,
    c.FinishPayload,
)
for _record in _CHUNK_RECORDS:
    _register_record(_record)
_register_record(
    c.TripwirePayload, always=frozenset({"retry", "metadata", "processor_id"})
)
_register_record(c.DataChunk, always=frozenset({"data"}), required=frozenset({"data"}))

# An error's text may quote a secret (a provider echoing the API key): no
# error payload leaves through the wire with one (procession._secrets).
for _error_record in (c.ErrorPayload, c.ToolErrorPayload):
    _converter.register_unstructure_hook(
        _error_record,
        functools.partial(
            lambda plain, payload: redact_deep(plain(payload)),
            _converter.get_unstructure_hook(_error_record),
        ),
    )


# --------------------------------------------------------------------------- #
# Envelope and object chunks
# --------------------------------------------------------------------------- #

_ENVELOPE_NULL_KEYS: Final = frozenset({"runId", "from", "metadata"})


def _check_optional_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise _field_error(
        key, str | None, ValueError(f"expected a string, got {_describe(value)}")
    )


def _field_error(name: str, type_: Any, exc: Exception) -> ClassValidationError:
    """``exc`` dressed as cattrs reports a failed attribute, so the one error
    translator below sees a uniform tree."""
    exc.add_note(AttributeValidationNote(f"Structuring @ {name}", name, type_))
    return ClassValidationError(f"While structuring {name}", [exc], object)


def _register_chunk(cls: type[Any], body: Literal["payload", "object"]) -> None:
    """Hooks for a chunk with the Mastra envelope around ``body``."""
    attrs.resolve_types(cls)
    body_type = attrs.fields_dict(cls)[body].type
    body_unstructure = _converter.get_unstructure_hook(body_type)
    body_structure = _converter.get_structure_hook(body_type)
    type_ = cls.type
    known_keys = frozenset({"type", "runId", "from", body, "metadata"})
    unstructure_any = _converter.unstructure

    def unstructure(chunk: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"type": type_}
        if chunk.run_id is not None:
            out["runId"] = chunk.run_id
        if chunk.from_ is not None:
            out["from"] = chunk.from_
        out[body] = body_unstructure(getattr(chunk, body))
        if chunk.metadata is not None:
            out["metadata"] = unstructure_any(chunk.metadata)
        if chunk.extra:
            _merge_extra(out, chunk.extra)
        return out

    def structure(data: Any, _type: object) -> Any:
        if not isinstance(data, Mapping):
            raise ValueError(f"expected a JSON object, got {_describe(data)}")
        if body not in data:
            raise MissingFieldError(f"{type_!r} chunk", body, data)
        run_id = _check_optional_str(data, "runId")
        from_ = _check_optional_str(data, "from")
        try:
            value = body_structure(data[body], body_type)
        except Exception as exc:
            raise _field_error(body, body_type, exc) from None
        extra = {
            key: value
            for key, value in data.items()
            if key not in known_keys or (value is None and key in _ENVELOPE_NULL_KEYS)
        }
        return cls(
            run_id=run_id,
            from_=from_,
            metadata=data.get("metadata"),
            extra=extra,
            **{body: value},
        )

    _converter.register_unstructure_hook(cls, unstructure)
    _converter.register_structure_hook(cls, structure)


for _cls in c.CHUNK_TYPES.values():
    _register_chunk(
        _cls, "object" if _cls in (c.ObjectChunk, c.ObjectResultChunk) else "payload"
    )

_TO_WIRE: Final[dict[type[Any], Callable[[Any], dict[str, Any]]]] = {
    cls: _converter.get_unstructure_hook(cls)
    for cls in (*c.CHUNK_TYPES.values(), c.DataChunk)
}
_FROM_WIRE: Final[dict[str, tuple[type[Any], Callable[[Any, Any], Any]]]] = {
    type_: (cls, _converter.get_structure_hook(cls))
    for type_, cls in c.CHUNK_TYPES.items()
}
_structure_data_chunk: Final = _converter.get_structure_hook(c.DataChunk)


# --------------------------------------------------------------------------- #
# Messages
# --------------------------------------------------------------------------- #

_MESSAGE_RECORDS: Final[tuple[type[Any], ...]] = (
    m.ReasoningDetail,
    m.ToolInvocation,
    m.SourceInfo,
    m.TextPart,
    m.ReasoningPart,
    m.ToolInvocationPart,
    m.FilePart,
    m.SourcePart,
    m.SourceDocumentPart,
    m.StepStartPart,
)
for _record in _MESSAGE_RECORDS:
    _register_record(_record)
_register_record(m.DataPart, always=frozenset({"data"}), required=frozenset({"data"}))

_PART_CLASSES: Final[dict[str, type[Any]]] = {
    "text": m.TextPart,
    "reasoning": m.ReasoningPart,
    "tool-invocation": m.ToolInvocationPart,
    "file": m.FilePart,
    "source": m.SourcePart,
    "source-document": m.SourceDocumentPart,
    "step-start": m.StepStartPart,
}
_PART_STRUCTURE: Final = {
    type_: _converter.get_structure_hook(cls) for type_, cls in _PART_CLASSES.items()
}
_structure_data_part: Final = _converter.get_structure_hook(m.DataPart)


def _unstructure_unknown_part(part: m.UnknownPart) -> dict[str, Any]:
    out: dict[str, Any] = {"type": part.type}
    _merge_extra(out, part.fields)
    return out


def _structure_part(data: Any, _type: object) -> m.Part:
    if not isinstance(data, Mapping):
        raise ValueError(f"expected a JSON object, got {_describe(data)}")
    type_ = data.get("type")
    if type_ is None:
        raise MissingFieldError("message part", "type", data)
    if not isinstance(type_, str):
        raise _field_error(
            "type", str, ValueError(f"expected a string, got {_describe(type_)}")
        )
    hook = _PART_STRUCTURE.get(type_)
    if hook is not None:
        part: m.Part = hook(data, _PART_CLASSES[type_])
    elif type_.startswith("data-"):
        part = _structure_data_part(data, m.DataPart)
    else:
        part = m.UnknownPart(
            type=type_, fields={k: v for k, v in data.items() if k != "type"}
        )
    return part


def _unstructure_part(part: Any) -> dict[str, Any]:
    # Parts are mutable; dispatch on the class each time (``type`` may change).
    result: dict[str, Any] = _converter.unstructure(part)
    return result


_converter.register_unstructure_hook(m.UnknownPart, _unstructure_unknown_part)
_converter.register_structure_hook_func(lambda t: t == m.Part, _structure_part)
_converter.register_unstructure_hook_func(lambda t: t == m.Part, _unstructure_part)

_register_record(m.MessageContent)
# ``id`` and ``createdAt`` have Python defaults for convenience, but Mastra JSON
# always carries them; a message without them is malformed, not "new".
_register_record(m.Message, required=frozenset({"id", "content", "created_at"}))

_structure_message: Final = _converter.get_structure_hook(m.Message)
_unstructure_message: Final = _converter.get_unstructure_hook(m.Message)


# --------------------------------------------------------------------------- #
# Errors: cattrs' nested validation errors -> one typed WireFormatError
# --------------------------------------------------------------------------- #


def _leaves(
    exc: BaseException, path: tuple[str, ...], type_: Any
) -> Iterator[tuple[BaseException, tuple[str, ...], Any]]:
    if isinstance(exc, ClassValidationError):
        with_notes, others = exc.group_exceptions()
        for sub, note in with_notes:
            yield from _leaves(sub, (*path, _wire_name(note.name)), note.type)
        for sub in others:
            yield from _leaves(sub, path, type_)
    elif isinstance(exc, IterableValidationError):
        with_index, others = exc.group_exceptions()
        for sub, index_note in with_index:
            yield from _leaves(sub, (*path, f"[{index_note.index}]"), index_note.type)
        for sub in others:
            yield from _leaves(sub, path, type_)
    else:
        yield exc, path, type_


def _join(path: tuple[str, ...]) -> str:
    return "".join(
        part if part.startswith("[") or i == 0 else f".{part}"
        for i, part in enumerate(path)
    )


def _type_name(type_: Any) -> str:
    if isinstance(type_, type):
        return type_.__name__
    return str(type_).replace("typing.", "")


def _translate(exc: Exception, what: str, data: object) -> WireFormatError:
    """One typed error for a failed structure call, naming the field path."""
    leaves = list(_leaves(exc, (), None))
    leaf, path, type_ = leaves[0]
    more = f" (and {len(leaves) - 1} more problems)" if len(leaves) > 1 else ""
    if isinstance(leaf, MissingFieldError):
        return MissingFieldError(what, _join((*path, leaf.field)), data)
    if isinstance(leaf, KeyError):
        return MissingFieldError(what, _join((*path, str(leaf.args[0]))), data)
    if isinstance(leaf, UnknownChunkTypeError):
        return leaf
    where = _join(path) or "(top level)"
    expected = f" (expected {_type_name(type_)})" if type_ is not None else ""
    return WireFormatError(f"{what}: field {where!r}{expected}: {leaf}{more}")


# --------------------------------------------------------------------------- #
# Public functions
# --------------------------------------------------------------------------- #


def to_wire(chunk: c.Chunk) -> dict[str, Any]:
    """Mastra's JSON object for ``chunk`` (a new dict; ready for ``json.dumps``).

    Raises ``TypeError`` if ``chunk`` is not one of the chunk classes.
    """
    try:
        unstructure = _TO_WIRE[type(chunk)]
    except KeyError:
        raise TypeError(
            f"to_wire expects a chunk (e.g. TextDeltaChunk), got {_describe(chunk)}"
        ) from None
    return unstructure(chunk)


def from_wire(data: Mapping[str, Any]) -> c.Chunk:
    """The chunk for a Mastra chunk JSON object; inverse of ``to_wire``.

    Unknown keys are kept in the ``extra`` of the object they appeared in.
    Raises ``MissingFieldError`` (input not an object, or a required key
    absent), ``UnknownChunkTypeError`` or ``WireFormatError`` (a value of the
    wrong type), each naming the chunk type and the field.
    """
    if not isinstance(data, Mapping):
        raise MissingFieldError(
            f"a chunk must be a JSON object with a 'type'; got {type(data).__name__}, "
            f"which",
            "type",
            data,
        )
    type_ = data.get("type")
    if type_ is None:
        raise MissingFieldError("chunk", "type", data)
    if not isinstance(type_, str):
        raise WireFormatError(
            f"a chunk's 'type' must be a string, got {_describe(type_)}: {data!r}"
        )
    entry = _FROM_WIRE.get(type_)
    try:
        if entry is not None:
            cls, structure = entry
            chunk: c.Chunk = structure(data, cls)
            return chunk
        if type_.startswith("data-"):
            data_chunk: c.DataChunk = _structure_data_chunk(data, c.DataChunk)
            return data_chunk
    except WireFormatError as exc:
        # Raised directly by the top-level hook: name the chunk type.
        if isinstance(exc, MissingFieldError):
            raise MissingFieldError(f"{type_!r} chunk", exc.field, data) from None
        raise
    except (BaseValidationError, ValueError) as exc:
        raise _translate(exc, f"{type_!r} chunk", data) from None
    raise UnknownChunkTypeError(type_, data)


def message_to_wire(message: m.Message) -> dict[str, Any]:
    """Mastra's ``MastraDBMessage`` JSON object for ``message`` (a new dict)."""
    if not isinstance(message, m.Message):
        raise TypeError(f"message_to_wire expects a Message, got {_describe(message)}")
    out: dict[str, Any] = _unstructure_message(message)
    return out


def message_from_wire(data: Mapping[str, Any]) -> m.Message:
    """The ``Message`` for a ``MastraDBMessage`` JSON object; inverse of
    ``message_to_wire``. Raises ``MissingFieldError`` / ``WireFormatError``
    naming the field path (e.g. ``content.parts[0].text``)."""
    if not isinstance(data, Mapping):
        raise MissingFieldError(
            f"a message must be a JSON object; got {type(data).__name__}, which",
            "id",
            data,
        )
    try:
        message: m.Message = _structure_message(data, m.Message)
    except MissingFieldError as exc:
        raise MissingFieldError("message", exc.field, data) from None
    except (BaseValidationError, ValueError) as exc:
        raise _translate(exc, "message", data) from None
    return message
