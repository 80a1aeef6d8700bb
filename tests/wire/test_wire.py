"""Mastra wire JSON: exact shapes, preserved extras, dates, typed errors."""

from __future__ import annotations

import copy
import datetime as _dt
import json
from typing import Any

import attrs
import pytest

from procession import (
    MissingFieldError,
    ProviderError,
    UnknownChunkTypeError,
    WireFormatError,
)
from procession.chunks import (
    DataChunk,
    ErrorChunk,
    ErrorPayload,
    ObjectChunk,
    ObjectResultChunk,
    StepFinishChunk,
    StepRetryChunk,
    StepRetryPayload,
    TextDeltaChunk,
    TextDeltaPayload,
    TripwireChunk,
    TripwirePayload,
    Usage,
    abort,
    data,
    error,
    finish,
    from_wire,
    text_delta,
    to_wire,
    tool_call,
    tool_result,
    tripwire,
)
from procession.messages import (
    DataPart,
    FilePart,
    Message,
    MessageContent,
    ReasoningPart,
    SourceDocumentPart,
    SourcePart,
    StepStartPart,
    TextPart,
    ToolInvocationPart,
    UnknownPart,
    message_from_wire,
    message_to_wire,
)

# --------------------------------------------------------------------------- #
# Exact chunk shapes
# --------------------------------------------------------------------------- #


def test_tripwire_shape_is_exact() -> None:
    chunk = tripwire("x", retry=False, processor_id="p", run_id="r1")
    assert to_wire(chunk) == {
        "type": "tripwire",
        "runId": "r1",
        "from": "AGENT",
        "payload": {
            "reason": "x",
            "retry": False,
            "metadata": None,
            "processorId": "p",
        },
    }


def test_tripwire_payload_always_has_its_four_keys() -> None:
    assert to_wire(tripwire("x"))["payload"] == {
        "reason": "x",
        "retry": None,
        "metadata": None,
        "processorId": None,
    }


def test_text_delta_shape() -> None:
    assert to_wire(text_delta("hi", id="t1", run_id="r")) == {
        "type": "text-delta",
        "runId": "r",
        "from": "AGENT",
        "payload": {"id": "t1", "text": "hi"},
    }


def test_provider_metadata_and_envelope_metadata_are_written_when_set() -> None:
    chunk = TextDeltaChunk(
        payload=TextDeltaPayload(id="t", text="a", provider_metadata={"x": {"y": 1}}),
        metadata={"from": "structured-output"},
        from_="USER",
    )
    assert to_wire(chunk) == {
        "type": "text-delta",
        "from": "USER",
        "payload": {"id": "t", "text": "a", "providerMetadata": {"x": {"y": 1}}},
        "metadata": {"from": "structured-output"},
    }


def test_tool_call_and_result_shapes() -> None:
    assert to_wire(tool_call("c1", "search", {"q": "x"}, run_id="r")) == {
        "type": "tool-call",
        "runId": "r",
        "from": "AGENT",
        "payload": {"toolCallId": "c1", "toolName": "search", "args": {"q": "x"}},
    }
    # A tool may return nothing: ``result`` is required and written as null.
    assert to_wire(tool_result("c1", "search", None, is_error=True)) == {
        "type": "tool-result",
        "from": "AGENT",
        "payload": {
            "toolCallId": "c1",
            "toolName": "search",
            "result": None,
            "isError": True,
        },
    }


def test_finish_shape_with_usage() -> None:
    usage = Usage(input_tokens=3, output_tokens=4, total_tokens=7, reasoning_tokens=0)
    assert to_wire(finish("length", usage=usage, run_id="r")) == {
        "type": "finish",
        "runId": "r",
        "from": "AGENT",
        "payload": {
            "stepResult": {"reason": "length"},
            "output": {
                "usage": {
                    "inputTokens": 3,
                    "outputTokens": 4,
                    "totalTokens": 7,
                    "reasoningTokens": 0,
                }
            },
        },
    }


def test_step_retry_shape() -> None:
    chunk = StepRetryChunk(
        payload=StepRetryPayload(
            step_number=2, reason="bad", processor_id="guard", retry_count=1
        ),
        run_id="r",
    )
    assert to_wire(chunk) == {
        "type": "step-retry",
        "runId": "r",
        "from": "AGENT",
        "payload": {
            "stepNumber": 2,
            "reason": "bad",
            "processorId": "guard",
            "retryCount": 1,
        },
    }


