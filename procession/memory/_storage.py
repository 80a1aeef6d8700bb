"""``MemoryStorage``: what conversation memory needs from a database.

Two backends implement it, ``SqliteStorage`` and ``PostgresStorage``; a third
(an in-house store, a test double) only has to provide these coroutines. Every
method may raise ``StorageError`` (``StorageUnavailableError`` when the
database cannot be reached or the connection dropped); none leaves a partial
write behind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ..messages import Message
from ._values import (
    Resource,
    RunRecord,
    RunStatus,
    Thread,
    ToolDecision,
    ToolRecord,
)

__all__ = ["MemoryStorage", "RunStorage", "ThreadLeases"]


@runtime_checkable
class MemoryStorage(Protocol):
    """A database of threads, their messages and per-resource working memory.

    The data model is Mastra's: a *resource* (a user, an organisation) owns
    *threads*; a thread holds *messages* in order. A thread is never readable
    across resources: a call that names a thread together with another
    resource raises ``ThreadOwnershipError`` and reads or writes nothing.

    Implementations are safe to call from many trio tasks at once. Every
    method checkpoints; when it is cancelled the database work it started is
    stopped (or, if it already reached its commit, finishes whole) and nothing
    half-written remains.
    """

    async def migrate(self) -> None:
        """Create the tables, or upgrade them from an older schema version.

        Safe to run from several processes at once. Checkpoints."""
        ...

    async def get_thread(
        self, thread_id: str, *, resource_id: str | None = None
    ) -> Thread | None:
        """The thread, or ``None`` if there is none with this id. With
        ``resource_id``, a thread of another resource raises
        ``ThreadOwnershipError``. Checkpoints."""
        ...

    async def create_thread(
        self,
        thread_id: str,
        resource_id: str,
        *,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Thread:
        """Create the thread owned by ``resource_id`` (and the resource, if it
        is new), or return it unchanged if this resource already owns it.
        Checkpoints."""
        ...

    async def list_threads(self, resource_id: str) -> list[Thread]:
        """The resource's threads, most recently updated first. Checkpoints."""
        ...

    async def list_messages(
        self, thread_id: str, resource_id: str, *, last: int | None = None
    ) -> list[Message]:
        """The thread's messages in conversation order (oldest first); with
        ``last``, only the newest ``last`` of them. An unknown thread has no
        messages. Checkpoints."""
        ...

    async def save_turn(
        self, thread_id: str, resource_id: str, messages: Sequence[Message]
    ) -> Thread:
        """Save one turn's messages in ONE transaction, creating the thread
        (owned by ``resource_id``) on first use, and return the thread.

        A message id already saved in this thread is updated in place (its
        position kept); new messages are placed after everything already in
        the thread, keeping their own order and spacing (see
        ``procession.memory`` on two runs at once). Either every message is
        saved or none is. Checkpoints."""
        ...

    async def get_resource(self, resource_id: str) -> Resource | None:
        """The resource, or ``None`` if nothing was saved for it. Checkpoints."""
        ...

    async def update_working_memory(self, resource_id: str, text: str) -> Resource:
        """Replace the resource's working-memory document (creating the
        resource if needed). Checkpoints."""
        ...

    async def aclose(self) -> None:
        """Close the connections. Later calls raise ``StorageUnavailableError``.
        Idempotent. Checkpoints."""
        ...


