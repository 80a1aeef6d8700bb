"""Issue 15: the span tree of runs, read with the OpenTelemetry SDK's in-memory
exporter: names, parents, attributes and events; concurrent runs never mix;
no recording provider means no per-chunk work."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import trio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from procession import Agent, Processor, ProviderError, tool
from procession.chunks import TextDeltaChunk
from procession.processors import StreamErrorRetryProcessor
from procession.telemetry import names
from procession.testing import ScriptedModel, text_turn, tool_call_turn


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.clear()


def provider_for(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@attrs.frozen
class City:
    city: str


@tool(description="weather")
def weather(args: City) -> str:
    return f"sunny in {args.city}"


class RejectFirst(Processor):
    """Asks for one retry on the first answer's step."""

    id = "reject-first"

    def process_output_step(self, args: Any) -> None:
        if args.text and not args.state.get("rejected"):
            args.state["rejected"] = True
            args.abort("too short", retry=True)


class Guard(Processor):
    """Trips on the word "secret" in the stream."""

    id = "guard"

    def process_output_stream(self, args: Any) -> Any:
        part = args.part
        if isinstance(part, TextDeltaChunk) and "secret" in part.payload.text:
            args.abort("leak")
        return part


def tree(spans: tuple[ReadableSpan, ...]) -> dict[str, list[str]]:
    """Each span's name -> its children's names (in start order)."""
    by_id = {s.context.span_id: s for s in spans}
    out: dict[str, list[str]] = {s.name: [] for s in spans}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        if span.parent is not None and span.parent.span_id in by_id:
            out[by_id[span.parent.span_id].name].append(span.name)
    return out


