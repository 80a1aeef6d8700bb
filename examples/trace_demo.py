"""The demo's two conversations, traced: prints each run's span tree.

    pip install -e ".[otel]" opentelemetry-sdk
    python examples/trace_demo.py

To send the same spans to any OTLP collector instead, install
``opentelemetry-exporter-otlp`` and replace the in-memory exporter below with
``BatchSpanProcessor(OTLPSpanExporter())`` (it reads
``OTEL_EXPORTER_OTLP_ENDPOINT``, e.g. ``http://localhost:4318``).
"""

from __future__ import annotations

import io

import trio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from procession._demo import run_demo
from procession.telemetry import span_tree


async def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    from opentelemetry import trace

    trace.set_tracer_provider(provider)  # the global provider: no procession switch
    await run_demo(io.StringIO(), colour="never")
    spans = exporter.get_finished_spans()
    roots = [s for s in spans if s.parent is None]
    for number, root in enumerate(roots, 1):
        tree = [s for s in spans if s.context.trace_id == root.context.trace_id]
        print(f"conversation {number}:")
        print(span_tree(tree))
        print()


if __name__ == "__main__":
    trio.run(main)