@runtime_checkable
class RunStorage(Protocol):
    """Where runs that wait for a person are kept (``SqliteStorage`` and
    ``PostgresStorage`` are both). A run pauses in one transaction (its turn so
    far and its snapshot), is answered in one (the decision, and the claim of
    the run by the continuation: exactly once, across processes), and ends in
    one (the rest of its turn, and the run marked ended). Every method
    checkpoints and, cancelled, writes nothing half.
    """

    async def suspend_run(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        *,
        expected_epoch: int | None = None,
    ) -> RunRecord:
        """Keep ``run`` as waiting and save ``messages`` (the turn so far) to
        its thread, in ONE transaction. A new run (``expected_epoch`` None)
        must not exist yet (``StorageError``); a continuation pausing again
        must still hold the run at ``expected_epoch`` (``RunLostError``).
        Checkpoints."""
        ...

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run kept under ``run_id`` (waiting, running or ended), or None.
        Checkpoints."""
        ...

    async def list_runs(
        self,
        agent_id: str,
        *,
        status: RunStatus = "waiting",
        resource_id: str | None = None,
        thread_id: str | None = None,
    ) -> list[RunRecord]:
        """The agent's runs in ``status`` (of the resource and thread, when
        given), most recently changed first. Checkpoints."""
        ...

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
        """Record the decision on a waiting call and claim the run (status
        ``running``, ``epoch`` + 1) in ONE transaction; the decision and the
        claimed run. ``WaitingRunNotFound`` (checked first: no such run of
        ``agent_id``, or of ``resource_id`` when given),
        ``ApprovalAlreadyDecided`` (that call was answered, ever),
        ``ToolCallNotPendingError`` (it does not wait on that call; with none
        named, several wait). Checkpoints."""
        ...

    async def run_decisions(self, run_id: str) -> list[ToolDecision]:
        """Every decision taken on the run's calls, oldest first. Checkpoints."""
        ...

    async def end_run(
        self,
        run_id: str,
        *,
        epoch: int,
        thread_id: str | None = None,
        resource_id: str | None = None,
        messages: Sequence[Message] = (),
    ) -> RunRecord:
        """Save the rest of the turn and mark the run ended, in ONE
        transaction, if the caller still holds it at ``epoch``
        (``RunLostError`` otherwise: nothing written). Checkpoints."""
        ...

    # --- durable runs ---------------------------------------------------------

    async def start_run(self, run: RunRecord, *, lease_s: float) -> RunRecord:
        """Keep a new durable run: ``running`` at epoch 0, held by
        ``run.owner`` for ``lease_s`` seconds (the storage's clock), its
        first checkpoint ``run.snapshot``, in ONE transaction
        (``StorageError`` if a run with its id exists). Checkpoints."""
        ...

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
        """Replace the run's checkpoint (clearing its attempt record) and
        renew ``owner``'s lease for ``lease_s``; it becomes durable. Fenced:
        ``RunLostError`` unless the run is ``running`` at ``epoch``.
        Checkpoints."""
        ...

    async def record_attempt(
        self, run_id: str, *, epoch: int, attempt: Mapping[str, Any]
    ) -> None:
        """Keep what the step in flight did since the last checkpoint.
        Fenced. Checkpoints."""
        ...

    async def renew_run(
        self, run_id: str, *, epoch: int, owner: str, lease_s: float
    ) -> bool:
        """Extend ``owner``'s lease to ``lease_s`` from now; False when it
        holds the run no more. Checkpoints."""
        ...

    async def release_run(self, run_id: str, *, epoch: int) -> bool:
        """Let the lease lapse now (a hand-over); False when the caller held
        the run no more. Checkpoints."""
        ...

    async def lapsed_runs(
        self, agent_ids: Sequence[str], *, limit: int = 100
    ) -> list[RunRecord]:
        """The durable runs of ``agent_ids`` whose lease has lapsed, oldest
        lapse first. Checkpoints."""
        ...

    async def take_over(
        self,
        run_id: str,
        *,
        expected_epoch: int,
        owner: str,
        lease_s: float,
    ) -> RunRecord | None:
        """Take a lapsed durable run for ``owner`` (its lease ``lease_s``):
        a compare-and-set on its epoch and lease; the run at its new epoch,
        or None when it was not there to take. Checkpoints."""
        ...

    async def tool_started(self, run_id: str, *, epoch: int, tool_call_id: str) -> None:
        """Record that a tool call is about to run. Fenced. Checkpoints."""
        ...

    async def tool_finished(
        self, run_id: str, *, epoch: int, tool_call_id: str, ok: bool, result: Any
    ) -> None:
        """Record a tool call's outcome (``result`` JSON). Fenced.
        Checkpoints."""
        ...

    async def tool_records(self, run_id: str) -> list[ToolRecord]:
        """The run's tool call records. Checkpoints."""
        ...


@runtime_checkable
class ThreadLeases(Protocol):
    """A storage that can lease a thread to one run at a time, across
    processes: a row per held thread (thread, holder, expiry), taken and
    given back in short transactions, never a transaction held open through
    a run. ``SqliteStorage`` and ``PostgresStorage`` are; ``Memory`` uses it
    when its storage is (with another storage, runs on one thread take turns
    within one process only)."""

    async def acquire_thread_lease(
        self, thread_id: str, holder: str, ttl_s: float
    ) -> bool:
        """Take the thread for ``holder`` for ``ttl_s`` seconds if it is
        free, its lease lapsed, or ``holder`` has it; True if taken.
        Checkpoints."""
        ...

    async def renew_thread_lease(
        self, thread_id: str, holder: str, ttl_s: float
    ) -> bool:
        """Extend ``holder``'s lease to ``ttl_s`` from now; False if it is
        not ``holder``'s any more. Checkpoints."""
        ...

    async def release_thread_lease(self, thread_id: str, holder: str) -> None:
        """Give ``holder``'s lease back (nothing if it is not its).
        Checkpoints."""
        ...
