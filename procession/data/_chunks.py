"""Stream chunks: the values an agent run emits, one frozen attrs class per type.

Every class mirrors one Mastra chunk type (``packages/core/src/stream/types.ts``)
and carries the Mastra ``type`` string, so both ``match chunk: case
TextDeltaChunk(...)`` and ``chunk.type == "text-delta"`` work.

Shapes:

* *Envelope* chunks (almost all) hold ``payload`` (a frozen ``<Name>Payload``),
  ``run_id``, ``from_`` (Mastra ``from``: ``AGENT``, ``USER``, ``SYSTEM``,
  ``WORKFLOW`` or ``NETWORK``), the optional envelope ``metadata`` and ``extra``.
* ``ObjectChunk`` / ``ObjectResultChunk`` hold a top-level ``object`` instead of
  a payload.
* ``DataChunk`` is a custom ``data-<name>`` chunk: its ``type`` is an instance
  field, and it has ``data``, ``id`` and ``transient`` but no run id or origin.

Chunks are immutable values: a processor that changes a chunk returns a new one
(``attrs.evolve``), because earlier stages keep references in ``stream_parts``.
Every chunk, payload and sub-object keeps the JSON keys this library does not
model in ``extra``, so a chunk read from Mastra JSON is written back unchanged
(see ``procession.wire``). Field names are snake_case; the wire
names are their camelCase forms.

``None`` means "absent": optional fields left at ``None`` are not written to
the wire (the tripwire payload is the one exception, it always has its four
keys). ``from_`` may be ``None`` for chunks read from JSON that had no ``from``
(Mastra's per-chunk output runner emits tripwires without one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypeAlias

import attrs

from ._payloads import (
    AbortPayload,
    ErrorPayload,
    FilePayload,
    FinishPayload,
    RawPayload,
    ReasoningDeltaPayload,
    ReasoningEndPayload,
    ReasoningSignaturePayload,
    ReasoningStartPayload,
    RedactedReasoningPayload,
    ResponseMetadataPayload,
    SourcePayload,
    StartPayload,
    StepFinishPayload,
    StepOutput,
    StepResultInfo,
    StepRetryPayload,
    StepStartPayload,
    TextDeltaPayload,
    TextEndPayload,
    TextStartPayload,
    ToolCallApprovalPayload,
    ToolCallDeltaPayload,
    ToolCallInputStreamingEndPayload,
    ToolCallInputStreamingStartPayload,
    ToolCallPayload,
    ToolCallSuspendedPayload,
    ToolErrorPayload,
    ToolOutputDeniedPayload,
    ToolOutputPayload,
    ToolResultPayload,
    TripwirePayload,
)
from ._usage import Usage

__all__ = [
    "CHUNK_CLASSES",
    "CHUNK_TYPES",
    "AbortChunk",
    "Chunk",
    "ChunkFrom",
    "DataChunk",
    "ErrorChunk",
    "FileChunk",
    "FinishChunk",
    "ObjectChunk",
    "ObjectResultChunk",
    "RawChunk",
    "ReasoningDeltaChunk",
    "ReasoningEndChunk",
    "ReasoningSignatureChunk",
    "ReasoningStartChunk",
    "RedactedReasoningChunk",
    "ResponseMetadataChunk",
    "SourceChunk",
    "StartChunk",
    "StepFinishChunk",
    "StepRetryChunk",
    "StepStartChunk",
    "TextDeltaChunk",
    "TextEndChunk",
    "TextStartChunk",
    "ToolCallApprovalChunk",
    "ToolCallChunk",
    "ToolCallDeltaChunk",
    "ToolCallInputStreamingEndChunk",
    "ToolCallInputStreamingStartChunk",
    "ToolCallSuspendedChunk",
    "ToolErrorChunk",
    "ToolOutputChunk",
    "ToolOutputDeniedChunk",
    "ToolResultChunk",
    "TripwireChunk",
    "abort",
    "data",
    "error",
    "finish",
    "is_data_chunk",
    "reasoning_delta",
    "step_finish",
    "step_start",
    "text_delta",
    "text_end",
    "text_start",
    "tool_call",
    "tool_result",
    "tripwire",
]

ChunkFrom: TypeAlias = str
"""Mastra ``ChunkFrom``: ``"AGENT"``, ``"USER"``, ``"SYSTEM"``, ``"WORKFLOW"`` or
``"NETWORK"``. Kept a plain ``str`` so chunks from newer Mastra versions still read."""


# --------------------------------------------------------------------------- #
# Chunks
# --------------------------------------------------------------------------- #
# Each chunk class declares only its ``type`` and its typed body (``payload`` or
# ``object``), so the attrs mypy plugin sees a precise body type on every class;
# the envelope fields come from ``_Envelope``.


def _body_first(
    cls: type, fields: list[attrs.Attribute[Any]]
) -> list[attrs.Attribute[Any]]:
    """``fields`` with the chunk's body (``payload`` or ``object``) before the
    envelope fields it inherits from ``_Envelope``.

    attrs lists inherited fields first; this keeps the field order, hence the
    ``repr``, ``attrs.fields`` and ``attrs.astuple``, what they were when every
    class spelled out its fields: ``TextDeltaChunk(payload=..., run_id=...)``.
    """
    # By name: attrs' ``Attribute.inherited`` is missing from its type stubs.
    body = [f for f in fields if f.name not in _ENVELOPE_FIELDS]
    return body + [f for f in fields if f.name in _ENVELOPE_FIELDS]


@attrs.frozen(kw_only=True)
class _Envelope:
    """The Mastra envelope around a chunk's body: the fields every chunk but
    ``DataChunk`` has. Not a chunk itself (no ``type``, no body); subclasses
    use ``field_transformer=_body_first``."""

    type: ClassVar[str]
    run_id: str | None = None
    from_: ChunkFrom | None = "AGENT"
    metadata: Any = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


_ENVELOPE_FIELDS: frozenset[str] = frozenset(f.name for f in attrs.fields(_Envelope))


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class StartChunk(_Envelope):
    """``start``: the run began."""

    type: ClassVar[str] = "start"
    payload: StartPayload = attrs.field(factory=StartPayload)


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class StepStartChunk(_Envelope):
    """``step-start``: a model call (step) began."""

    type: ClassVar[str] = "step-start"
    payload: StepStartPayload = attrs.field(factory=StepStartPayload)


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ResponseMetadataChunk(_Envelope):
    """``response-metadata``: the provider's response id, model and time."""

    type: ClassVar[str] = "response-metadata"
    payload: ResponseMetadataPayload = attrs.field(factory=ResponseMetadataPayload)


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class TextStartChunk(_Envelope):
    """``text-start``: a text block begins."""

    type: ClassVar[str] = "text-start"
    payload: TextStartPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class TextDeltaChunk(_Envelope):
    """``text-delta``: a piece of the model's text (``chunk.payload.text``)."""

    type: ClassVar[str] = "text-delta"
    payload: TextDeltaPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class TextEndChunk(_Envelope):
    """``text-end``: a text block is complete."""

    type: ClassVar[str] = "text-end"
    payload: TextEndPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ReasoningStartChunk(_Envelope):
    """``reasoning-start``: a reasoning block begins."""

    type: ClassVar[str] = "reasoning-start"
    payload: ReasoningStartPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ReasoningDeltaChunk(_Envelope):
    """``reasoning-delta``: a piece of the model's reasoning text."""

    type: ClassVar[str] = "reasoning-delta"
    payload: ReasoningDeltaPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ReasoningEndChunk(_Envelope):
    """``reasoning-end``: a reasoning block is complete."""

    type: ClassVar[str] = "reasoning-end"
    payload: ReasoningEndPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ReasoningSignatureChunk(_Envelope):
    """``reasoning-signature``: the provider's signature of a reasoning block."""

    type: ClassVar[str] = "reasoning-signature"
    payload: ReasoningSignaturePayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class RedactedReasoningChunk(_Envelope):
    """``redacted-reasoning``: opaque reasoning data."""

    type: ClassVar[str] = "redacted-reasoning"
    payload: RedactedReasoningPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class SourceChunk(_Envelope):
    """``source``: a cited source."""

    type: ClassVar[str] = "source"
    payload: SourcePayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class FileChunk(_Envelope):
    """``file``: a generated file."""

    type: ClassVar[str] = "file"
    payload: FilePayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ToolCallInputStreamingStartChunk(_Envelope):
    """``tool-call-input-streaming-start``: a tool call's arguments begin."""

    type: ClassVar[str] = "tool-call-input-streaming-start"
    payload: ToolCallInputStreamingStartPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ToolCallDeltaChunk(_Envelope):
    """``tool-call-delta``: a piece of a tool call's argument JSON."""

    type: ClassVar[str] = "tool-call-delta"
    payload: ToolCallDeltaPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ToolCallInputStreamingEndChunk(_Envelope):
    """``tool-call-input-streaming-end``: a tool call's arguments are complete."""

    type: ClassVar[str] = "tool-call-input-streaming-end"
    payload: ToolCallInputStreamingEndPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ToolCallChunk(_Envelope):
    """``tool-call``: the model calls a tool."""

    type: ClassVar[str] = "tool-call"
    payload: ToolCallPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ToolResultChunk(_Envelope):
    """``tool-result``: a tool's result."""

    type: ClassVar[str] = "tool-result"
    payload: ToolResultPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ToolErrorChunk(_Envelope):
    """``tool-error``: a tool failed, or its arguments were invalid."""

    type: ClassVar[str] = "tool-error"
    payload: ToolErrorPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ToolCallApprovalChunk(_Envelope):
    """``tool-call-approval``: the run stops here and waits for a person to
    approve or decline the call (its last chunk while it waits)."""

    type: ClassVar[str] = "tool-call-approval"
    payload: ToolCallApprovalPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ToolCallSuspendedChunk(_Envelope):
    """``tool-call-suspended``: a tool suspended itself; the run waits for
    ``resume_stream`` (its last chunk while it waits)."""

    type: ClassVar[str] = "tool-call-suspended"
    payload: ToolCallSuspendedPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ToolOutputDeniedChunk(_Envelope):
    """``tool-output-denied``: a call needing approval was declined."""

    type: ClassVar[str] = "tool-output-denied"
    payload: ToolOutputDeniedPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ToolOutputChunk(_Envelope):
    """``tool-output``: streamed output of a nested tool or agent."""

    type: ClassVar[str] = "tool-output"
    payload: ToolOutputPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class StepFinishChunk(_Envelope):
    """``step-finish``: a model step ended."""

    type: ClassVar[str] = "step-finish"
    payload: StepFinishPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class FinishChunk(_Envelope):
    """``finish``: the run ended normally."""

    type: ClassVar[str] = "finish"
    payload: FinishPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ErrorChunk(_Envelope):
    """``error``: the run failed."""

    type: ClassVar[str] = "error"
    payload: ErrorPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class AbortChunk(_Envelope):
    """``abort``: the caller cancelled the run (not a tripwire)."""

    type: ClassVar[str] = "abort"
    payload: AbortPayload = attrs.field(factory=AbortPayload)


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class RawChunk(_Envelope):
    """``raw``: a provider's raw chunk (only with ``include_raw_chunks``)."""

    type: ClassVar[str] = "raw"
    payload: RawPayload = attrs.field(factory=RawPayload)


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class TripwireChunk(_Envelope):
    """``tripwire``: a processor stopped the run; always the last chunk."""

    type: ClassVar[str] = "tripwire"
    payload: TripwirePayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class StepRetryChunk(_Envelope):
    """``step-retry``: the current step is retried; discard its output so far."""

    type: ClassVar[str] = "step-retry"
    payload: StepRetryPayload


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ObjectChunk(_Envelope):
    """``object``: a partial structured-output object (top-level, no payload)."""

    type: ClassVar[str] = "object"
    object: Any


