"""The AI SDK UI message stream encoder: every chunk has only the keys the
AI SDK's strict schema (``uiMessageChunkSchema``) allows, with its required
ones, and no ``null`` optional."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from procession.chunks import (
    AbortChunk,
    Chunk,
    DataChunk,
    FileChunk,
    FilePayload,
    ReasoningDeltaChunk,
    ReasoningDeltaPayload,
    SourceChunk,
    SourcePayload,
    ToolErrorChunk,
    ToolErrorPayload,
    ToolResultChunk,
    ToolResultPayload,
    from_wire,
)
from procession.server import ui_chunks
from tests.server.server_helpers import sse_events

# type -> (required keys, optional keys), from uiMessageChunkSchema (ai 7).
SCHEMA: dict[str, tuple[set[str], set[str]]] = {
    "text-start": ({"id"}, {"providerMetadata"}),
    "text-delta": ({"id", "delta"}, {"providerMetadata"}),
    "text-end": ({"id"}, {"providerMetadata"}),
    "reasoning-start": ({"id"}, {"providerMetadata"}),
    "reasoning-delta": ({"id", "delta"}, {"providerMetadata"}),
    "reasoning-end": ({"id"}, {"providerMetadata"}),
    "error": ({"errorText"}, set()),
    "tool-input-start": (
        {"toolCallId", "toolName"},
        {"providerExecuted", "providerMetadata", "dynamic", "title"},
    ),
    "tool-input-delta": ({"toolCallId", "inputTextDelta"}, set()),
    "tool-input-available": (
        {"toolCallId", "toolName", "input"},
        {"providerExecuted", "providerMetadata", "dynamic", "title"},
    ),
    "tool-output-available": (
        {"toolCallId", "output"},
        {"providerExecuted", "dynamic", "preliminary"},
    ),
    "tool-output-error": ({"toolCallId", "errorText"}, {"providerExecuted", "dynamic"}),
    "source-url": ({"sourceId", "url"}, {"title", "providerMetadata"}),
    "source-document": (
        {"sourceId", "mediaType", "title"},
        {"filename", "providerMetadata"},
    ),
    "file": ({"url", "mediaType"}, {"providerMetadata"}),
    "start-step": (set(), set()),
    "finish-step": (set(), set()),
    "start": (set(), {"messageId", "messageMetadata"}),
    "finish": (set(), {"finishReason", "messageMetadata"}),
    "abort": (set(), {"reason"}),
}
DATA = ({"data"}, {"id", "transient"})


def check_schema(chunk: dict[str, Any]) -> None:
    kind = chunk["type"]
    required, optional = DATA if kind.startswith("data-") else SCHEMA[kind]
    keys = set(chunk) - {"type"}
    assert required <= keys, (kind, required - keys)
    assert keys <= required | optional, (kind, keys - required - optional)
    for key in keys & optional:
        assert chunk[key] is not None, (kind, key)


@pytest.mark.parametrize("path", sorted(Path(__file__).parent.glob("golden/ui-*.sse")))
def test_golden_ui_streams_keep_the_schema(path: Path) -> None:
    events = sse_events(path.read_bytes())
    assert events[-1] == "[DONE]"
    for event in events[:-1]:
        check_schema(event)


CHUNKS: list[tuple[Chunk, list[dict[str, Any]]]] = [
    (
        ReasoningDeltaChunk(payload=ReasoningDeltaPayload(id="r", text="hm")),
        [{"type": "reasoning-delta", "id": "r", "delta": "hm"}],
    ),
    (
        SourceChunk(payload=SourcePayload(id="s", url="https://x.example", title="X")),
        [
            {
                "type": "source-url",
                "sourceId": "s",
                "url": "https://x.example",
                "title": "X",
            }
        ],
    ),
    (
        SourceChunk(
            payload=SourcePayload(
                id="d", source_type="document", mime_type="text/plain", title="Doc"
            )
        ),
        [
            {
                "type": "source-document",
                "sourceId": "d",
                "mediaType": "text/plain",
                "title": "Doc",
            }
        ],
    ),
    (
        FileChunk(payload=FilePayload(data="aGk=", mime_type="text/plain")),
        [
            {
                "type": "file",
                "url": "data:text/plain;base64,aGk=",
                "mediaType": "text/plain",
            }
        ],
    ),
    (
        ToolErrorChunk(
            payload=ToolErrorPayload(
                tool_call_id="c", tool_name="t", error=ValueError("bad city")
            )
        ),
        [{"type": "tool-output-error", "toolCallId": "c", "errorText": "bad city"}],
    ),
    (
        ToolResultChunk(
            payload=ToolResultPayload(
                tool_call_id="c", tool_name="t", result="boom", is_error=True
            )
        ),
        [{"type": "tool-output-error", "toolCallId": "c", "errorText": "boom"}],
    ),
    (
        ToolResultChunk(
            payload=ToolResultPayload(tool_call_id="c", tool_name="t", result=None)
        ),
        [{"type": "tool-output-available", "toolCallId": "c", "output": None}],
    ),
    (
        DataChunk(type="data-progress", data={"pct": 5}, transient=True),
        [{"type": "data-progress", "data": {"pct": 5}, "transient": True}],
    ),
    (AbortChunk(), [{"type": "abort"}]),
    (from_wire({"type": "raw", "payload": {"x": 1}}), []),
    (from_wire({"type": "response-metadata", "payload": {"id": "r1"}}), []),
]


@pytest.mark.parametrize(
    ("chunk", "expected"), CHUNKS, ids=lambda v: getattr(v, "type", "")
)
def test_each_mastra_chunk_maps_to_schema_chunks(
    chunk: Chunk, expected: list[dict[str, Any]]
) -> None:
    got = ui_chunks(chunk)
    assert got == expected
    for item in got:
        check_schema(item)


def test_a_finish_reason_the_schema_lacks_reads_as_other() -> None:
    finish = from_wire(
        {"type": "finish", "payload": {"stepResult": {"reason": "unknown"}}}
    )
    assert ui_chunks(finish) == [{"type": "finish", "finishReason": "other"}]
