"""Taking a durable run over (``Agent.take_over``), and a loop that takes
over the lapsed runs of some agents (``adopt_lapsed_runs``: what a server
replica runs; ``_durable``'s docstring says what a durable run is)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import attrs
import trio

from .._errors import NoRunStorageError, SnapshotError
from .._secrets import get_logger
from ..memory import RunLostError, RunRecord, RunStorage, StorageError
from ._agent_face import AgentFace
from ._answer import continued_spec
from ._durable import Durable, Takeover, check_durable, process_owner
from ._options import CallOptions
from ._snapshot import apply_checkpoint, apply_snapshot, restore_snapshot
from ._state import RunSpec, RunState
from ._stream import AgentStream, Continuation, open_stream

__all__ = ["adopt_lapsed_runs", "take_over_run"]

A = TypeVar("A", bound=AgentFace)
"""The agents ``adopt_lapsed_runs`` serves (``Agent``)."""

logger = get_logger("procession")


@asynccontextmanager
async def take_over_run(
    agent: AgentFace,
    prepare: Callable[[Any, CallOptions], tuple[RunSpec, Any]],
    record: RunRecord,
    durable: Durable | None = None,
) -> AsyncIterator[AgentStream]:
    """Take the lapsed durable run ``record`` (as ``lapsed_runs`` listed it)
    for this process and stream it from its last checkpoint (the module
    docstring), holding it as ``durable`` says (default: as the agent
    does). Raises, on entering and before any chunk,
    ``RunLostError`` when it was not there to take (another process took it
    first, its owner renewed its lease, or it ended). Checkpoints."""
    storage = agent.run_storage
    if storage is None:
        raise NoRunStorageError(
            f"agent {agent.id!r} has no storage: it cannot take runs over"
        )
    durable = durable or check_durable(agent.durable) or Durable()
    taken = await storage.take_over(
        record.id,
        expected_epoch=record.epoch,
        owner=process_owner(),
        lease_s=durable.lease_s,
    )
    if taken is None:
        raise RunLostError(
            f"run {record.id!r} was not there to take over (another process took "
            f"it first, its owner renewed its lease, or it ended)"
        )
    snapshot = taken.snapshot
    if snapshot is None:  # pragma: no cover - a running run has one
        raise SnapshotError(f"run {record.id!r} has no checkpoint to go on from")
    restored = restore_snapshot(snapshot)
    spec = continued_spec(
        agent,
        prepare,
        restored,
        taken,
        durable=attrs.evolve(durable, host=taken.host),
    )
    records = {r.tool_call_id: r for r in await storage.tool_records(taken.id)}
    decisions = await storage.run_decisions(taken.id) if "paused" in snapshot else []

    def restore(state: RunState) -> None:
        state.stored_epoch = taken.epoch
        if "paused" in snapshot:
            # A continuation after a person's answer, cut off in its resumed
            # step: that step goes on again with the same answer.
            pending = snapshot["paused"]["phase"].get("pending") or {}
            answer = next(
                (d for d in decisions if d.tool_call_id == pending.get("toolCallId")),
                None,
            )
            assert answer is not None
            state.resume = apply_snapshot(state, snapshot, answer)
            state.takeover = Takeover(
                state.resume.step_number, None, records, paused=True
            )
            return
        apply_checkpoint(state, snapshot)
        step = snapshot.get("checkpoint", {}).get("stepNumber")
        state.takeover = Takeover(step, taken.attempt, records)

    continuation = Continuation(
        restore=restore, processor_state=restored.processor_state
    )
    logger.info(
        "run %s: taken over from %s (epoch %s)", taken.id, record.owner, taken.epoch
    )
    async with open_stream(
        spec, restored.message_list, continuation=continuation
    ) as stream:
        yield stream


async def adopt_lapsed_runs(
    agents: Sequence[A],
    serve: Callable[[A, RunRecord], Awaitable[None]],
    *,
    poll_s: float = 0.05,
    until: trio.Event | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Until cancelled (or ``until`` is set): every ``poll_s``, find the
    durable runs of ``agents`` whose lease lapsed (their process died, or
    handed them over) and call ``serve(agent, record)`` for each, in a task
    of its own (it enters ``agent.take_over(record)``, which raises
    ``RunLostError`` when another process was first). A run already being
    served here is not served twice. A storage that fails is logged and asked
    again at the next poll. Started (``task_status``) after the first look.
    Once ``until`` is set it takes no more runs, and returns when the ones it
    serves have ended (a server shutting down hands them over: ``serve``
    sees to it)."""
    by_storage: dict[int, tuple[RunStorage, dict[str, A]]] = {}
    for agent in agents:
        storage = agent.run_storage
        if storage is None:
            continue  # (nothing of its runs is kept)
        by_storage.setdefault(id(storage), (storage, {}))[1][agent.id] = agent
    serving: set[str] = set()

    async def serve_one(agent: A, record: RunRecord) -> None:
        try:
            await serve(agent, record)
        except RunLostError:
            pass  # another process took it first
        except Exception:
            logger.exception("run %s: its takeover failed", record.id)
        finally:
            serving.discard(record.id)

    async with trio.open_nursery() as nursery:
        started = False
        while until is None or not until.is_set():
            for storage, by_id in by_storage.values():
                try:
                    lapsed = await storage.lapsed_runs(list(by_id))
                except StorageError as exc:
                    logger.warning("lapsed runs not read: %s", exc)
                    continue
                for record in lapsed:
                    if record.id in serving:
                        continue
                    serving.add(record.id)
                    nursery.start_soon(serve_one, by_id[record.agent_id], record)
            if not started:
                started = True
                task_status.started()
            with trio.move_on_after(poll_s):
                if until is not None:
                    await until.wait()
                else:
                    await trio.sleep_forever()
        if not started:
            task_status.started()
