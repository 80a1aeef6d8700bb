"""The runtime's control-flow exceptions: an attempt is retried (``Retry``) or
the run ends (``Terminal``), raised where that is decided and caught by the
coordinator's step loop.
"""

from __future__ import annotations

from ..processors import TripWire

__all__ = ["Terminal", "Retry"]


class Retry(Exception):
    """Internal: the current attempt is rejected; retry it. ``feedback`` says
    whether the model is told why (a processor rejected its answer) or not (the
    API call failed: there was no answer to reject)."""

    def __init__(self, tripwire: TripWire, *, feedback: bool = True) -> None:
        self.tripwire = tripwire
        self.feedback = feedback


class Terminal(Exception):
    """Internal: the coordinator ends the run (a tripwire, or an error)."""

    def __init__(
        self, *, tripwire: TripWire | None = None, error: BaseException | None = None
    ) -> None:
        self.tripwire = tripwire
        self.error = error
