"""A span per request (OpenTelemetry, when the ``otel`` extra is installed
and a recording provider is configured), and the run started as its child.

As in ``procession.telemetry``, the request span is never left current: it
is made current only around the call that starts a run (``agent.stream()``
and entering it, where the run reads the caller's context), in the
request's own task, and detached before anything else runs.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, TypeVar

from ..telemetry import tracer_for

__all__ = ["RequestSpan", "enter_run", "request_span", "under"]

_HAVE_OTEL: bool
try:  # the API is optional: procession[otel]
    from opentelemetry import context as _otel_context
    from opentelemetry import trace as _otel_trace

    _HAVE_OTEL = True
except ImportError:  # the core install
    _HAVE_OTEL = False

_SCOPE: Final = "procession.server"
T = TypeVar("T")


class RequestSpan:
    """One request's span (``None`` inside when nothing records): the route
    template, the method and, at the end, the status code."""

    def __init__(self, span: Any, method: str = "") -> None:
        self.span = span
        self.method = method
        self.status = 0
        self.route: str | None = None
        """The matched route's template, once routed."""
        self.run_id: str | None = None
        """The id of the run the request started or named, for the access
        log."""

    def set_route(self, route: str) -> None:
        self.route = route
        if self.span is not None:
            self.span.update_name(f"{self.method} {route}")
            self.span.set_attribute("http.route", route)

    def run_context(self) -> Any:
        """The context a run started now should have as its parent."""
        if self.span is None:
            return None
        return _otel_trace.set_span_in_context(self.span)

    def __enter__(self) -> RequestSpan:
        return self

    def __exit__(self, _type: Any, error: BaseException | None, _tb: Any) -> None:
        self.end(error)

    def end(self, error: BaseException | None = None) -> None:
        span = self.span
        if span is None:
            return
        if self.status:
            span.set_attribute("http.response.status_code", self.status)
        if error is not None or self.status >= 500:
            span.set_status(_otel_trace.Status(_otel_trace.StatusCode.ERROR))
            if error is not None:
                span.set_attribute("error.type", type(error).__name__)
        span.end()


def request_span(scope: Any, tracer_provider: Any = None) -> RequestSpan:
    """A SERVER span for the request, or a ``RequestSpan`` holding nothing
    when tracing is off: ``with request_span(...) as span:``, ended at the
    block's exit (an error if the block raised). A plain object, not a
    generator: no checkpoint, nothing per request beyond the span."""
    tracer = tracer_for(tracer_provider, _SCOPE)
    if tracer is None:
        return RequestSpan(None)
    method = scope.get("method", "")
    span = tracer.start_span(
        method,
        context=_otel_context.get_current(),
        kind=_otel_trace.SpanKind.SERVER,
        attributes={
            "http.request.method": method,
            "url.path": scope.get("path", ""),
            "url.scheme": scope.get("scheme", "http"),
        },
    )
    holder = RequestSpan(span if span.is_recording() else None, method)
    if holder.span is None:
        span.end()
    return holder


def under(parent: Any, start: Callable[[], T]) -> T:
    """``start()`` with ``parent`` (a context, or None: as it is) current."""
    if parent is None:
        return start()
    token = _otel_context.attach(parent)
    try:
        return start()
    finally:
        _otel_context.detach(token)


def enter_run(
    parent: Any, run: AbstractAsyncContextManager[T]
) -> AbstractAsyncContextManager[T]:
    """``run``, entered with ``parent`` current (where the run reads the
    caller's context); the context is detached again before the block runs.
    With no parent, ``run`` itself. Checkpoints as entering and leaving
    ``run`` do."""
    return run if parent is None else _EnteredUnder(parent, run)


class _EnteredUnder(AbstractAsyncContextManager[T]):
    """``run`` whose ``__aenter__`` runs with ``parent`` attached."""

    __slots__ = ("_parent", "_run")

    def __init__(self, parent: Any, run: AbstractAsyncContextManager[T]) -> None:
        self._parent = parent
        self._run = run

    async def __aenter__(self) -> T:
        token = _otel_context.attach(self._parent)
        try:
            return await self._run.__aenter__()
        finally:
            _otel_context.detach(token)

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._run.__aexit__(*exc_info)
