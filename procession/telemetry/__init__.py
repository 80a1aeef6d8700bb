"""OpenTelemetry traces and metrics for runs, steps, hooks and tools.

Install the extra (``pip install "procession[otel]"``: ``opentelemetry-api``)
and configure any SDK: spans go to the global tracer provider, or to the one
given as ``Agent(tracer_provider=...)``; metrics likewise
(``Agent(meter_provider=...)``). With no SDK configured nothing is recorded
and nothing is done per chunk. The names are in ``procession.telemetry.names``
(the GenAI conventions' and procession's own); message content is recorded only
when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.
"""

from .._faces import fixup_module_metadata as _fixup_module_metadata
from . import _conventions as names
from ._tracing import DISABLED as DISABLED
from ._tracing import RunTelemetry as RunTelemetry
from ._tracing import start_run as start_run
from ._tracing import tracer_for as tracer_for
from ._tree import span_tree as span_tree

__all__ = ["DISABLED", "RunTelemetry", "names", "span_tree", "start_run", "tracer_for"]

_fixup_module_metadata(__name__, globals())
