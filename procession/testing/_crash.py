"""``crash_run``: a durable run's process dies, in a test."""

from __future__ import annotations

from ..runtime import AgentStream

__all__ = ["crash_run"]


async def crash_run(stream: AgentStream) -> bool:
    """End the durable run of ``stream`` here as if its process had been
    killed (``kill -9``) at this moment, and its lease had lapsed at once:
    its tools running now are cancelled and never recorded, nothing more of
    the run is written (no checkpoint, no memory, no end), and the stream
    stops with no terminal chunk (outcome ``moved``). Another process (or
    another ``Agent`` on the same storage, as one) then takes it over at
    once with ``Agent.take_over``. False, doing nothing, for a run that is
    not durable or has ended.

    What it cannot show is a crash halfway through one storage write: a
    write is one transaction, whole or absent, and the real ``kill -9``
    tests check that. Checkpoints (waits for the run to stop)."""
    # (the one way in, on purpose: not a method a client should see)
    return await stream._abandon()  # noqa: SLF001 - on purpose, as said above
