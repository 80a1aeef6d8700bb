"""Each request is a SERVER span when a recording provider exists; the run's
``invoke_agent`` span is its child, and no span is left current."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from procession.server import create_app
from procession.testing import ScriptedModel, text_turn
from tests.server.server_helpers import make_agent, request


@pytest.fixture
def spans() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/api/agents/helper/stream", "/api/agents/{agentId}/stream"),
        ("/api/agents/helper/generate", "/api/agents/{agentId}/generate"),
        ("/api/chat", "/api/chat"),
    ],
)
async def test_the_run_span_is_a_child_of_the_request_span(
    spans: tuple[TracerProvider, InMemorySpanExporter], path: str, route: str
) -> None:
    provider, exporter = spans
    model = ScriptedModel([text_turn("Hello.")])
    agent = make_agent(model, tracer_provider=provider)
    app = create_app([agent], tracer_provider=provider, resume=path.endswith("chat"))
    answer = await request(app, "POST", path, json_body={"messages": "Hi"})
    assert answer.status == 200
    if path != "/api/agents/helper/generate":
        assert answer.body.endswith(b"data: [DONE]\n\n")
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing left current
    finished = {s.name: s for s in exporter.get_finished_spans()}
    server = finished[f"POST {route}"]
    run = finished["invoke_agent helper"]
    assert server.kind is trace.SpanKind.SERVER
    assert server.attributes is not None
    assert server.attributes["http.route"] == route
    assert server.attributes["http.response.status_code"] == 200
    assert run.parent is not None
    assert run.parent.span_id == server.context.span_id
    assert run.context.trace_id == server.context.trace_id


async def test_a_refused_request_is_a_span_with_its_status(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    app = create_app(
        [make_agent(ScriptedModel([]))], tracer_provider=provider, tokens=["t"]
    )
    answer = await request(app, "GET", "/api/agents")
    assert answer.status == 401
    (span,) = exporter.get_finished_spans()
    assert span.name == "GET /api/agents"
    assert span.attributes is not None
    assert span.attributes["http.response.status_code"] == 401


async def test_no_span_without_a_recording_provider() -> None:
    # The global provider is the API's no-op one here: nothing recorded, and
    # the run still works.
    app = create_app([make_agent(ScriptedModel([text_turn("Hello.")]))])
    answer = await request(
        app, "POST", "/api/agents/helper/generate", json_body={"messages": "Hi"}
    )
    assert answer.json()["text"] == "Hello."
