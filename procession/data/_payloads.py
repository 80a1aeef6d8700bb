"""The bodies of the chunks: one frozen attrs class per chunk type's payload,
and the sub-objects of ``step-finish`` / ``finish`` (see ``_chunks`` for the
shapes and the rules every value follows)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._errors import TripWire
from ._usage import Usage

__all__ = [
    "AbortPayload",
    "ErrorPayload",
    "FilePayload",
    "FinishPayload",
    "RawPayload",
    "ReasoningDeltaPayload",
    "ReasoningEndPayload",
    "ReasoningSignaturePayload",
    "ReasoningStartPayload",
    "RedactedReasoningPayload",
    "ResponseMetadataPayload",
    "SourcePayload",
    "StartPayload",
    "StepFinishPayload",
    "StepOutput",
    "StepResultInfo",
    "StepRetryPayload",
    "StepStartPayload",
    "TextDeltaPayload",
    "TextEndPayload",
    "TextStartPayload",
    "ToolCallDeltaPayload",
    "ToolCallInputStreamingEndPayload",
    "ToolCallInputStreamingStartPayload",
    "ToolCallPayload",
    "ToolApproval",
    "ToolCallApprovalPayload",
    "ToolCallSuspendedPayload",
    "ToolErrorPayload",
    "ToolOutputDeniedPayload",
    "ToolOutputPayload",
    "ToolResultPayload",
    "TripwirePayload",
]


# --------------------------------------------------------------------------- #
# Sub-objects of step-finish / finish payloads
# --------------------------------------------------------------------------- #


@attrs.frozen(kw_only=True)
class StepResultInfo:
    """``stepResult`` of a step-finish / finish chunk: why the step ended."""

    reason: str
    """A ``MastraFinishReason``: ``stop``, ``length``, ``content-filter``,
    ``tool-calls``, ``error``, ``other``, ``unknown``, ``tripwire``, ``retry``, ..."""
    raw_reason: Any = None
    is_continued: bool | None = None
    warnings: Any = None
    logprobs: Any = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class StepOutput:
    """``output`` of a step-finish / finish chunk."""

    text: str | None = None
    tool_calls: Any = None
    usage: Usage | None = None
    steps: Any = None
    object: Any = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


# --------------------------------------------------------------------------- #
# Payloads
# --------------------------------------------------------------------------- #


@attrs.frozen(kw_only=True)
class StartPayload:
    """Payload of ``start`` (the run began). Mastra defines no fields for it."""

    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class StepStartPayload:
    """Payload of ``step-start`` (a model call began)."""

    message_id: str | None = None
    request: Any = None
    warnings: Any = None
    started_at: Any = None
    input_messages: Any = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ResponseMetadataPayload:
    """Payload of ``response-metadata`` (provider response id, model, time)."""

    id: str | None = None
    model_id: str | None = None
    timestamp: Any = None
    signature: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class TextStartPayload:
    """Payload of ``text-start``: a text block with this ``id`` begins."""

    id: str
    provider_metadata: dict[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class TextDeltaPayload:
    """Payload of ``text-delta``: the next piece of text of block ``id``."""

    id: str
    text: str
    provider_metadata: dict[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class TextEndPayload:
    """Payload of ``text-end``: text block ``id`` is complete."""

    id: str
    provider_metadata: dict[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ReasoningStartPayload:
    """Payload of ``reasoning-start``."""

    id: str
    provider_metadata: dict[str, Any] | None = None
    signature: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ReasoningDeltaPayload:
    """Payload of ``reasoning-delta``: the next piece of reasoning text."""

    id: str
    text: str
    provider_metadata: dict[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ReasoningEndPayload:
    """Payload of ``reasoning-end``."""

    id: str
    provider_metadata: dict[str, Any] | None = None
    signature: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ReasoningSignaturePayload:
    """Payload of ``reasoning-signature`` (the provider's signature of a
    reasoning block, required back by Anthropic across tool steps)."""

    id: str
    signature: str
    provider_metadata: dict[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class RedactedReasoningPayload:
    """Payload of ``redacted-reasoning`` (opaque, encrypted reasoning)."""

    id: str
    data: str
    provider_metadata: dict[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class SourcePayload:
    """Payload of ``source``: a URL or document the model cited."""

    id: str
    source_type: str = "url"
    """``"url"`` or ``"document"``."""
    title: str | None = None
    mime_type: str | None = None
    filename: str | None = None
    url: str | None = None
    provider_metadata: dict[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class FilePayload:
    """Payload of ``file``: a generated file; ``data`` is base64 text or a URL."""

    data: str
    mime_type: str
    base64: str | None = None
    filename: str | None = None
    provider_metadata: dict[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolCallInputStreamingStartPayload:
    """Payload of ``tool-call-input-streaming-start``: the model began streaming
    a tool call's arguments."""

    tool_call_id: str
    tool_name: str
    provider_executed: bool | None = None
    provider_metadata: dict[str, Any] | None = None
    dynamic: bool | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolCallDeltaPayload:
    """Payload of ``tool-call-delta``: the next piece of argument JSON text."""

    tool_call_id: str
    args_text_delta: str
    tool_name: str | None = None
    provider_metadata: dict[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolCallInputStreamingEndPayload:
    """Payload of ``tool-call-input-streaming-end`` (a ``tool-call`` follows)."""

    tool_call_id: str
    provider_metadata: dict[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolCallPayload:
    """Payload of ``tool-call``: the model asks to run ``tool_name`` with ``args``."""

    tool_call_id: str
    tool_name: str
    args: Any = None
    provider_executed: bool | None = None
    provider_metadata: dict[str, Any] | None = None
    output: Any = None
    dynamic: bool | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolResultPayload:
    """Payload of ``tool-result``. ``result`` is always written, even when it is
    ``None`` (a tool may return nothing)."""

    tool_call_id: str
    tool_name: str
    result: Any
    is_error: bool | None = None
    args: Any = None
    provider_executed: bool | None = None
    provider_metadata: dict[str, Any] | None = None
    dynamic: bool | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolErrorPayload:
    """Payload of ``tool-error``: the tool raised, or its arguments were invalid
    (sent back to the model so it can correct itself)."""

    tool_call_id: str
    tool_name: str
    error: Any
    args: Any = None
    id: str | None = None
    provider_executed: bool | None = None
    provider_metadata: dict[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolCallApprovalPayload:
    """Payload of ``tool-call-approval``: the run waits for a person to approve
    or decline this call (``Agent.approve_tool_call`` / ``decline_tool_call``).
    ``resume_schema`` is the JSON Schema of the answer, as a JSON *string*
    (Mastra's shape)."""

    tool_call_id: str
    tool_name: str
    args: Any = None
    resume_schema: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolCallSuspendedPayload:
    """Payload of ``tool-call-suspended``: the tool suspended itself
    (``ctx.suspend(payload)``) and waits for ``Agent.resume_stream``;
    ``suspend_payload`` is what it passed."""

    tool_call_id: str
    tool_name: str
    args: Any = None
    suspend_payload: Any = None
    resume_schema: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolApproval:
    """A person's answer to a ``tool-call-approval`` (its ``id`` is the tool
    call id, as in Mastra)."""

    id: str
    approved: bool
    reason: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolOutputDeniedPayload:
    """Payload of ``tool-output-denied``: the call was declined (or its
    approval expired); the model was told ``approval.reason``."""

    tool_call_id: str
    tool_name: str
    args: Any = None
    approval: ToolApproval | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolOutputPayload:
    """Payload of ``tool-output``: streamed output of a nested tool or agent."""

    tool_call_id: str
    output: Any
    tool_name: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class StepFinishPayload:
    """Payload of ``step-finish``: a model step ended."""

    step_result: StepResultInfo
    output: StepOutput = attrs.field(factory=StepOutput)
    metadata: Any = None
    message_id: str | None = None
    total_usage: Usage | None = None
    response: Any = None
    provider_metadata: dict[str, Any] | None = None
    id: str | None = None
    messages: Any = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class FinishPayload:
    """Payload of ``finish``: the run ended normally."""

    step_result: StepResultInfo
    output: StepOutput = attrs.field(factory=StepOutput)
    metadata: Any = None
    total_usage: Usage | None = None
    provider_metadata: dict[str, Any] | None = None
    messages: Any = None
    """Mastra's ``{all, user, nonUser}`` message lists, as JSON."""
    response: Any = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ErrorPayload:
    """Payload of ``error``. The runtime puts the exception itself in ``error``;
    read from JSON, it is the JSON value (e.g. ``{"name", "message"}``)."""

    error: Any
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class AbortPayload:
    """Payload of ``abort`` (the caller cancelled the run): empty."""

    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class RawPayload:
    """Payload of ``raw``: a provider's raw chunk, kept whole in ``extra``."""

    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class TripwirePayload:
    """Payload of ``tripwire``: a processor stopped the run (or asked a retry).

    On the wire it always has exactly ``reason``, ``retry``, ``metadata`` and
    ``processorId`` (``null`` when unset), plus any ``extra`` keys read from JSON.
    """

    reason: str
    retry: bool | None = None
    metadata: Any = None
    processor_id: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)

    @classmethod
    def of(cls, tripwire: TripWire) -> TripwirePayload:
        """The payload of the chunk that reports a raised ``TripWire``."""
        return cls(
            reason=tripwire.reason,
            retry=tripwire.retry,
            metadata=tripwire.metadata,
            processor_id=tripwire.processor_id,
        )


@attrs.frozen(kw_only=True)
class StepRetryPayload:
    """Payload of ``step-retry`` (procession's own chunk, SPEC §2.4): the step
    ``step_number`` is being retried; discard what was seen of it, and of any
    later step, so far. ``reason`` ``"takeover"``: a durable run taken over by
    another process redoes that step from its last checkpoint (the step may
    have been seen whole; it is withdrawn all the same)."""

    step_number: int
    reason: str
    retry_count: int
    processor_id: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)