@attrs.frozen(kw_only=True, field_transformer=_body_first)
class ObjectResultChunk(_Envelope):
    """``object-result``: the final structured-output object."""

    type: ClassVar[str] = "object-result"
    object: Any


def _check_data_type(_instance: object, _attribute: object, value: Any) -> None:
    if not isinstance(value, str) or not value.startswith("data-"):
        raise ValueError(
            f"a DataChunk's type must be a str starting with 'data-', got {value!r}; "
            f"use procession.chunks.data('name', ...) to build one"
        )


@attrs.frozen(kw_only=True)
class DataChunk:
    """A custom ``data-<name>`` chunk (``writer.custom``). ``transient`` chunks
    are streamed but not persisted."""

    type: str = attrs.field(validator=_check_data_type)
    data: Any = None
    id: str | None = None
    transient: bool | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


Chunk: TypeAlias = (
    StartChunk
    | StepStartChunk
    | ResponseMetadataChunk
    | TextStartChunk
    | TextDeltaChunk
    | TextEndChunk
    | ReasoningStartChunk
    | ReasoningDeltaChunk
    | ReasoningEndChunk
    | ReasoningSignatureChunk
    | RedactedReasoningChunk
    | SourceChunk
    | FileChunk
    | ToolCallInputStreamingStartChunk
    | ToolCallDeltaChunk
    | ToolCallInputStreamingEndChunk
    | ToolCallChunk
    | ToolResultChunk
    | ToolErrorChunk
    | ToolOutputChunk
    | ToolCallApprovalChunk
    | ToolCallSuspendedChunk
    | ToolOutputDeniedChunk
    | StepFinishChunk
    | FinishChunk
    | ErrorChunk
    | AbortChunk
    | RawChunk
    | TripwireChunk
    | StepRetryChunk
    | ObjectChunk
    | ObjectResultChunk
    | DataChunk
)
"""Any chunk an agent run can produce."""