def only(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    [span] = [s for s in spans if s.name == name]
    return span


async def test_a_run_with_a_tool_a_retry_and_a_provider_error_is_one_tree(
    exporter: InMemorySpanExporter,
) -> None:
    model = ScriptedModel(
        [
            tool_call_turn("weather", {"city": "Oslo"}),
            ProviderError("overloaded", status_code=529, is_retryable=True),
            text_turn("first answer"),
            text_turn("second answer"),
        ]
    )
    agent = Agent(
        id="support",
        model=model,
        tools=[weather],
        output_processors=[RejectFirst()],
        error_processors=[StreamErrorRetryProcessor(delay_ms=0)],
        tracer_provider=provider_for(exporter),
    )
    result = await agent.generate("weather?", thread_id="t-1")
    assert result.text == "second answer"
    spans = exporter.get_finished_spans()
    run = only(spans, "invoke_agent support")
    assert run.parent is None
    assert run.attributes is not None
    assert run.attributes[names.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert run.attributes[names.GEN_AI_CONVERSATION_ID] == "t-1"
    assert run.attributes[names.OUTCOME] == "finish"
    assert run.attributes[names.RETRY_COUNT] == 2
    children = tree(spans)["invoke_agent support"]
    assert children.count("chat scripted-model") == 4
    assert "execute_tool weather" in children
    assert children.count("process_output_step reject-first") == 3
    assert "process_api_error stream-error-retry-processor" in children
    failed_chat = [
        s
        for s in spans
        if s.name == "chat scripted-model"
        and s.attributes
        and names.ERROR_TYPE in s.attributes
    ]
    assert len(failed_chat) == 1
    [event] = [e for e in failed_chat[0].events if e.name == names.EVENT_PROVIDER_ERROR]
    assert event.attributes is not None
    assert event.attributes[names.HTTP_STATUS] == 529
    assert event.attributes[names.RETRYABLE] is True
    retries = [e for e in run.events if e.name == names.EVENT_RETRY]
    assert [e.attributes[names.RETRY_CAUSE] for e in retries if e.attributes] == [
        "api-error",
        "processor",
    ]
    tool_span = only(spans, "execute_tool weather")
    assert tool_span.attributes is not None
    assert tool_span.attributes[names.GEN_AI_TOOL_NAME] == "weather"


async def test_a_stream_tripwire_is_an_event_on_the_processors_step_span(
    exporter: InMemorySpanExporter,
) -> None:
    agent = Agent(
        id="a",
        model=ScriptedModel([text_turn("one two secret three")]),
        output_processors=[Guard()],
        tracer_provider=provider_for(exporter),
    )
    result = await agent.generate("hi")
    assert result.tripwire is not None
    spans = exporter.get_finished_spans()
    stream = only(spans, "process_output_stream guard")
    assert stream.attributes is not None
    # One span for the whole step, never one per chunk.
    seen = stream.attributes[names.CHUNKS_IN]
    assert isinstance(seen, int)
    assert seen >= 5
    assert stream.attributes[names.PROCESSOR_INDEX] == 0
    assert [e.name for e in stream.events] == [names.EVENT_TRIPWIRE]
    run = only(spans, "invoke_agent a")
    tripwires = [e for e in run.events if e.name == names.EVENT_TRIPWIRE]
    assert len(tripwires) == 1
    assert tripwires[0].attributes is not None
    assert tripwires[0].attributes[names.PROCESSOR_ID] == "guard"
    assert run.attributes is not None
    assert run.attributes[names.OUTCOME] == "tripwire"


async def test_one_hundred_concurrent_runs_make_one_hundred_trees(
    exporter: InMemorySpanExporter,
) -> None:
    provider = provider_for(exporter)

    async def one(index: int) -> None:
        agent = Agent(
            id=f"agent-{index}",
            model=ScriptedModel([text_turn(f"answer {index}")]),
            output_processors=[Guard()],
            tracer_provider=provider,
        )
        await agent.generate("hi")

    async with trio.open_nursery() as nursery:
        for index in range(100):
            nursery.start_soon(one, index)
    spans = exporter.get_finished_spans()
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 100
    trace_of_root = {s.context.trace_id: s.name for s in roots}
    assert len(trace_of_root) == 100
    for span in spans:
        root_name = trace_of_root[span.context.trace_id]
        number = root_name.rsplit("-", 1)[1]
        if span.name.startswith("chat"):
            continue
        assert span.name.endswith(("guard", f"agent-{number}"))


async def test_metrics_count_runs_by_outcome_and_tripwires_by_processor(
    exporter: InMemorySpanExporter,
) -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    agent = Agent(
        id="a",
        model=ScriptedModel([text_turn("fine"), text_turn("a secret")]),
        output_processors=[Guard()],
        tracer_provider=provider_for(exporter),
        meter_provider=meters,
    )
    await agent.generate("hi")
    await agent.generate("hi")
    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points[metric.name] = list(metric.data.data_points)
    runs = {p.attributes[names.OUTCOME]: p.value for p in points[names.METRIC_RUNS]}
    assert runs == {"finish": 1, "tripwire": 1}
    [tripwires] = points[names.METRIC_TRIPWIRES]
    assert tripwires.attributes[names.PROCESSOR_ID] == "guard"
    assert tripwires.value == 1
    assert names.METRIC_TIME_TO_FIRST_CHUNK in points
    assert names.METRIC_OPERATION_DURATION in points


async def test_without_a_recording_provider_nothing_is_wrapped() -> None:
    # The API's no-op provider (no SDK configured): the run records nothing,
    # its client end does not count chunks and no stream hook is wrapped.
    from opentelemetry.trace import NoOpTracerProvider

    from procession.runtime import AgentStream
    from procession.telemetry import DISABLED

    guard = Guard()
    agent = Agent(
        id="a",
        model=ScriptedModel(["x"]),
        output_processors=[guard],
        tracer_provider=NoOpTracerProvider(),
    )
    async with agent.stream("hi") as stream:
        assert type(stream) is AgentStream
        state = stream._state
        assert state.telemetry is DISABLED
        async for _chunk in stream:
            pass
    assert state.traced_streams == []


async def test_span_tree_draws_the_run_with_its_children_and_events(
    exporter: InMemorySpanExporter,
) -> None:
    from procession.telemetry import span_tree

    agent = Agent(
        id="a",
        model=ScriptedModel([text_turn("one secret")]),
        output_processors=[Guard()],
        tracer_provider=provider_for(exporter),
    )
    await agent.generate("hi")
    drawn = span_tree(exporter.get_finished_spans()).splitlines()
    assert drawn[0].startswith("invoke_agent a  [outcome=tripwire")
    assert "⚑ tripwire (leak)" in drawn[0]
    assert drawn[1].startswith("├─ process_output_stream guard  [in=")
    assert drawn[1].endswith("⚑ tripwire (leak)")
    assert drawn[-1].startswith("└─ chat scripted-model")


async def test_a_warned_violation_is_an_event_and_still_reaches_on_violation(
    exporter: InMemorySpanExporter,
) -> None:
    heard: list[str] = []

    class Warns(Processor):
        id = "warns"

        def process_output_stream(self, args: Any) -> Any:
            if isinstance(args.part, TextDeltaChunk):
                args.report_violation("rude word", detail={"word": "x"})
            return args.part

        def on_violation(self, violation: Any) -> None:
            heard.append(violation.message)

    agent = Agent(
        id="a",
        model=ScriptedModel(["hello"]),
        output_processors=[Warns()],
        tracer_provider=provider_for(exporter),
    )
    result = await agent.generate("hi")
    assert result.tripwire is None
    assert heard == ["rude word"]
    run = only(exporter.get_finished_spans(), "invoke_agent a")
    [event] = [e for e in run.events if e.name == names.EVENT_VIOLATION]
    assert event.attributes is not None
    assert event.attributes[names.PROCESSOR_ID] == "warns"
    assert event.attributes["blocking"] is False


def test_tracer_for_builds_no_span_where_nothing_could_record() -> None:
    # No SDK configured in this process (no test sets the global provider):
    # the global provider is the API's proxy, which makes only non-recording
    # spans; a run or request then asks for no tracer at all.
    from opentelemetry import trace
    from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider

    from procession.telemetry import tracer_for

    assert isinstance(trace.get_tracer_provider(), ProxyTracerProvider)
    assert tracer_for(None, "procession") is None
    assert tracer_for(NoOpTracerProvider(), "procession") is None
    assert tracer_for(ProxyTracerProvider(), "procession") is None
    recording = TracerProvider()
    tracer = tracer_for(recording, "procession")
    assert tracer is not None
    span = tracer.start_span("s")
    assert span.is_recording()
    span.end()