def test_abort_data_and_object_shapes() -> None:
    assert to_wire(abort(run_id="r")) == {
        "type": "abort",
        "runId": "r",
        "from": "AGENT",
        "payload": {},
    }
    assert to_wire(data("progress", {"p": 0.5})) == {
        "type": "data-progress",
        "data": {"p": 0.5},
    }
    assert to_wire(DataChunk(type="data-x", data=None, id="i", transient=True)) == {
        "type": "data-x",
        "data": None,
        "id": "i",
        "transient": True,
    }
    assert to_wire(ObjectChunk(object={"a": 1}, run_id="r")) == {
        "type": "object",
        "runId": "r",
        "from": "AGENT",
        "object": {"a": 1},
    }
    assert from_wire({"type": "object-result", "object": [1]}) == ObjectResultChunk(
        object=[1], from_=None
    )


def test_chunk_without_run_id_or_from_round_trips() -> None:
    # Mastra's per-chunk output runner emits tripwires as just {type, payload}.
    wire = {
        "type": "tripwire",
        "payload": {
            "reason": "x",
            "retry": True,
            "metadata": {"a": 1},
            "processorId": None,
        },
    }
    chunk = from_wire(wire)
    assert chunk == TripwireChunk(
        payload=TripwirePayload(reason="x", retry=True, metadata={"a": 1}),
        run_id=None,
        from_=None,
    )
    assert to_wire(chunk) == wire


def test_exception_error_is_written_as_name_and_message() -> None:
    assert to_wire(error(RuntimeError("boom")))["payload"] == {
        "error": {"name": "RuntimeError", "message": "boom"}
    }
    provider = ProviderError("rate limited", status_code=429, code="rate_limit")
    assert to_wire(error(provider))["payload"] == {
        "error": {
            "name": "ProviderError",
            "message": "rate limited",
            "statusCode": 429,
            "code": "rate_limit",
        }
    }


def test_error_read_from_wire_is_the_json_value() -> None:
    wire = {
        "type": "error",
        "runId": "r",
        "from": "AGENT",
        "payload": {"error": "oops"},
    }
    assert from_wire(wire) == ErrorChunk(payload=ErrorPayload(error="oops"), run_id="r")


def test_to_wire_returns_a_fresh_json_dict() -> None:
    chunk = tool_call("c", "t", {"nested": {"list": [1, "ü"]}})
    wire = to_wire(chunk)
    wire["payload"]["args"]["nested"]["list"].append(2)
    assert chunk.payload.args == {"nested": {"list": [1, "ü"]}}
    assert json.loads(json.dumps(to_wire(chunk))) == to_wire(chunk)


def test_to_wire_rejects_non_chunks() -> None:
    with pytest.raises(TypeError, match=r"to_wire expects a chunk.*dict"):
        to_wire({"type": "text-delta"})  # type: ignore[arg-type]  # on purpose


# --------------------------------------------------------------------------- #
# Extras and explicit nulls
# --------------------------------------------------------------------------- #


def test_unknown_keys_are_kept_at_every_level() -> None:
    wire: dict[str, Any] = {
        "type": "step-finish",
        "runId": "r",
        "from": "AGENT",
        "traceId": "abc",
        "payload": {
            "stepResult": {"reason": "stop", "newThing": 1},
            "output": {"text": "hi", "usage": {"inputTokens": 1, "cacheHit": True}},
            "future": [1, 2],
        },
    }
    chunk = from_wire(copy.deepcopy(wire))
    assert chunk.extra == {"traceId": "abc"}
    assert isinstance(chunk, StepFinishChunk)
    assert chunk.payload.extra == {"future": [1, 2]}
    assert chunk.payload.step_result.extra == {"newThing": 1}
    assert chunk.payload.output.usage is not None
    assert chunk.payload.output.usage.extra == {"cacheHit": True}
    assert to_wire(chunk) == wire


def test_explicit_nulls_survive_a_round_trip() -> None:
    wire = {
        "type": "text-delta",
        "runId": None,
        "from": "AGENT",
        "payload": {"id": "t", "text": "a", "providerMetadata": None},
    }
    chunk = from_wire(wire)
    assert isinstance(chunk, TextDeltaChunk)
    assert chunk.run_id is None
    assert chunk.payload.extra == {"providerMetadata": None}
    assert to_wire(chunk) == wire


