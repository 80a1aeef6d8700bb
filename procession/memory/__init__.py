"""Conversation memory: threads, their messages and a per-resource working
memory, kept in SQLite or PostgreSQL, and the processors that use them.

::

    memory = Memory(storage=SqliteStorage("memory.db"), last_messages=10)
    memory = Memory(storage=PostgresStorage("postgresql://..."))  # [postgres]

The data model is Mastra's: a *resource* (a user) owns *threads*; a thread
holds *messages* (``MastraDBMessage`` JSON) in order; a resource has one
working-memory document. A thread is never readable across resources
(``ThreadOwnershipError``). The tables (``procession_threads``,
``procession_messages``, ``procession_resources``, ``procession_schema``)
are created on first use or by ``await storage.migrate()``; a schema of
another version is a ``SchemaVersionError`` that says what to run.

``Memory.input_processors()`` are ``MessageHistory`` (loads the last N
messages as source ``memory``) and, with working memory, ``WorkingMemory``
(the document as a system message tagged ``memory``, updated by the model
through ``WorkingMemoryTool``, named ``updateWorkingMemory``). The runtime calls
``await memory.save_turn(thread, resource, message_list)`` once a run has
succeeded: input and response in one transaction, nothing of a failed run.
``Memory``'s docstring says how two runs on one thread are ordered.
"""

from .._errors import MissingThreadError as MissingThreadError
from .._errors import SchemaVersionError as SchemaVersionError
from .._errors import StorageError as StorageError
from .._errors import StorageLockedError as StorageLockedError
from .._errors import StorageUnavailableError as StorageUnavailableError
from .._errors import ThreadOwnershipError as ThreadOwnershipError
from .._faces import fixup_module_metadata as _fixup_module_metadata
from ._memory import Memory as Memory
from ._memory import persisted_messages as persisted_messages
from ._postgres import PostgresStorage as PostgresStorage
from ._processors import (
    DEFAULT_WORKING_MEMORY_TEMPLATE as DEFAULT_WORKING_MEMORY_TEMPLATE,
)
from ._processors import MEMORY_TAG as MEMORY_TAG
from ._processors import UPDATE_WORKING_MEMORY as UPDATE_WORKING_MEMORY
from ._processors import MessageHistory as MessageHistory
from ._processors import WorkingMemory as WorkingMemory
from ._processors import WorkingMemoryTool as WorkingMemoryTool
from ._processors import memory_ids as memory_ids
from ._runs import RunLostError as RunLostError
from ._sql import SCHEMA_VERSION as SCHEMA_VERSION
from ._sqlite import SqliteStorage as SqliteStorage
from ._storage import MemoryStorage as MemoryStorage
from ._storage import RunStorage as RunStorage
from ._storage import ThreadLeases as ThreadLeases
from ._values import Resource as Resource
from ._values import RunRecord as RunRecord
from ._values import RunStatus as RunStatus
from ._values import Thread as Thread
from ._values import ToolDecision as ToolDecision
from ._values import ToolRecord as ToolRecord

__all__ = [
    "DEFAULT_WORKING_MEMORY_TEMPLATE",
    "MEMORY_TAG",
    "Memory",
    "MemoryStorage",
    "MessageHistory",
    "MissingThreadError",
    "PostgresStorage",
    "Resource",
    "RunLostError",
    "RunRecord",
    "RunStatus",
    "RunStorage",
    "SCHEMA_VERSION",
    "SchemaVersionError",
    "SqliteStorage",
    "StorageError",
    "StorageLockedError",
    "StorageUnavailableError",
    "Thread",
    "ThreadLeases",
    "ThreadOwnershipError",
    "ToolDecision",
    "ToolRecord",
    "UPDATE_WORKING_MEMORY",
    "WorkingMemory",
    "WorkingMemoryTool",
    "memory_ids",
    "persisted_messages",
]

_fixup_module_metadata(__name__, globals())