_FIXED_TYPE_CLASSES: tuple[type[Any], ...] = (
    StartChunk,
    StepStartChunk,
    ResponseMetadataChunk,
    TextStartChunk,
    TextDeltaChunk,
    TextEndChunk,
    ReasoningStartChunk,
    ReasoningDeltaChunk,
    ReasoningEndChunk,
    ReasoningSignatureChunk,
    RedactedReasoningChunk,
    SourceChunk,
    FileChunk,
    ToolCallInputStreamingStartChunk,
    ToolCallDeltaChunk,
    ToolCallInputStreamingEndChunk,
    ToolCallChunk,
    ToolResultChunk,
    ToolErrorChunk,
    ToolOutputChunk,
    ToolCallApprovalChunk,
    ToolCallSuspendedChunk,
    ToolOutputDeniedChunk,
    StepFinishChunk,
    FinishChunk,
    ErrorChunk,
    AbortChunk,
    RawChunk,
    TripwireChunk,
    StepRetryChunk,
    ObjectChunk,
    ObjectResultChunk,
)

CHUNK_TYPES: Mapping[str, type[Any]] = {cls.type: cls for cls in _FIXED_TYPE_CLASSES}
"""Mastra ``type`` string -> chunk class, for every fixed type (``data-*``
chunks are ``DataChunk``, whatever their name)."""