def test_a_set_field_wins_over_a_null_kept_in_extra() -> None:
    chunk = from_wire(
        {
            "type": "text-delta",
            "payload": {"id": "t", "text": "a", "providerMetadata": None},
        }
    )
    assert isinstance(chunk, TextDeltaChunk)
    changed = attrs.evolve(
        chunk, payload=attrs.evolve(chunk.payload, provider_metadata={"k": 1})
    )
    assert to_wire(changed)["payload"]["providerMetadata"] == {"k": 1}


def test_data_chunk_extras_round_trip() -> None:
    wire = {"type": "data-x", "data": [1], "custom": {"z": None}}
    chunk = from_wire(wire)
    assert chunk == DataChunk(type="data-x", data=[1], extra={"custom": {"z": None}})
    assert to_wire(chunk) == wire


# --------------------------------------------------------------------------- #
# Typed errors
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("wire", "error_type", "pattern"),
    [
        (5, MissingFieldError, r"must be a JSON object.*got int"),
        ([], MissingFieldError, r"must be a JSON object.*got list"),
        ({}, MissingFieldError, r"chunk is missing the required field 'type'"),
        ({"type": 3}, WireFormatError, r"'type' must be a string, got int 3"),
        ({"type": "nope"}, UnknownChunkTypeError, r"unknown chunk type 'nope'"),
        (
            {"type": "text-delta"},
            MissingFieldError,
            r"'text-delta' chunk is missing the required field 'payload'",
        ),
        (
            {"type": "text-delta", "payload": {"id": "t"}},
            MissingFieldError,
            r"'text-delta' chunk is missing the required field 'payload.text'",
        ),
        (
            {"type": "text-delta", "payload": {"id": "t", "text": 5}},
            WireFormatError,
            r"'text-delta' chunk: field 'payload.text' \(expected str\).*got int 5",
        ),
        (
            {"type": "text-delta", "payload": ["t"]},
            WireFormatError,
            r"field 'payload' \(expected TextDeltaPayload\).*JSON object, got list",
        ),
        (
            {"type": "text-delta", "runId": 1, "payload": {"id": "t", "text": ""}},
            WireFormatError,
            r"field 'runId' \(expected str \| None\)",
        ),
        (
            {"type": "finish", "payload": {"stepResult": {}}},
            MissingFieldError,
            r"'finish' chunk is missing the required field 'payload.stepResult.reason'",
        ),
        (
            {
                "type": "finish",
                "payload": {
                    "stepResult": {"reason": "stop"},
                    "output": {"usage": {"inputTokens": True}},
                },
            },
            WireFormatError,
            r"field 'payload.output.usage.inputTokens' \(expected int \| None\)",
        ),
        (
            {"type": "tripwire", "payload": {"retry": False}},
            MissingFieldError,
            r"'tripwire' chunk is missing the required field 'payload.reason'",
        ),
        (
            {"type": "data-x"},
            MissingFieldError,
            r"'data-x' chunk is missing the required field 'data'",
        ),
    ],
)
def test_bad_chunk_json_raises_a_typed_error(
    wire: Any, error_type: type[Exception], pattern: str
) -> None:
    with pytest.raises(error_type, match=pattern):
        from_wire(wire)


def test_missing_field_error_carries_the_field() -> None:
    with pytest.raises(MissingFieldError, match=r"payload\.toolName") as info:
        from_wire({"type": "tool-call", "payload": {"toolCallId": "c"}})
    assert info.value.field == "payload.toolName"


# --------------------------------------------------------------------------- #
# Messages
# --------------------------------------------------------------------------- #

MESSAGE_JSON: dict[str, Any] = {
    "id": "msg-1",
    "role": "assistant",
    "createdAt": "2024-05-01T12:00:00.123Z",
    "threadId": "thread-1",
    "resourceId": "user-1",
    "type": "v2",
    "unknownTopLevel": {"kept": True},
    "content": {
        "format": 2,
        "content": "Hello",
        "metadata": {"mastra": {"responseBoundary": True}},
        "experimental_attachments": [],
        "contentExtra": 1,
        "parts": [
            {
                "type": "text",
                "text": "Hello",
                "providerMetadata": {
                    "anthropic": {"cacheControl": {"type": "ephemeral"}}
                },
                "createdAt": 1714564800123,
                "partExtra": "x",
            },
            {
                "type": "reasoning",
                "reasoning": "thinking…",
                "details": [
                    {"type": "text", "text": "thinking…", "signature": "sig"},
                    {"type": "redacted", "data": "b64"},
                ],
            },
            {
                "type": "tool-invocation",
                "toolInvocation": {
                    "state": "result",
                    "toolCallId": "call-1",
                    "toolName": "search",
                    "args": {"q": "x"},
                    "result": {"hits": []},
                },
                "providerExecuted": False,
            },
            {"type": "file", "data": "aGk=", "mimeType": "text/plain"},
            {
                "type": "source",
                "source": {
                    "sourceType": "url",
                    "id": "s1",
                    "url": "https://example.com",
                    "title": "Example",
                    "providerMetadata": {},
                },
            },
            {
                "type": "source-document",
                "sourceId": "d1",
                "mediaType": "application/pdf",
                "title": "Doc",
                "filename": "doc.pdf",
            },
            {"type": "step-start"},
            {"type": "data-progress", "data": {"p": 1}, "id": "prog-1"},
            {"type": "dynamic-tool", "toolName": "x", "input": [1, None]},
        ],
    },
}


