"""A span per request (OpenTelemetry, when the ``otel`` extra is installed
and a recording provider is configured), and the run started as its child.

As in ``procession.telemetry``, the request span is never left current: it
is made current only around the call that starts a run (``agent.stream()``
and entering it, where the run reads the caller's context), in the
request's own task, and detached before anything else runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final, TypeVar

from .._version import version

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


@asynccontextmanager
async def request_span(
    scope: Any, tracer_provider: Any = None
) -> AsyncIterator[RequestSpan]:
    """A SERVER span for the request for the block (ended at its exit), or a
    ``RequestSpan`` holding nothing when tracing is off. No checkpoint of its
    own."""
    if not _HAVE_OTEL:
        yield RequestSpan(None)
        return
    provider = tracer_provider or _otel_trace.get_tracer_provider()
    tracer = provider.get_tracer(_SCOPE, version())
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
    try:
        yield holder
    except BaseException as exc:
        holder.end(exc)
        raise
    else:
        holder.end()


def under(parent: Any, start: Callable[[], T]) -> T:
    """``start()`` with ``parent`` (a context, or None: as it is) current."""
    if parent is None:
        return start()
    token = _otel_context.attach(parent)
    try:
        return start()
    finally:
        _otel_context.detach(token)


@asynccontextmanager
async def enter_run(
    parent: Any, run: AbstractAsyncContextManager[T]
) -> AsyncIterator[T]:
    """``async with run`` whose entry (where the run reads the caller's
    context) has ``parent`` current; the context is detached again before
    the block runs. Checkpoints as entering and leaving ``run`` do."""
    if parent is None:
        async with run as value:
            yield value
        return
    token = _otel_context.attach(parent)
    try:
        value = await run.__aenter__()
    finally:
        _otel_context.detach(token)
    try:
        yield value
    except BaseException as exc:
        if not await run.__aexit__(type(exc), exc, exc.__traceback__):
            raise
    else:
        await run.__aexit__(None, None, None)
