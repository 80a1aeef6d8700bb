"""``Memory``: what ``Agent(memory=...)`` holds: a storage, the memory
processors it adds, the working-memory tool, and the save at the end of a run.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Final, Literal

import attrs
import trio

from .._errors import ConfigurationError, StorageError
from ..chunks import DataChunk
from ..messages import DataPart, Message
from ..processors import MessageList, Processor
from ._processors import (
    DEFAULT_WORKING_MEMORY_TEMPLATE,
    MessageHistory,
    WorkingMemory,
    WorkingMemoryTool,
)
from ._storage import MemoryStorage, ThreadLeases

__all__ = ["LEASE_TTL_S", "Memory", "persisted_messages"]

logger: Final = logging.getLogger("procession.memory")


def _check_last_messages(_instance: object, _attribute: object, value: object) -> None:
    if value is False:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(
            f"last_messages={value!r}; expected a count >= 0, or False for no history"
        )


def _check_working_memory(_instance: object, _attribute: object, value: object) -> None:
    if not isinstance(value, bool | str):
        raise ConfigurationError(
            f"working_memory={value!r}; expected True, False or a template str"
        )


class _ThreadLock:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = trio.Lock()
        self.users = 0


@attrs.define(kw_only=True, eq=False)
class Memory:
    """Conversation memory for an agent (Mastra's ``Memory``).

    Args:
        storage: where threads, messages and working memory live
            (``SqliteStorage``, ``PostgresStorage`` or your own
            ``MemoryStorage``).
        last_messages: how many of the thread's newest messages each run loads
            (Mastra's ``lastMessages``, default 10); ``False`` or 0: none.
        working_memory: ``True`` keeps a per-resource working-memory document
            (Mastra's default template); a str is your own template; ``False``
            (default) has none.

    **Two runs on one thread at once.** A run holds ``thread_lock(thread_id)``
    from loading its history to saving its turn, so runs on one thread take
    turns: the second loads the first's turn. Within a process they queue
    in arrival order; across processes (``procession serve --workers N``,
    replicas on one PostgreSQL) the storage leases the thread
    (``ThreadLeases``: a row with the holder and an expiry, renewed every
    ``LEASE_TTL_S / 3`` while the run goes on, given back at its end; a
    holder that died frees the thread within ``LEASE_TTL_S``), and a run
    waiting for it polls. With a storage that has no leases, only one
    process's runs take turns; each save is still one transaction that locks
    the thread and places its new messages after everything already saved,
    so turns are never interleaved or lost.
    """

    storage: MemoryStorage
    last_messages: int | Literal[False] = attrs.field(
        default=10, validator=_check_last_messages
    )
    working_memory: bool | str = attrs.field(
        default=False, validator=_check_working_memory
    )
    _locks: dict[str, _ThreadLock] = attrs.field(init=False, factory=dict, repr=False)

    @property
    def working_memory_template(self) -> str | None:
        """The working-memory template, or ``None`` when working memory is off."""
        if self.working_memory is True:
            return DEFAULT_WORKING_MEMORY_TEMPLATE
        return self.working_memory or None

    def input_processors(self) -> list[Processor]:
        """The processors the runtime adds to every run, before the user's:
        ``MessageHistory`` and, with working memory, ``WorkingMemory``. A new
        list of new processors each call."""
        processors: list[Processor] = [
            MessageHistory(self.storage, last_messages=int(self.last_messages))
        ]
        template = self.working_memory_template
        if template is not None:
            processors.append(WorkingMemory(self.storage, template=template))
        return processors

    def working_memory_tool(self) -> WorkingMemoryTool | None:
        """The ``updateWorkingMemory`` tool, when working memory is on."""
        if self.working_memory_template is None:
            return None
        return WorkingMemoryTool(self.storage)

    @contextlib.asynccontextmanager
    async def thread_lock(
        self,
        thread_id: str,
        *,
        holder: str | None = None,
        keep: Callable[[], bool] | None = None,
    ) -> AsyncIterator[None]:
        """Hold the thread for one run (see the class docstring); other runs on
        the same thread in this process wait, in arrival order, and runs in
        other processes wait for the storage's lease. Checkpoints; a
        cancelled wait leaves the lock and the lease alone; a storage error
        taking the lease goes up (``StorageError``).

        ``holder``: the lease's holder (default one of this block's own): a
        durable run holds it as itself, so the process that takes the run
        over holds it at once. ``keep()`` true at the block's end: the lease
        is not given back (the run went on in another process, which holds
        it now)."""
        entry = self._locks.get(thread_id)
        if entry is None:
            entry = self._locks[thread_id] = _ThreadLock()
        entry.users += 1
        try:
            async with entry.lock:
                storage = self.storage
                if not isinstance(storage, ThreadLeases):
                    yield
                    return
                async with _leased(storage, thread_id, holder, keep):
                    yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._locks[thread_id]

    async def save_turn(
        self,
        thread_id: str,
        resource_id: str,
        message_list: MessageList,
        *,
        custom_chunks: Iterable[DataChunk] = (),
    ) -> list[Message]:
        """Save the run's turn; call it once, after the run succeeded.

        Saves what remains in ``message_list`` once every processor finished:
        its unsaved input and response messages
        (``drain_unsaved_messages``; history loaded from memory and system
        messages, retry feedback among them, are never saved), in one
        transaction, creating the thread on first use (owned by
        ``resource_id``). The run's non-transient custom ``data-*`` chunks
        (``custom_chunks``, from ``writer.custom``) are saved as parts of the
        last assistant message; ``transient: true`` ones, and ``DataPart``s
        whose ``extra`` says ``transient``, are not. The message list's objects
        are not changed. Returns the messages as saved.

        A run that ends in a tripwire, an error or an abort must not call it.
        If the save fails (a ``StorageError``) nothing is written and the
        drained messages are not marked unsaved again. Checkpoints; cancelled
        before the commit, it writes nothing.
        """
        batch = persisted_messages(message_list.drain_unsaved_messages(), custom_chunks)
        if batch:
            await self.storage.save_turn(thread_id, resource_id, batch)
        return batch


LEASE_TTL_S: Final = 30.0
"""How long a thread's lease lasts unless renewed: the longest a thread stays
held by a process that died."""
_POLL_S: Final = (0.02, 0.05, 0.1, 0.2)  # then every 0.25 s


@contextlib.asynccontextmanager
async def _leased(
    leases: ThreadLeases,
    thread_id: str,
    holder: str | None = None,
    keep: Callable[[], bool] | None = None,
) -> AsyncIterator[None]:
    """The thread's lease in the storage for the block: polled for while
    another holds it, renewed in the background, given back after (also
    when the block is cancelled), unless ``keep()`` says another holds it
    now under the same ``holder``."""
    if holder is None:
        holder = f"{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(6)}"
    tries = 0
    while not await leases.acquire_thread_lease(thread_id, holder, LEASE_TTL_S):
        await trio.sleep(_POLL_S[tries] if tries < len(_POLL_S) else 0.25)
        tries += 1
    renewing = trio.CancelScope()

    async def renew() -> None:
        with renewing:
            while True:
                await trio.sleep(LEASE_TTL_S / 3)
                try:
                    if not await leases.renew_thread_lease(
                        thread_id, holder, LEASE_TTL_S
                    ):
                        logger.warning("the lease on thread %s lapsed", thread_id)
                        return
                except StorageError as exc:
                    logger.warning("thread %s's lease not renewed: %s", thread_id, exc)

    # A system task: no nursery around the caller's block (its exceptions
    # stay its own); it lives until the block ends.
    trio.lowlevel.spawn_system_task(renew, name=f"lease {thread_id}")
    try:
        yield
    finally:
        renewing.cancel()
        with trio.CancelScope(shield=True):
            try:
                if keep is None or not keep():
                    await leases.release_thread_lease(thread_id, holder)
            except StorageError as exc:  # it lapses by itself
                logger.warning("thread %s's lease not given back: %s", thread_id, exc)


def persisted_messages(
    messages: Iterable[Message], custom_chunks: Iterable[DataChunk] = ()
) -> list[Message]:
    """Copies of ``messages`` as memory saves them: transient data parts
    dropped, and the non-transient ``custom_chunks`` appended as ``DataPart``s
    to the last assistant message (dropped if there is none)."""
    batch = [copy.deepcopy(m) for m in messages]
    for message in batch:
        message.content.parts = [
            p
            for p in message.content.parts
            if not (isinstance(p, DataPart) and p.extra.get("transient") is True)
        ]
    assistant = next((m for m in reversed(batch) if m.role == "assistant"), None)
    if assistant is not None:
        assistant.content.parts.extend(
            DataPart(type=c.type, data=copy.deepcopy(c.data), id=c.id)
            for c in custom_chunks
            if not c.transient
        )
    return batch
