"""Traces and metrics of one run, on the OpenTelemetry API (extra ``otel``).

``start_run`` returns a ``RunTelemetry``: the run's ``invoke_agent`` span and
what hangs under it (``chat`` per model call, ``execute_tool`` per tool call,
one span per processor per hook call, one per output processor per step).
Every span is started with an explicit parent context and ended explicitly: a
span is never made "current" (contextvars are copied into trio tasks at spawn,
and a span held current across an async generator's ``yield`` leaks into the
caller), so concurrent runs never mix their trees.

Off costs nothing per chunk: without ``opentelemetry-api``, or with its no-op
provider (no SDK configured), ``start_run`` returns ``DISABLED`` whose methods
do nothing and whose ``active`` is False; the runtime then installs no
per-chunk counting at all.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any, Final

from .._secrets import redact
from .._version import version
from . import _conventions as c

__all__ = ["DISABLED", "RunTelemetry", "start_run", "tracer_for"]

_HAVE_OTEL: bool
try:  # the API is optional: procession[otel]
    from opentelemetry import context as _otel_context
    from opentelemetry import metrics as _otel_metrics
    from opentelemetry import trace as _otel_trace

    _HAVE_OTEL = True
except ImportError:  # the core install
    _HAVE_OTEL = False

_SCOPE: Final = "procession"


def tracer_for(tracer_provider: Any, scope: str) -> Any | None:
    """``scope``'s tracer from ``tracer_provider`` (None: the global one), or
    None when nothing could record: the API is absent, or the provider is
    the API's no-op one or its proxy while no SDK is configured (the proxy
    then makes only non-recording spans). A run or request asks once and,
    on None, builds no span or attributes at all."""
    if not _HAVE_OTEL:
        return None
    configured = _otel_trace.get_tracer_provider()  # the proxy while none is
    provider = tracer_provider or configured
    # Exact types: isinstance against the API's abstract provider class takes
    # the slow ABC path on every call. A subclass just makes a span that
    # does not record, as before.
    kind = type(provider)
    if kind is _otel_trace.NoOpTracerProvider:
        return None
    if (
        kind is _otel_trace.ProxyTracerProvider
        # A proxy given explicitly delegates to the global provider once set.
        and type(configured) is _otel_trace.ProxyTracerProvider
    ):
        return None
    return provider.get_tracer(scope, version())


def _usage_attributes(usage: Any) -> dict[str, int]:
    if usage is None:
        return {}
    pairs = (
        (c.GEN_AI_USAGE_INPUT_TOKENS, usage.input_tokens),
        (c.GEN_AI_USAGE_OUTPUT_TOKENS, usage.output_tokens),
        (c.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, usage.cached_input_tokens),
        (c.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, usage.cache_creation_input_tokens),
        (c.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, usage.reasoning_tokens),
    )
    return {key: value for key, value in pairs if isinstance(value, int)}


def _jsonable(value: Any) -> str:
    try:
        return json.dumps(value, default=str)[:4096]
    except (TypeError, ValueError):
        return repr(value)[:4096]


class _Instruments:
    """The metric instruments of one meter provider (made once, then shared)."""

    def __init__(self, meter: Any) -> None:
        self.runs = meter.create_counter(
            c.METRIC_RUNS, unit="{run}", description="Runs, by outcome"
        )
        self.tripwires = meter.create_counter(
            c.METRIC_TRIPWIRES, unit="{tripwire}", description="Tripwires, by processor"
        )
        self.retries = meter.create_counter(
            c.METRIC_RETRIES, unit="{retry}", description="Retries, by cause"
        )
        self.chunks = meter.create_counter(
            c.METRIC_CHUNKS, unit="{chunk}", description="Chunks delivered to clients"
        )
        self.first_chunk = meter.create_histogram(
            c.METRIC_TIME_TO_FIRST_CHUNK,
            unit="s",
            description="Time from the call to the first content chunk delivered",
            explicit_bucket_boundaries_advisory=list(c.DURATION_BUCKETS),
        )
        self.duration = meter.create_histogram(
            c.METRIC_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration (model calls)",
            explicit_bucket_boundaries_advisory=list(c.DURATION_BUCKETS),
        )
        self.tokens = meter.create_histogram(
            c.METRIC_TOKEN_USAGE,
            unit="{token}",
            description="Tokens per model call, by type",
            explicit_bucket_boundaries_advisory=list(c.TOKEN_BUCKETS),
        )


_INSTRUMENTS: dict[int, _Instruments] = {}


def _instruments(meter_provider: Any) -> _Instruments | None:
    if not _HAVE_OTEL:
        return None
    provider = meter_provider or _otel_metrics.get_meter_provider()
    found = _INSTRUMENTS.get(id(provider))
    if found is None:
        found = _Instruments(provider.get_meter(_SCOPE, version()))
        _INSTRUMENTS[id(provider)] = found
    return found


class RunTelemetry:
    """One run's spans and metrics; see the module docstring. Methods take and
    return opaque span objects (``None`` when disabled)."""

    active = True

    def __init__(
        self,
        tracer: Any,
        run_span: Any,
        parent: Any,
        instruments: _Instruments | None,
        agent_id: str,
    ) -> None:
        self._tracer = tracer
        self._run = run_span
        self._context = _otel_trace.set_span_in_context(run_span, parent)
        self._metrics = instruments
        self._agent_id = agent_id
        self._started = time.perf_counter()
        self._first_chunk = False
        self._tripwires: set[tuple[str, str]] = set()
        self.capture_content = os.environ.get(c.CAPTURE_CONTENT_ENV, "").lower() in (
            "1",
            "true",
        )

    # --- spans -----------------------------------------------------------------

    def span(
        self, name: str, attributes: Mapping[str, Any], *, client: bool = False
    ) -> Any:
        kind = _otel_trace.SpanKind.CLIENT if client else _otel_trace.SpanKind.INTERNAL
        return self._tracer.start_span(
            name, context=self._context, kind=kind, attributes=dict(attributes)
        )

    def hook_started(
        self, processor_id: str, index: int, hook: str, on_error: str, messages: int
    ) -> Any:
        return self.span(
            f"{hook} {processor_id}",
            {
                c.PROCESSOR_ID: processor_id,
                c.PROCESSOR_INDEX: index,
                c.HOOK: hook,
                c.ON_ERROR: on_error,
                c.MESSAGES_BEFORE: messages,
            },
        )

    def hook_ended(
        self,
        span: Any,
        *,
        messages: int | None = None,
        error: BaseException | None = None,
        tripwire: Any = None,
        outcome: str | None = None,
    ) -> None:
        if messages is not None:
            span.set_attribute(c.MESSAGES_AFTER, messages)
        if outcome is not None:
            span.set_attribute(c.ON_ERROR_OUTCOME, outcome)
        if tripwire is not None:
            self.tripwire(tripwire, span)
        if error is not None:
            self._failed(span, error)
        span.end()

    def model_started(
        self, step: int, provider: str, model_id: str, prompt: Any
    ) -> Any:
        attributes: dict[str, Any] = {
            c.GEN_AI_OPERATION_NAME: c.OP_CHAT,
            c.GEN_AI_PROVIDER_NAME: provider,
            c.GEN_AI_REQUEST_MODEL: model_id,
            c.STEP: step,
        }
        if self.capture_content:
            attributes[c.GEN_AI_INPUT_MESSAGES] = _jsonable(
                [getattr(m, "role", "?") for m in prompt]
            )
        return self.span(f"chat {model_id}", attributes, client=True)

    def model_ended(
        self,
        span: Any,
        *,
        model_id: str,
        provider: str,
        finish_reason: str | None = None,
        usage: Any = None,
        error: BaseException | None = None,
        from_cache: bool = False,
    ) -> None:
        span.set_attribute(c.GEN_AI_RESPONSE_MODEL, model_id)
        if from_cache:
            span.set_attribute(c.FROM_CACHE, True)
        if finish_reason is not None:
            span.set_attribute(c.GEN_AI_RESPONSE_FINISH_REASONS, [finish_reason])
        usage_attributes = _usage_attributes(usage)
        for key, value in usage_attributes.items():
            span.set_attribute(key, value)
        if error is not None:
            self.provider_error(error, span)
            self._failed(span, error)
        span.end()
        metrics = self._metrics
        if metrics is not None:
            labels = {
                c.GEN_AI_OPERATION_NAME: c.OP_CHAT,
                c.GEN_AI_PROVIDER_NAME: provider,
                c.GEN_AI_REQUEST_MODEL: model_id,
            }
            start = getattr(span, "start_time", None)
            end = getattr(span, "end_time", None)
            if isinstance(start, int) and isinstance(end, int):
                metrics.duration.record((end - start) / 1e9, labels)
            for key, kind in (
                (c.GEN_AI_USAGE_INPUT_TOKENS, "input"),
                (c.GEN_AI_USAGE_OUTPUT_TOKENS, "output"),
            ):
                if key in usage_attributes:
                    metrics.tokens.record(
                        usage_attributes[key], {**labels, c.GEN_AI_TOKEN_TYPE: kind}
                    )

    def tool_started(self, tool_name: str, tool_call_id: str) -> Any:
        return self.span(
            f"execute_tool {tool_name}",
            {
                c.GEN_AI_OPERATION_NAME: c.OP_EXECUTE_TOOL,
                c.GEN_AI_TOOL_NAME: tool_name,
                c.GEN_AI_TOOL_CALL_ID: tool_call_id,
            },
        )

    def tool_ended(self, span: Any, error: BaseException | None = None) -> None:
        if error is not None:
            self._failed(span, error)
        span.end()

    # --- events ----------------------------------------------------------------

    def tripwire(self, tripwire: Any, span: Any = None) -> None:
        """A tripwire: an event on the processor's span (if given) and the run's."""
        attributes: dict[str, Any] = {
            c.TRIPWIRE_REASON: str(getattr(tripwire, "reason", tripwire)),
            c.TRIPWIRE_RETRY: bool(getattr(tripwire, "retry", False)),
            c.PROCESSOR_ID: getattr(tripwire, "processor_id", None) or "",
        }
        metadata = getattr(tripwire, "metadata", None)
        if metadata is not None and self.capture_content:
            attributes[c.TRIPWIRE_METADATA] = _jsonable(metadata)
        if span is not None:
            span.add_event(c.EVENT_TRIPWIRE, attributes)
        key = (attributes[c.TRIPWIRE_REASON], attributes[c.PROCESSOR_ID])
        if key in self._tripwires:
            return  # already on the run's span (and counted)
        self._tripwires.add(key)
        self._run.add_event(c.EVENT_TRIPWIRE, attributes)
        if self._metrics is not None:
            self._metrics.tripwires.add(1, {c.PROCESSOR_ID: attributes[c.PROCESSOR_ID]})

    def retry(
        self, cause: str, budget_left: int | None, processor_id: str | None
    ) -> None:
        """A retry was granted: ``cause`` is ``processor`` or ``api-error``,
        ``processor_id`` who asked for it."""
        attributes: dict[str, Any] = {
            c.RETRY_CAUSE: cause,
            c.PROCESSOR_ID: processor_id or "",
        }
        if budget_left is not None:
            attributes[c.RETRY_BUDGET_LEFT] = budget_left
        self._run.add_event(c.EVENT_RETRY, attributes)
        if self._metrics is not None:
            self._metrics.retries.add(
                1, {c.RETRY_CAUSE: cause, c.PROCESSOR_ID: processor_id or ""}
            )

    def provider_error(self, error: BaseException, span: Any = None) -> None:
        attributes: dict[str, Any] = {c.ERROR_TYPE: type(error).__name__}
        status = getattr(error, "status_code", None)
        if isinstance(status, int):
            attributes[c.HTTP_STATUS] = status
        retryable = getattr(error, "is_retryable", None)
        if isinstance(retryable, bool):
            attributes[c.RETRYABLE] = retryable
        (span or self._run).add_event(c.EVENT_PROVIDER_ERROR, attributes)

    def violation(self, processor_id: str, message: str, blocking: bool) -> None:
        """A violation a processor reported (``on_violation``'s argument)."""
        self._run.add_event(
            c.EVENT_VIOLATION,
            {c.PROCESSOR_ID: processor_id, "message": message, "blocking": blocking},
        )

    def delivered_first_chunk(self) -> None:
        if self._first_chunk:
            return
        self._first_chunk = True
        if self._metrics is not None:
            self._metrics.first_chunk.record(
                time.perf_counter() - self._started, {c.GEN_AI_AGENT_ID: self._agent_id}
            )

    # --- the end ----------------------------------------------------------------

    def end(self, outcome: Any, usage: Any, retry_count: int, chunks: int) -> None:
        """The run ended with ``outcome`` (a ``RunOutcome``)."""
        span = self._run
        span.set_attribute(c.OUTCOME, outcome.kind)
        span.set_attribute(c.FINISH_REASON, outcome.finish_reason)
        span.set_attribute(c.RETRY_COUNT, retry_count)
        span.set_attribute(c.CHUNKS_DELIVERED, chunks)
        for key, value in _usage_attributes(usage).items():
            span.set_attribute(key, value)
        if outcome.kind == "error" and outcome.error is not None:
            self._failed(span, outcome.error)
        span.end()
        if self._metrics is not None:
            labels = {c.GEN_AI_AGENT_ID: self._agent_id, c.OUTCOME: outcome.kind}
            self._metrics.runs.add(1, labels)
            self._metrics.chunks.add(chunks, {c.GEN_AI_AGENT_ID: self._agent_id})

    def _failed(self, span: Any, error: BaseException) -> None:
        span.set_attribute(c.ERROR_TYPE, type(error).__name__)
        span.set_status(
            _otel_trace.Status(_otel_trace.StatusCode.ERROR, redact(str(error))[:512])
        )


class _Disabled:
    """Telemetry off: every method does nothing; ``active`` is False."""

    active = False
    capture_content = False

    def __getattr__(self, name: str) -> Any:
        return _nothing


def _nothing(*_args: Any, **_kwargs: Any) -> None:
    return None


DISABLED: Final[Any] = _Disabled()


def start_run(
    *,
    agent_id: str,
    agent_name: str,
    run_id: str,
    thread_id: str | None,
    tracer_provider: Any = None,
    meter_provider: Any = None,
) -> Any:
    """The run's telemetry: its ``invoke_agent`` span started under the caller's
    current context (read here, in the caller's task), or ``DISABLED`` when the
    API is absent or its provider records nothing."""
    tracer = tracer_for(tracer_provider, _SCOPE)
    if tracer is None:
        return DISABLED
    parent = _otel_context.get_current()
    attributes: dict[str, Any] = {
        c.GEN_AI_OPERATION_NAME: c.OP_INVOKE_AGENT,
        c.GEN_AI_AGENT_ID: agent_id,
        c.GEN_AI_AGENT_NAME: agent_name,
        c.RUN_ID: run_id,
    }
    if thread_id:
        attributes[c.GEN_AI_CONVERSATION_ID] = thread_id
    span = tracer.start_span(
        f"invoke_agent {agent_name}",
        context=parent,
        kind=_otel_trace.SpanKind.INTERNAL,
        attributes=attributes,
    )
    if not span.is_recording():
        span.end()
        return DISABLED
    return RunTelemetry(tracer, span, parent, _instruments(meter_provider), agent_id)