CHUNK_CLASSES: frozenset[type[Any]] = frozenset((*_FIXED_TYPE_CLASSES, DataChunk))
"""Every chunk class: ``chunk.__class__ in CHUNK_CLASSES`` is the fast "is this
a chunk" test the pipeline runs on every item."""


def is_data_chunk(chunk: object) -> bool:
    """Whether ``chunk`` is a custom ``data-*`` chunk."""
    return isinstance(chunk, DataChunk)


# --------------------------------------------------------------------------- #
# Convenience constructors
# --------------------------------------------------------------------------- #


def text_start(*, id: str = "text-1", run_id: str | None = None) -> TextStartChunk:
    """A ``text-start`` chunk for text block ``id``."""
    return TextStartChunk(payload=TextStartPayload(id=id), run_id=run_id)


def text_delta(
    text: str, *, id: str = "text-1", run_id: str | None = None
) -> TextDeltaChunk:
    """A ``text-delta`` chunk carrying ``text``."""
    return TextDeltaChunk(payload=TextDeltaPayload(id=id, text=text), run_id=run_id)


def text_end(*, id: str = "text-1", run_id: str | None = None) -> TextEndChunk:
    """A ``text-end`` chunk for text block ``id``."""
    return TextEndChunk(payload=TextEndPayload(id=id), run_id=run_id)


