"""``Memory``: what ``Agent(memory=...)`` holds: a storage, the memory
processors it adds, the working-memory tool, and the save at the end of a run.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator, Iterable
from typing import Literal

import attrs
import trio

from .._errors import ConfigurationError
from ..chunks import DataChunk
from ..messages import DataPart, Message
from ..processors import MessageList, Processor
from ._processors import (
    DEFAULT_WORKING_MEMORY_TEMPLATE,
    MessageHistory,
    WorkingMemory,
    WorkingMemoryTool,
)
from ._storage import MemoryStorage

__all__ = ["Memory", "persisted_messages"]


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

    **Two runs on one thread at once.** In one process, a run holds
    ``thread_lock(thread_id)`` from loading its history to saving its turn, so
    runs on one thread take turns: the second loads the first's turn. Across
    processes nothing waits for a whole run; each save is one transaction
    that locks the thread and places its new messages after everything
    already saved (moving their ``created_at`` forward if needed, keeping
    their order), so turns are never interleaved or lost, but a run that
    loaded its history before another process saved does not see that turn.
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
    async def thread_lock(self, thread_id: str) -> AsyncIterator[None]:
        """Hold the thread for one run (see the class docstring); other runs on
        the same thread in this process wait, in arrival order. Checkpoints;
        a cancelled wait leaves the lock alone."""
        entry = self._locks.get(thread_id)
        if entry is None:
            entry = self._locks[thread_id] = _ThreadLock()
        entry.users += 1
        try:
            async with entry.lock:
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