def test_message_with_every_part_type_round_trips() -> None:
    message = message_from_wire(copy.deepcopy(MESSAGE_JSON))
    assert [type(part) for part in message.content.parts] == [
        TextPart,
        ReasoningPart,
        ToolInvocationPart,
        FilePart,
        SourcePart,
        SourceDocumentPart,
        StepStartPart,
        DataPart,
        UnknownPart,
    ]
    assert message.created_at == _dt.datetime(2024, 5, 1, 12, 0, 0, 123000, _dt.UTC)
    assert message.text == "Hello"
    assert message.extra == {"unknownTopLevel": {"kept": True}}
    assert message.content.extra == {"contentExtra": 1}
    text_part = message.content.parts[0]
    assert isinstance(text_part, TextPart)
    assert text_part.extra == {"partExtra": "x"}
    assert text_part.created_at == 1714564800123
    unknown = message.content.parts[-1]
    assert unknown == UnknownPart(
        type="dynamic-tool", fields={"toolName": "x", "input": [1, None]}
    )
    assert message_to_wire(message) == MESSAGE_JSON
    assert message_from_wire(message_to_wire(message)) == message


def test_renamed_reasoning_part_keeps_its_new_type_and_fields() -> None:
    message = message_from_wire(copy.deepcopy(MESSAGE_JSON))
    part = message.content.parts[1]
    assert isinstance(part, ReasoningPart)
    part.type = "thinking"
    written = message_to_wire(message)["content"]["parts"][1]
    assert written == {**MESSAGE_JSON["content"]["parts"][1], "type": "thinking"}


def test_in_place_edits_are_written() -> None:
    message = Message.user("hi", id="m1")
    part = message.content.parts[0]
    assert isinstance(part, TextPart)
    part.text = "edited"
    assert message_to_wire(message)["content"]["parts"] == [
        {"type": "text", "text": "edited"}
    ]