def reasoning_delta(
    text: str, *, id: str = "reasoning-1", run_id: str | None = None
) -> ReasoningDeltaChunk:
    """A ``reasoning-delta`` chunk carrying ``text``."""
    return ReasoningDeltaChunk(
        payload=ReasoningDeltaPayload(id=id, text=text), run_id=run_id
    )


def tool_call(
    tool_call_id: str,
    tool_name: str,
    args: Any = None,
    *,
    provider_executed: bool | None = None,
    run_id: str | None = None,
) -> ToolCallChunk:
    """A ``tool-call`` chunk: call ``tool_name`` with ``args``."""
    return ToolCallChunk(
        payload=ToolCallPayload(
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            args=args,
            provider_executed=provider_executed,
        ),
        run_id=run_id,
    )


def tool_result(
    tool_call_id: str,
    tool_name: str,
    result: Any,
    *,
    args: Any = None,
    is_error: bool | None = None,
    run_id: str | None = None,
) -> ToolResultChunk:
    """A ``tool-result`` chunk carrying ``result``."""
    return ToolResultChunk(
        payload=ToolResultPayload(
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            result=result,
            args=args,
            is_error=is_error,
        ),
        run_id=run_id,
    )


def step_start(
    *, message_id: str | None = None, run_id: str | None = None
) -> StepStartChunk:
    """A ``step-start`` chunk."""
    return StepStartChunk(
        payload=StepStartPayload(message_id=message_id), run_id=run_id
    )


def step_finish(
    reason: str = "stop",
    *,
    text: str | None = None,
    usage: Usage | None = None,
    is_continued: bool | None = None,
    run_id: str | None = None,
) -> StepFinishChunk:
    """A ``step-finish`` chunk whose step ended for ``reason``."""
    return StepFinishChunk(
        payload=StepFinishPayload(
            step_result=StepResultInfo(reason=reason, is_continued=is_continued),
            output=StepOutput(text=text, usage=usage),
        ),
        run_id=run_id,
    )


def finish(
    reason: str = "stop",
    *,
    usage: Usage | None = None,
    run_id: str | None = None,
) -> FinishChunk:
    """A ``finish`` chunk: the run ended for ``reason``."""
    return FinishChunk(
        payload=FinishPayload(
            step_result=StepResultInfo(reason=reason),
            output=StepOutput(usage=usage),
        ),
        run_id=run_id,
    )


def tripwire(
    reason: str,
    *,
    retry: bool | None = None,
    metadata: Any = None,
    processor_id: str | None = None,
    run_id: str | None = None,
) -> TripwireChunk:
    """A ``tripwire`` chunk: processor ``processor_id`` stopped the run."""
    return TripwireChunk(
        payload=TripwirePayload(
            reason=reason, retry=retry, metadata=metadata, processor_id=processor_id
        ),
        run_id=run_id,
    )


def error(err: Any, *, run_id: str | None = None) -> ErrorChunk:
    """An ``error`` chunk carrying ``err`` (an exception or a JSON value)."""
    return ErrorChunk(payload=ErrorPayload(error=err), run_id=run_id)


def abort(*, run_id: str | None = None) -> AbortChunk:
    """An ``abort`` chunk (the caller cancelled the run)."""
    return AbortChunk(run_id=run_id)


def data(
    name_or_type: str,
    data: Any,
    *,
    id: str | None = None,
    transient: bool | None = None,
) -> DataChunk:
    """A custom data chunk. ``name_or_type`` is either the full type
    (``"data-progress"``) or just the name (``"progress"``)."""
    type_ = name_or_type if name_or_type.startswith("data-") else f"data-{name_or_type}"
    return DataChunk(type=type_, data=data, id=id, transient=transient)
