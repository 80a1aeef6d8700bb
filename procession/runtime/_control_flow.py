"""The runtime's control-flow exceptions: an attempt is retried (``Retry``) or
the run ends (``EndOfRun``), raised where that is decided and caught by the
coordinator's step loop.

"The run ends" has one name across the package: a run *ends* with an
*outcome* (``RunOutcome``, ``PipelineOutcome``); ``EndRun`` is the marker that
ends it from a driver's source, ``EndOfRun`` the exception that ends it from
the runtime's own code (named as trio's ``EndOfChannel``). "Terminal" is kept
for the stream's last chunk only (``on_terminal``: the terminal chunk is
delivered).
"""

from __future__ import annotations

from .._errors import TripWire

__all__ = ["EndOfRun", "Retry"]


class Retry(Exception):
    """Internal: the current attempt is rejected; retry it. ``feedback`` says
    whether the model is told why (a processor rejected its answer) or not (the
    API call failed: there was no answer to reject)."""

    def __init__(self, tripwire: TripWire, *, feedback: bool = True) -> None:
        self.tripwire = tripwire
        self.feedback = feedback


class EndOfRun(Exception):
    """Internal: the run ends here (a tripwire, or an error); the coordinator
    catches it and ends the run with that outcome."""

    def __init__(
        self, *, tripwire: TripWire | None = None, error: BaseException | None = None
    ) -> None:
        self.tripwire = tripwire
        self.error = error