@pytest.mark.parametrize(
    ("created_at", "wire"),
    [
        (
            _dt.datetime(2024, 1, 2, 3, 4, 5, 678000, _dt.UTC),
            "2024-01-02T03:04:05.678Z",
        ),
        (_dt.datetime(2024, 1, 2, 3, 4, 5, 0, _dt.UTC), "2024-01-02T03:04:05.000Z"),
        (
            _dt.datetime(2024, 1, 2, 3, 4, 5, 678901, _dt.UTC),
            "2024-01-02T03:04:05.678901Z",
        ),
        (
            _dt.datetime(2024, 1, 2, 3, 4, 5, 0, _dt.timezone(_dt.timedelta(hours=2))),
            "2024-01-02T03:04:05.000+02:00",
        ),
        (_dt.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02T03:04:05.000"),
    ],
)
def test_created_at_is_iso_text(created_at: _dt.datetime, wire: str) -> None:
    message = Message(role="user", id="m", created_at=created_at)
    written = message_to_wire(message)
    assert written["createdAt"] == wire
    assert message_from_wire(written) == message


def test_created_at_accepts_epoch_milliseconds() -> None:
    wire = {
        "id": "m",
        "role": "user",
        "createdAt": 1704164645678,
        "content": {"parts": []},
    }
    message = message_from_wire(wire)
    assert message.created_at == _dt.datetime(2024, 1, 2, 3, 4, 5, 678000, _dt.UTC)
    assert message_to_wire(message)["createdAt"] == "2024-01-02T03:04:05.678Z"


def _message(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "m",
        "role": "user",
        "createdAt": "2024-01-01T00:00:00Z",
        "content": {"format": 2, "parts": []},
    }
    base.update(changes)
    return base


@pytest.mark.parametrize(
    ("wire", "error_type", "pattern"),
    [
        ("hello", MissingFieldError, r"a message must be a JSON object; got str"),
        (
            {"role": "user"},
            MissingFieldError,
            r"message is missing the required field 'id'",
        ),
        (
            {"id": "m", "role": "user", "content": {"parts": []}},
            MissingFieldError,
            r"message is missing the required field 'createdAt'",
        ),
        (
            _message(role="bot"),
            WireFormatError,
            r"message: field 'role'.*expected one of 'user', 'assistant'.*got 'bot'",
        ),
        (
            _message(createdAt="yesterday"),
            WireFormatError,
            r"field 'createdAt' \(expected datetime\).*ISO-8601.*'yesterday'",
        ),
        (
            _message(content={"parts": [{"type": "text"}]}),
            MissingFieldError,
            r"missing the required field 'content\.parts\[0\]\.text'",
        ),
        (
            _message(content={"parts": [{"text": "x"}]}),
            MissingFieldError,
            r"missing the required field 'content\.parts\[0\]\.type'",
        ),
        (
            _message(
                content={
                    "parts": [
                        {"type": "text", "text": "ok"},
                        {
                            "type": "tool-invocation",
                            "toolInvocation": {"state": "call", "toolCallId": "c"},
                        },
                    ]
                }
            ),
            MissingFieldError,
            r"'content\.parts\[1\]\.toolInvocation\.toolName'",
        ),
        (
            _message(content={"parts": "text"}),
            WireFormatError,
            r"field 'content\.parts'.*expected a JSON array, got str",
        ),
        (
            _message(content={"parts": [{"type": "data-x", "data": 1, "id": 7}]}),
            WireFormatError,
            r"field 'content\.parts\[0\]\.id' \(expected str \| None\)",
        ),
    ],
)
def test_bad_message_json_raises_a_typed_error(
    wire: Any, error_type: type[Exception], pattern: str
) -> None:
    with pytest.raises(error_type, match=pattern):
        message_from_wire(wire)


def test_message_to_wire_rejects_non_messages() -> None:
    with pytest.raises(TypeError, match="message_to_wire expects a Message, got dict"):
        message_to_wire({"id": "m"})  # type: ignore[arg-type]  # on purpose


def test_default_content_is_written_in_full() -> None:
    message = Message(
        role="user",
        id="m",
        created_at=_dt.datetime(2024, 1, 1, tzinfo=_dt.UTC),
        content=MessageContent(),
    )
    assert message_to_wire(message) == {
        "id": "m",
        "role": "user",
        "createdAt": "2024-01-01T00:00:00.000Z",
        "content": {"format": 2, "parts": []},
    }


def test_ai_sdk_ui_tool_parts_in_a_history_become_tool_invocations() -> None:
    """What ``useChat`` sends back: typed tool parts (``tool-<name>``,
    ``dynamic-tool``), whose calls and results must reach the model."""
    from procession.data import to_prompt_messages
    from procession.processors import MessageList, PromptToolResultPart

    ml = MessageList()
    ml.add(
        [
            {
                "id": "u1",
                "role": "user",
                "parts": [{"type": "text", "text": "weather?"}],
            },
            {
                "id": "a1",
                "role": "assistant",
                "parts": [
                    {"type": "step-start"},
                    {
                        "type": "tool-weather",
                        "toolCallId": "c1",
                        "state": "output-available",
                        "input": {"city": "Oslo"},
                        "output": "sunny",
                    },
                    {
                        "type": "dynamic-tool",
                        "toolName": "lookup",
                        "toolCallId": "c2",
                        "state": "output-error",
                        "input": {},
                        "errorText": "boom",
                    },
                    {"type": "reasoning", "text": "thinking it over"},
                    {"type": "text", "text": "It is sunny."},
                ],
            },
        ],
        "input",
    )
    prompt = to_prompt_messages(ml.get.all.db())
    results = [
        (p.tool_call_id, p.tool_name, p.result, p.is_error)
        for m in prompt
        for p in getattr(m, "content", ())
        if isinstance(p, PromptToolResultPart)
    ]
    assert results == [
        ("c1", "weather", "sunny", False),
        ("c2", "lookup", "boom", True),
    ]
    [assistant] = [m for m in ml.get.all.db() if m.role == "assistant"]
    assert [p.type for p in assistant.content.parts] == [
        "step-start",
        "tool-invocation",
        "tool-invocation",
        "reasoning",
        "text",
    ]
