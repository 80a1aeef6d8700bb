"""Durable runs: a run that outlives the process executing it.

A durable run (``Agent(durable=True)``, per call, ``create_app(durable=True)``)
is kept in its agent's run storage from its start, before its first model
call: its first checkpoint (the input, the request context, the options) and
its owner's lease, in one transaction. The owner renews the lease every
``lease_s / 3``. At each step boundary (before each attempt) it replaces the
checkpoint (the snapshot format of a paused run: messages, steps, the
processors' per-run state, the retry count); when a step's model answer calls
tools, that answer is recorded before the tools run, and each tool's start and
outcome as it happens, keyed by the tool call id. Every write is fenced by the
run's epoch: an owner that lost the run stops at its next write.

When the owner dies its lease lapses; another process serving the agent takes
the run over (``Agent.take_over``: a compare-and-set on the run's row), loads
the checkpoint and goes on under the same run id. Its stream starts with a
``step-retry`` (reason ``takeover``) for the step it redoes, so a follower
drops what it saw of that step and after; the redone attempt replays a
recorded model answer rather than asking the model again, and a recorded
tool outcome is used, never re-run. A tool that was running when the owner
died runs again only if it is ``idempotent``; otherwise the model gets a
``ToolInterruptedError``.

A run that loses its lease, or is handed over (``AgentStream.hand_over``: a
graceful shutdown), ends ``moved``: its stream stops with no terminal chunk,
it writes nothing more, and its thread stays leased to the run (the lease's
holder is the run itself), so the taker holds it at once.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, NoReturn

import attrs
import trio

from .._errors import ConfigurationError, NoRunStorageError, ToolInterruptedError
from .._secrets import get_logger
from ..actors import RunControl
from ..data import RunOutcome, StepRetryChunk, StepRetryPayload, ToolCallInfo, Usage
from ..memory import RunLostError, RunRecord, RunStorage, StorageError, ToolRecord
from ..models import ModelFinish
from ..wire import from_wire as chunk_from_wire
from ..wire import to_wire as chunk_to_wire
from ._approval import Executed
from ._hooks import HookLanes
from ._snapshot import _not_json, take_checkpoint, take_snapshot
from ._state import RunState
from .tools import Tool

__all__ = [
    "DEFAULT_LEASE_S",
    "Durable",
    "DurableRun",
    "Takeover",
    "check_durable",
    "process_owner",
    "require_durable_storage",
]

logger = get_logger("procession")

DEFAULT_LEASE_S: Final = 10.0
"""How long a durable run's owner holds it without renewing (it renews every
third of that): how long a run waits, at most, after its process died."""


def _check_host(_instance: Any, _attribute: Any, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"Durable.host must be a dict or None, got {value!r}")
    problem = _not_json(dict(value), "host")
    if problem is not None:
        raise ConfigurationError(f"Durable.host must hold only JSON: {problem}")


def _check_lease(_instance: Any, _attribute: Any, value: Any) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigurationError(
            f"Durable.lease_s must be a positive number of seconds, got {value!r}"
        )


@attrs.frozen(kw_only=True)
class Durable:
    """How a run outlives its process (``durable=Durable(...)``;
    ``durable=True`` is ``Durable()``).

    Args:
        lease_s: how long the executing process holds the run without
            renewing (it renews every third of that): the longest the run
            waits after its process died before another takes it over.
        host: JSON that whoever serves the run keeps with it, to go on
            serving it after a takeover (``procession serve`` keeps the
            route and the key of the run's stream there). Opaque to the run.
    """

    lease_s: float = attrs.field(default=DEFAULT_LEASE_S, validator=_check_lease)
    host: Mapping[str, Any] | None = attrs.field(default=None, validator=_check_host)

    @staticmethod
    def require_storage(agent_id: str, storage: RunStorage | None) -> None:
        """``ConfigurationError`` (``NoRunStorageError`` without storage)
        unless ``storage`` keeps runs where other processes read them: what
        a durable run of agent ``agent_id`` needs."""
        require_durable_storage(agent_id, storage)

    @staticmethod
    def option(value: Any) -> Durable | None:
        """A ``durable=`` option as a ``Durable``: True is ``Durable()``,
        False or None is None (not durable); anything else but a ``Durable``
        is a ``ConfigurationError``."""
        return check_durable(value)


def check_durable(value: Any) -> Durable | None:
    """``durable=``: True (``Durable()``), False or None (not durable), or a
    ``Durable``; else ``ConfigurationError``."""
    if value is True:
        return Durable()
    if value is False or value is None:
        return None
    if isinstance(value, Durable):
        return value
    raise ConfigurationError(
        f"durable must be True, False or a procession.runtime.Durable, got {value!r}"
    )


def require_durable_storage(agent_id: str, storage: RunStorage | None) -> None:
    """A durable run needs storage other processes can read: a
    ``NoRunStorageError`` without one, a ``ConfigurationError`` for an
    in-memory SQLite database (both name the agent). Raised before the run
    starts (or the server that would serve it)."""
    if storage is None:
        raise NoRunStorageError(
            f"agent {agent_id!r} runs durable runs, which are kept in "
            f"storage from their start: give it memory=Memory(storage=...) or "
            f"storage=... (a SqliteStorage file or a PostgresStorage)"
        )
    if getattr(storage, "in_memory", False):
        raise ConfigurationError(
            f"agent {agent_id!r} runs durable runs, but its storage is an "
            f"in-memory SQLite database, which dies with this process: give it a "
            f"SQLite file (shared by the processes of one host) or PostgreSQL"
        )


_owner: tuple[int, str] | None = None


def process_owner() -> str:
    """This process's name as a durable run's owner: host, pid and a random
    part (a new one in a forked child)."""
    global _owner
    pid = os.getpid()
    if _owner is None or _owner[0] != pid:
        _owner = (pid, f"{socket.gethostname()}/{pid}/{secrets.token_hex(6)}")
    return _owner[1]


@attrs.frozen
class Takeover:
    """Where a run taken over goes on: before step ``step_number`` (None:
    before its input processors, nothing of it sent), with the attempt at
    that step recorded (``attempt``: the model's answer, when it called
    tools) and the tool calls' records. ``paused``: a continuation after a
    person's answer, cut off in the step it resumed (it resumes it again)."""

    step_number: int | None
    attempt: Mapping[str, Any] | None = None
    records: Mapping[str, ToolRecord] = attrs.field(factory=dict)
    paused: bool = False

    def retry_chunk(self, run_id: str, retry_count: int) -> StepRetryChunk:
        """The ``step-retry`` that withdraws what the lost process sent of
        the step redone and after."""
        assert self.step_number is not None
        return StepRetryChunk(
            payload=StepRetryPayload(
                step_number=self.step_number,
                reason="takeover",
                retry_count=retry_count,
            ),
            run_id=run_id,
        )


class DurableRun:
    """The coordinator's side of a durable run (the module docstring)."""

    def __init__(self, state: RunState, lanes: HookLanes, control: RunControl) -> None:
        self._state = state
        self._lanes = lanes
        self._control = control
        durable = state.spec.durable
        assert isinstance(durable, Durable)
        self._durable = durable
        self._owner = process_owner()
        self._last: tuple[int, int] | None = None
        self._running_tools = 0
        self._idle: trio.Event | None = None
        self._handing_over = False
        self._renewing = trio.CancelScope()
        self._replay: Mapping[str, Any] | None = None
        self.records: dict[str, ToolRecord] = {}
        self.moved = False
        """The run went on in another process (this one lost it, or handed
        it over): nothing more of it is written here."""

    @property
    def holder(self) -> str:
        """The holder of the run's thread lease: the run itself."""
        return f"run:{self._state.run_id}"

    @property
    def _storage(self) -> RunStorage:
        storage: RunStorage = self._state.spec.run_storage
        return storage

    def _states(self) -> dict[str, Any]:
        return {pid: actor.state for pid, actor in self._lanes.actors.items()}

    # --- holding the run ----------------------------------------------------------

    async def begin(self) -> None:
        """Hold the run from now on: keep a fresh run (its first checkpoint);
        make a continuation after a person's answer durable (its paused
        snapshot, with this process's lease); or, taken over, go on from the
        checkpoint. Then renew the lease in the background. Raises
        ``StorageError`` or ``SnapshotError`` (the run fails: nothing of it
        ran). Checkpoints."""
        state = self._state
        spec = state.spec
        if state.takeover is not None:
            point = state.takeover
            self.records = dict(point.records)
            self._replay = point.attempt
            if point.step_number is not None:
                self._last = (point.step_number, state.retry_count)
        elif state.stored_epoch is not None:
            assert state.resume is not None
            await self._storage.checkpoint_run(
                spec.run_id,
                epoch=state.stored_epoch,
                snapshot=take_snapshot(state, self._states(), state.resume),
                owner=self._owner,
                lease_s=self._durable.lease_s,
                host=self._durable.host,
            )
        else:
            ml = state.message_list
            now = _dt.datetime.now(_dt.UTC)
            await self._storage.start_run(
                RunRecord(
                    id=spec.run_id,
                    agent_id=spec.agent_id,
                    resource_id=ml.resource_id,
                    thread_id=ml.thread_id,
                    status="running",
                    snapshot=take_checkpoint(state, self._states(), step_number=None),
                    durable=True,
                    owner=self._owner,
                    host=self._durable.host,
                    created_at=now,
                    updated_at=now,
                ),
                lease_s=self._durable.lease_s,
            )
            state.stored_epoch = 0
        assert state.spawn is not None
        state.spawn(self._renew)

    def _ended(self) -> bool:
        """Nothing more of the run is written here (it ended, or moved)."""
        return self._state.stored_closed

    def stop_renewing(self) -> None:
        """The run's end (any): the lease is renewed no more."""
        self._renewing.cancel()

    async def _renew(self) -> None:
        state = self._state
        period = self._durable.lease_s / 3
        held_at = trio.current_time()
        with self._renewing:
            while not self.moved:
                await trio.sleep(period)
                if self._ended() or state.stored_epoch is None:
                    return
                try:
                    held = await self._storage.renew_run(
                        state.run_id,
                        epoch=state.stored_epoch,
                        owner=self._owner,
                        lease_s=self._durable.lease_s,
                    )
                except StorageError as exc:
                    logger.warning(
                        "run %s: its lease was not renewed: %s", state.run_id, exc
                    )
                    if trio.current_time() - held_at < self._durable.lease_s:
                        continue
                    held = False  # it lapsed meanwhile: another may hold it
                if self._ended():
                    return  # it ended while the renewal was on its way
                if not held:
                    logger.warning(
                        "run %s: this process lost the run (its lease lapsed or "
                        "another process took it over); it stops here",
                        state.run_id,
                    )
                    self._move()
                    return
                held_at = trio.current_time()

    def _move(self) -> None:
        """The run goes on elsewhere: decide the outcome ``moved`` (which
        stops the coordinator) and write nothing more."""
        if self.moved:
            return
        self.moved = True
        self._state.stored_closed = True
        self._control.conclude(RunOutcome(kind="moved", finish_reason="moved"))

    async def _stop_here(self) -> NoReturn:
        """A safe point while handing over: stop (the coordinator is
        cancelled by the outcome)."""
        self._move()
        await trio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    async def _fenced(self, write: Awaitable[object]) -> None:
        try:
            await write
        except RunLostError:
            logger.warning(
                "run %s: another process holds the run now; this one stops",
                self._state.run_id,
            )
            await self._stop_here()

    async def hand_over(self, coordinator_done: Callable[[], Awaitable[None]]) -> bool:
        """Stop at the next safe point (now, or when the tools running now
        have returned and been recorded) and let the lease lapse at once, so
        another process takes the run over without waiting; True if handed
        over, False if there was nothing to hand over (the run ended).
        Checkpoints."""
        state = self._state
        if self.moved or state.stored_closed or state.stored_epoch is None:
            await trio.lowlevel.checkpoint()
            return False
        self._handing_over = True
        while self._running_tools:
            self._idle = trio.Event()
            await self._idle.wait()
        self._move()
        await coordinator_done()  # nothing of the run writes any more
        with trio.CancelScope(shield=True):
            try:
                await self._storage.release_run(state.run_id, epoch=state.stored_epoch)
            except StorageError as exc:  # its lease lapses by itself
                logger.warning("run %s: not handed over at once: %s", state.run_id, exc)
        return True

    async def abandon(self, coordinator_done: Callable[[], Awaitable[None]]) -> bool:
        """Stop here and now as if this process had died (``kill -9``): the
        tools running are cancelled and not recorded, nothing more is
        written, and the lease is released as if it had lapsed, so a taker
        need not wait for it. For tests of what survives a crash
        (``procession.testing.crash_run``); False if the run had ended.
        Checkpoints."""
        state = self._state
        if self.moved or state.stored_closed or state.stored_epoch is None:
            await trio.lowlevel.checkpoint()
            return False
        self._move()
        await coordinator_done()
        with trio.CancelScope(shield=True):
            await self._storage.release_run(state.run_id, epoch=state.stored_epoch)
        return True

    # --- what it keeps ------------------------------------------------------------

    async def checkpoint(self, step_number: int) -> None:
        """Before an attempt at step ``step_number``: replace the checkpoint
        (nothing to write if the last one is of this very point). A safe
        point to hand over at. Raises ``SnapshotError``; stops the run if it
        was lost. Checkpoints."""
        state = self._state
        point = (step_number, state.retry_count)
        if point == self._last:
            return
        if self._handing_over:
            await self._stop_here()
        snapshot = take_checkpoint(state, self._states(), step_number=step_number)
        assert state.stored_epoch is not None
        await self._fenced(
            self._storage.checkpoint_run(
                state.run_id,
                epoch=state.stored_epoch,
                snapshot=snapshot,
                owner=self._owner,
                lease_s=self._durable.lease_s,
            )
        )
        self._last = point

    def replay(self, step_number: int) -> tuple[list[Any], ModelFinish] | None:
        """The recorded model answer of step ``step_number`` (once), when the
        run was taken over after it."""
        attempt, self._replay = self._replay, None
        if attempt is None or attempt.get("stepNumber") != step_number:
            return None
        raw = [chunk_from_wire(c) for c in attempt.get("raw", ())]
        finish = attempt.get("finish") or {}
        usage = finish.get("usage")
        return raw, ModelFinish(
            finish_reason=finish.get("finishReason", "tool-calls"),
            usage=Usage(**usage) if usage else None,
            provider_metadata=finish.get("providerMetadata"),
        )

    async def record_attempt(
        self, step_number: int, raw: Sequence[Any], finish: ModelFinish
    ) -> None:
        """Keep the model's answer of the step in flight (it called tools),
        before the tools run. Stops the run if it was lost. Checkpoints."""
        state = self._state
        usage = finish.usage
        attempt = {
            "stepNumber": step_number,
            "retryCount": state.retry_count,
            "raw": [chunk_to_wire(c) for c in raw],
            "finish": {
                "finishReason": finish.finish_reason,
                "usage": None
                if usage is None
                else {
                    f.name: getattr(usage, f.name)
                    for f in attrs.fields(Usage)
                    if f.name not in ("raw", "extra")
                    and getattr(usage, f.name) is not None
                },
                "providerMetadata": finish.provider_metadata
                if _not_json(finish.provider_metadata, "") is None
                else None,
            },
        }
        assert state.stored_epoch is not None
        await self._fenced(
            self._storage.record_attempt(
                state.run_id, epoch=state.stored_epoch, attempt=attempt
            )
        )

    async def run_tool(
        self,
        call: ToolCallInfo,
        tool: Tool | None,
        run: Callable[[], Awaitable[Executed | None]],
        *,
        resumed: bool = False,
    ) -> Executed | None:
        """Run one tool call as a durable run does: a recorded outcome is
        used, not re-run; a call that was running when the last owner died
        runs again only if its tool is idempotent (else the model gets a
        ``ToolInterruptedError``); a call that runs is recorded as started,
        then with its outcome. ``resumed``: a suspended tool given its data
        (it runs again by design). Checkpoints."""
        record = None if resumed else self.records.get(call.tool_call_id)
        if record is not None and record.state == "done":
            return Executed(ok=bool(record.ok), value=record.result)
        if record is not None and (tool is None or not tool.idempotent):
            return Executed(
                ok=False,
                value=ToolInterruptedError(call.tool_name, call.tool_call_id),
            )
        if self._handing_over:
            await self._stop_here()
        state = self._state
        assert state.stored_epoch is not None
        await self._fenced(
            self._storage.tool_started(
                state.run_id, epoch=state.stored_epoch, tool_call_id=call.tool_call_id
            )
        )
        self._running_tools += 1
        try:
            outcome = await run()
        finally:
            self._running_tools -= 1
            if not self._running_tools and self._idle is not None:
                self._idle.set()
        if outcome is not None:
            value = outcome.value
            if not outcome.ok and isinstance(value, BaseException):
                value = {"name": type(value).__name__, "message": str(value)}
            await self._fenced(
                self._storage.tool_finished(
                    state.run_id,
                    epoch=state.stored_epoch,
                    tool_call_id=call.tool_call_id,
                    ok=outcome.ok,
                    result=_recordable(value),
                )
            )
        return outcome


def _recordable(value: Any) -> Any:
    """A tool's outcome as its record keeps it: itself if JSON, else its
    JSON form as a model provider would send it (``str`` of what JSON cannot
    hold)."""
    if _not_json(value, "") is None:
        return value
    import json

    return json.loads(json.dumps(value, default=str))
