"""The chunk classes: types, immutability, constructors, the public facade."""

from __future__ import annotations

import typing

import attrs
import pytest

import procession.chunks
from procession.chunks import (
    CHUNK_TYPES,
    AbortChunk,
    AbortPayload,
    Chunk,
    DataChunk,
    ErrorChunk,
    FinishChunk,
    ObjectChunk,
    ObjectResultChunk,
    StepFinishChunk,
    StepStartChunk,
    TextDeltaChunk,
    TextDeltaPayload,
    ToolCallChunk,
    ToolResultChunk,
    TripwireChunk,
    Usage,
    abort,
    data,
    error,
    finish,
    is_data_chunk,
    reasoning_delta,
    step_finish,
    step_start,
    text_delta,
    text_end,
    text_start,
    tool_call,
    tool_result,
    tripwire,
)
from procession.data import _chunks, _payloads

# The chunk types the issue list names (data-* aside).
EXPECTED_TYPES = {
    "start",
    "step-start",
    "response-metadata",
    "text-start",
    "text-delta",
    "text-end",
    "reasoning-start",
    "reasoning-delta",
    "reasoning-end",
    "reasoning-signature",
    "redacted-reasoning",
    "source",
    "file",
    "tool-call-input-streaming-start",
    "tool-call-delta",
    "tool-call-input-streaming-end",
    "tool-call",
    "tool-result",
    "tool-error",
    "tool-output",
    "step-finish",
    "finish",
    "error",
    "abort",
    "raw",
    "tripwire",
    "step-retry",
    "object",
    "object-result",
    # A run that waits for a person (Mastra's approval / suspension chunks).
    "tool-call-approval",
    "tool-call-suspended",
    "tool-output-denied",
}


def test_chunk_types_cover_every_mastra_type() -> None:
    assert set(CHUNK_TYPES) == EXPECTED_TYPES
    for type_, cls in CHUNK_TYPES.items():
        assert cls.type == type_


def test_chunk_alias_is_every_chunk_class() -> None:
    assert set(typing.get_args(Chunk)) == {*CHUNK_TYPES.values(), DataChunk}


def test_type_string_and_match_both_work() -> None:
    chunk: Chunk = text_delta("hello")
    assert chunk.type == "text-delta"
    match chunk:
        case TextDeltaChunk(payload=TextDeltaPayload(text=text)):
            assert text == "hello"
        case _:
            pytest.fail("a text-delta did not match TextDeltaChunk")


def test_chunks_are_frozen() -> None:
    chunk = text_delta("a")
    with pytest.raises(
        attrs.exceptions.FrozenInstanceError, match="can't set attribute"
    ):
        chunk.run_id = "r"  # type: ignore[misc]  # checking the runtime guard
    with pytest.raises(
        attrs.exceptions.FrozenInstanceError, match="can't set attribute"
    ):
        chunk.payload.text = "b"  # type: ignore[misc]  # checking the runtime guard


def test_evolve_makes_a_changed_copy() -> None:
    chunk = text_delta("a", run_id="r1")
    changed = attrs.evolve(chunk, payload=attrs.evolve(chunk.payload, text="b"))
    assert changed.payload.text == "b"
    assert chunk.payload.text == "a"
    assert changed.run_id == "r1"


def test_envelope_defaults() -> None:
    chunk = text_delta("a")
    assert chunk.run_id is None
    assert chunk.from_ == "AGENT"
    assert chunk.metadata is None
    assert chunk.extra == {}
    assert chunk.payload.id == "text-1"
    assert chunk.payload.provider_metadata is None


def test_every_envelope_chunk_lists_its_body_first() -> None:
    # The envelope fields are inherited, which attrs would list first; reprs
    # (printed in the README), attrs.fields and astuple keep the body first.
    for cls in CHUNK_TYPES.values():
        body = "object" if cls in (ObjectChunk, ObjectResultChunk) else "payload"
        names = [f.name for f in attrs.fields(cls)]
        assert names == [body, "run_id", "from_", "metadata", "extra"], cls
    assert repr(abort(run_id="r")) == (
        "AbortChunk(payload=AbortPayload(extra={}), run_id='r', from_='AGENT', "
        "metadata=None, extra={})"
    )


def test_data_chunk_type_must_start_with_data() -> None:
    with pytest.raises(
        ValueError, match=r"must be a str starting with 'data-'.*'progress'"
    ):
        DataChunk(type="progress", data=1)


def test_data_constructor_accepts_name_or_full_type() -> None:
    assert data("progress", {"p": 1}).type == "data-progress"
    assert data("data-progress", 1, id="x", transient=True) == DataChunk(
        type="data-progress", data=1, id="x", transient=True
    )


def test_is_data_chunk() -> None:
    assert is_data_chunk(data("x", None))
    assert not is_data_chunk(text_delta("x"))
    assert not is_data_chunk({"type": "data-x"})


def test_text_constructors() -> None:
    assert text_start(id="t", run_id="r").payload.id == "t"
    assert text_start().run_id is None
    assert text_end(id="t").payload.id == "t"
    assert text_delta("x", id="t", run_id="r") == TextDeltaChunk(
        payload=TextDeltaPayload(id="t", text="x"), run_id="r"
    )
    assert reasoning_delta("why").payload.text == "why"


def test_tool_constructors() -> None:
    call = tool_call("c1", "search", {"q": "x"}, provider_executed=True)
    assert isinstance(call, ToolCallChunk)
    assert (call.payload.tool_call_id, call.payload.tool_name) == ("c1", "search")
    assert call.payload.args == {"q": "x"}
    assert call.payload.provider_executed is True
    result = tool_result("c1", "search", [1, 2], args={"q": "x"}, is_error=False)
    assert isinstance(result, ToolResultChunk)
    assert result.payload.result == [1, 2]
    assert result.payload.is_error is False


def test_step_and_finish_constructors() -> None:
    assert isinstance(step_start(message_id="m"), StepStartChunk)
    usage = Usage(input_tokens=1, output_tokens=2, total_tokens=3)
    step = step_finish("tool-calls", text="hi", usage=usage, is_continued=False)
    assert isinstance(step, StepFinishChunk)
    assert step.payload.step_result.reason == "tool-calls"
    assert step.payload.step_result.is_continued is False
    assert step.payload.output.text == "hi"
    assert step.payload.output.usage == usage
    done = finish(usage=usage, run_id="r")
    assert isinstance(done, FinishChunk)
    assert done.payload.step_result.reason == "stop"
    assert done.payload.output.usage is usage


def test_tripwire_error_abort_constructors() -> None:
    trip = tripwire("no", retry=True, metadata={"k": 1}, processor_id="p", run_id="r")
    assert isinstance(trip, TripwireChunk)
    payload = trip.payload
    assert (payload.reason, payload.retry, payload.metadata, payload.processor_id) == (
        "no",
        True,
        {"k": 1},
        "p",
    )
    boom = RuntimeError("boom")
    err = error(boom, run_id="r")
    assert isinstance(err, ErrorChunk)
    assert err.payload.error is boom
    assert abort() == AbortChunk(payload=AbortPayload())


def test_facade_all_is_sorted_and_complete() -> None:
    names = procession.chunks.__all__
    assert names == sorted(names)
    assert set(names) == {
        *_chunks.__all__,
        *_payloads.__all__,
        "Usage",
        "to_wire",
        "from_wire",
    }
    for name in names:
        assert hasattr(procession.chunks, name), name
