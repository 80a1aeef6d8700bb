"""What the SQL backends share: every ``MemoryStorage`` call that is one SQL
function of ``_sql`` run through the backend's ``_run`` (a worker thread, its
own transaction rules and error translation)."""

from __future__ import annotations

import abc
import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from ..messages import Message
from . import _runs, _sql
from ._values import (
    Resource,
    RunRecord,
    RunStatus,
    Thread,
    ToolDecision,
    ToolRecord,
)

__all__ = ["SqlBackend", "utc_now"]

T = TypeVar("T")


def utc_now() -> _dt.datetime:
    """The time a row is written (UTC)."""
    return _dt.datetime.now(_dt.UTC)


class SqlBackend(abc.ABC):
    """The calls of ``MemoryStorage`` both SQL backends make the same way; a
    backend supplies ``_dialect`` and ``_run``."""

    _dialect: Any

    @abc.abstractmethod
    async def _run(self, fn: Callable[[Any], T], *, migrate: bool = False) -> T:
        """``fn(connection)`` in a worker thread, in the backend's transaction
        rules, its errors translated to ``StorageError``. Checkpoints."""

    async def get_thread(
        self, thread_id: str, *, resource_id: str | None = None
    ) -> Thread | None:
        """See ``MemoryStorage.get_thread``. Checkpoints."""
        d = self._dialect
        return await self._run(lambda c: _sql.get_thread(c, d, thread_id, resource_id))

    async def create_thread(
        self,
        thread_id: str,
        resource_id: str,
        *,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Thread:
        """See ``MemoryStorage.create_thread``. Checkpoints."""
        d, now = self._dialect, utc_now()
        return await self._run(
            lambda c: _sql.create_thread(
                c, d, thread_id, resource_id, title, metadata, now
            )
        )

    async def list_threads(self, resource_id: str) -> list[Thread]:
        """See ``MemoryStorage.list_threads``. Checkpoints."""
        d = self._dialect
        return await self._run(lambda c: _sql.list_threads(c, d, resource_id))

    async def list_messages(
        self, thread_id: str, resource_id: str, *, last: int | None = None
    ) -> list[Message]:
        """See ``MemoryStorage.list_messages``. Checkpoints."""
        d = self._dialect
        return await self._run(
            lambda c: _sql.list_messages(c, d, thread_id, resource_id, last)
        )

    async def get_resource(self, resource_id: str) -> Resource | None:
        """See ``MemoryStorage.get_resource``. Checkpoints."""
        d = self._dialect
        return await self._run(lambda c: _sql.get_resource(c, d, resource_id))

    async def update_working_memory(self, resource_id: str, text: str) -> Resource:
        """See ``MemoryStorage.update_working_memory``. Checkpoints."""
        d, now = self._dialect, utc_now()
        return await self._run(
            lambda c: _sql.update_working_memory(c, d, resource_id, text, now)
        )

    # --- runs that wait for a person (RunStorage) -------------------------------

    async def suspend_run(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        *,
        expected_epoch: int | None = None,
    ) -> RunRecord:
        """See ``RunStorage.suspend_run``. Checkpoints."""
        d, now, batch = self._dialect, utc_now(), list(messages)
        return await self._run(
            lambda c: _runs.suspend_run(c, d, run, batch, expected_epoch, now)
        )

    async def get_run(self, run_id: str) -> RunRecord | None:
        """See ``RunStorage.get_run``. Checkpoints."""
        d = self._dialect
        return await self._run(lambda c: _runs.get_run(c, d, run_id))

    async def list_runs(
        self,
        agent_id: str,
        *,
        status: RunStatus = "waiting",
        resource_id: str | None = None,
        thread_id: str | None = None,
    ) -> list[RunRecord]:
        """See ``RunStorage.list_runs``. Checkpoints."""
        d = self._dialect
        return await self._run(
            lambda c: _runs.list_runs(c, d, agent_id, status, resource_id, thread_id)
        )

    async def decide(
        self,
        run_id: str,
        *,
        agent_id: str,
        tool_call_id: str | None,
        decision: str,
        reason: str | None = None,
        data: Any = None,
        resource_id: str | None = None,
        decided_by: str | None = None,
    ) -> tuple[ToolDecision, RunRecord]:
        """See ``RunStorage.decide``. Checkpoints."""
        d, now = self._dialect, utc_now()
        return await self._run(
            lambda c: _runs.decide(
                c,
                d,
                run_id,
                agent_id,
                tool_call_id,
                decision,
                reason,
                data,
                resource_id,
                decided_by,
                now,
            )
        )

    async def run_decisions(self, run_id: str) -> list[ToolDecision]:
        """See ``RunStorage.run_decisions``. Checkpoints."""
        d = self._dialect
        return await self._run(lambda c: _runs.run_decisions(c, d, run_id))

    async def end_run(
        self,
        run_id: str,
        *,
        epoch: int,
        thread_id: str | None = None,
        resource_id: str | None = None,
        messages: Sequence[Message] = (),
    ) -> RunRecord:
        """See ``RunStorage.end_run``. Checkpoints."""
        d, now, batch = self._dialect, utc_now(), list(messages)
        return await self._run(
            lambda c: _runs.end_run(
                c, d, run_id, epoch, thread_id, resource_id, batch, now
            )
        )

    # --- durable runs (RunStorage) -----------------------------------------------

    async def start_run(self, run: RunRecord, *, lease_s: float) -> RunRecord:
        """See ``RunStorage.start_run``. Checkpoints."""
        d, now = self._dialect, utc_now()
        run = attrs.evolve(run, lease_until=now + _dt.timedelta(seconds=lease_s))
        return await self._run(lambda c: _runs.start_run(c, d, run, now))

    async def checkpoint_run(
        self,
        run_id: str,
        *,
        epoch: int,
        snapshot: Mapping[str, Any],
        owner: str,
        lease_s: float,
        host: Mapping[str, Any] | None = None,
    ) -> None:
        """See ``RunStorage.checkpoint_run``. Checkpoints."""
        d, now, data = self._dialect, utc_now(), dict(snapshot)
        lease_until = now + _dt.timedelta(seconds=lease_s)
        kept = dict(host) if host is not None else None
        await self._run(
            lambda c: _runs.checkpoint_run(
                c, d, run_id, epoch, data, owner, lease_until, kept, now
            )
        )

    async def record_attempt(
        self, run_id: str, *, epoch: int, attempt: Mapping[str, Any]
    ) -> None:
        """See ``RunStorage.record_attempt``. Checkpoints."""
        d, now, data = self._dialect, utc_now(), dict(attempt)
        await self._run(lambda c: _runs.record_attempt(c, d, run_id, epoch, data, now))

    async def renew_run(
        self, run_id: str, *, epoch: int, owner: str, lease_s: float
    ) -> bool:
        """See ``RunStorage.renew_run``. Checkpoints."""
        d = self._dialect
        lease_until = utc_now() + _dt.timedelta(seconds=lease_s)
        return await self._run(
            lambda c: _runs.renew_run(c, d, run_id, epoch, owner, lease_until)
        )

    async def release_run(self, run_id: str, *, epoch: int) -> bool:
        """See ``RunStorage.release_run``. Checkpoints."""
        d, now = self._dialect, utc_now()
        return await self._run(lambda c: _runs.release_run(c, d, run_id, epoch, now))

    async def lapsed_runs(
        self, agent_ids: Sequence[str], *, limit: int = 100
    ) -> list[RunRecord]:
        """See ``RunStorage.lapsed_runs``. Checkpoints."""
        d, now, ids = self._dialect, utc_now(), list(agent_ids)
        return await self._run(lambda c: _runs.lapsed_runs(c, d, ids, now, limit))

    async def take_over(
        self,
        run_id: str,
        *,
        expected_epoch: int,
        owner: str,
        lease_s: float,
    ) -> RunRecord | None:
        """See ``RunStorage.take_over``. Checkpoints."""
        d, now = self._dialect, utc_now()
        lease_until = now + _dt.timedelta(seconds=lease_s)
        return await self._run(
            lambda c: _runs.take_over(
                c, d, run_id, expected_epoch, owner, lease_until, now
            )
        )

    async def tool_started(self, run_id: str, *, epoch: int, tool_call_id: str) -> None:
        """See ``RunStorage.tool_started``. Checkpoints."""
        d, now = self._dialect, utc_now()
        await self._run(
            lambda c: _runs.tool_started(c, d, run_id, epoch, tool_call_id, now)
        )

    async def tool_finished(
        self, run_id: str, *, epoch: int, tool_call_id: str, ok: bool, result: Any
    ) -> None:
        """See ``RunStorage.tool_finished``. Checkpoints."""
        d, now = self._dialect, utc_now()
        await self._run(
            lambda c: _runs.tool_finished(
                c, d, run_id, epoch, tool_call_id, ok, result, now
            )
        )

    async def tool_records(self, run_id: str) -> list[ToolRecord]:
        """See ``RunStorage.tool_records``. Checkpoints."""
        d = self._dialect
        return await self._run(lambda c: _runs.tool_records(c, d, run_id))

    # --- thread leases (ThreadLeases) ---------------------------------------------

    async def acquire_thread_lease(
        self, thread_id: str, holder: str, ttl_s: float
    ) -> bool:
        """See ``ThreadLeases.acquire_thread_lease``. Checkpoints."""
        d, now = self._dialect, utc_now()
        expires = now + _dt.timedelta(seconds=ttl_s)
        return await self._run(
            lambda c: _sql.acquire_lease(c, d, thread_id, holder, now, expires)
        )

    async def renew_thread_lease(
        self, thread_id: str, holder: str, ttl_s: float
    ) -> bool:
        """See ``ThreadLeases.renew_thread_lease``. Checkpoints."""
        d = self._dialect
        expires = utc_now() + _dt.timedelta(seconds=ttl_s)
        return await self._run(
            lambda c: _sql.renew_lease(c, d, thread_id, holder, expires)
        )

    async def release_thread_lease(self, thread_id: str, holder: str) -> None:
        """See ``ThreadLeases.release_thread_lease``. Checkpoints."""
        d = self._dialect
        await self._run(lambda c: _sql.release_lease(c, d, thread_id, holder))
