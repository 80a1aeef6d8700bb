"""Wire round trips, both directions, for everything the strategies generate."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from procession.chunks import Chunk, DataChunk, TextDeltaChunk, from_wire, to_wire
from procession.messages import Message, message_from_wire, message_to_wire
from procession.testing._strategies import (
    chunk_streams,
    chunks,
    messages,
    text_chunks,
    text_splits,
    wire_chunks,
)


@given(chunks())
def test_chunk_survives_to_wire_and_back(chunk: Chunk) -> None:
    assert from_wire(to_wire(chunk)) == chunk


@given(chunks())
def test_chunk_wire_is_json(chunk: Chunk) -> None:
    wire = to_wire(chunk)
    assert json.loads(json.dumps(wire)) == wire
    assert wire["type"] == chunk.type


@given(wire_chunks())
def test_mastra_json_survives_from_wire_and_back(wire: dict[str, Any]) -> None:
    assert to_wire(from_wire(wire)) == wire


@given(messages())
def test_message_survives_to_wire_and_back(message: Message) -> None:
    assert message_from_wire(message_to_wire(message)) == message


@given(messages().map(message_to_wire))
def test_message_json_survives_from_wire_and_back(wire: dict[str, Any]) -> None:
    assert json.loads(json.dumps(wire)) == wire
    assert message_to_wire(message_from_wire(wire)) == wire


@given(chunk_streams())
def test_streams_are_well_formed_and_round_trip(stream: list[Chunk]) -> None:
    types = [chunk.type for chunk in stream]
    assert types[:3] == ["start", "step-start", "text-start"]
    assert types[-2:] == ["step-finish", "finish"]
    assert "text-end" in types
    assert (
        len({chunk.run_id for chunk in stream if not isinstance(chunk, DataChunk)}) == 1
    )
    text = "".join(c.payload.text for c in stream if isinstance(c, TextDeltaChunk))
    assert text
    assert [from_wire(to_wire(chunk)) for chunk in stream] == stream


@given(text_chunks())
def test_text_chunks_are_text_deltas(chunk: TextDeltaChunk) -> None:
    assert isinstance(chunk, TextDeltaChunk)
    assert from_wire(to_wire(chunk)) == chunk


@given(st.data(), st.text(max_size=30))
def test_text_splits_concatenate_to_the_text(data: st.DataObject, text: str) -> None:
    pieces = data.draw(text_splits(text))
    assert "".join(pieces) == text
    assert all(pieces)
