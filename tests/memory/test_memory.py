"""``Memory`` and the memory processors, on every backend: history loaded as
source ``memory``, working memory and its tool, what a turn saves, and the
per-thread lock."""

from __future__ import annotations

import datetime as _dt
from typing import Any

import pytest
import trio

from procession import ConfigurationError, ToolArgumentsError
from procession.chunks import DataChunk
from procession.memory import (
    DEFAULT_WORKING_MEMORY_TEMPLATE,
    MEMORY_TAG,
    UPDATE_WORKING_MEMORY,
    Memory,
    MemoryStorage,
    MessageHistory,
    MissingThreadError,
    ThreadLeases,
    ThreadOwnershipError,
    WorkingMemory,
    memory_ids,
)
from procession.messages import DataPart, Message, TextPart
from procession.processors import MessageList, ProcessInputArgs, RequestContext

pytestmark = pytest.mark.procession_real_clock

T0 = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)


def input_args(
    message_list: MessageList, request_context: RequestContext | None = None
) -> ProcessInputArgs:
    return ProcessInputArgs(
        processor_id="message-history",
        state={},
        messages=message_list.get.input.db(),
        system_messages=message_list.get_all_system_messages(),
        message_list=message_list,
        request_context=request_context or RequestContext(),
    )


async def run_turn(
    memory: Memory, question: str, answer: str, *, thread: str = "t"
) -> MessageList:
    """One run as the runtime will do it: load, add the turn, save."""
    ml = MessageList(thread_id=thread, resource_id="alice")
    for processor in memory.input_processors():
        await processor.process_input(input_args(ml))
    ml.add(question, "input")
    ml.add(Message.assistant(answer), "response")
    await memory.save_turn(thread, "alice", ml)
    return ml


async def test_history_is_loaded_as_memory_before_the_new_input(
    storage: MemoryStorage,
) -> None:
    memory = Memory(storage=storage, last_messages=3)
    await run_turn(memory, "my name is Ada", "hello Ada")
    await run_turn(memory, "I like tea", "noted")
    ml = MessageList(thread_id="t", resource_id="alice")
    ml.add("what is my name?", "input")
    result = await MessageHistory(storage, last_messages=3).process_input(
        input_args(ml)
    )
    assert result is ml
    assert [m.text for m in ml.get.remembered.db()] == [
        "hello Ada",
        "I like tea",
        "noted",
    ]
    assert [m.text for m in ml.get.input.db()] == ["what is my name?"]
    assert [m.text for m in ml] == [
        "hello Ada",
        "I like tea",
        "noted",
        "what is my name?",
    ]


async def test_a_turn_saves_only_what_the_run_added(storage: MemoryStorage) -> None:
    """History is not saved again, edits made in place by processors are
    saved, retry feedback (a tagged system message) and a message a
    processor removed are not."""
    memory = Memory(storage=storage)
    await run_turn(memory, "q1", "a1")
    ml = MessageList(thread_id="t", resource_id="alice")
    await MessageHistory(storage).process_input(input_args(ml))
    ml.add("q2 with a secret", "input")
    ml.add(Message.assistant("rejected answer"), "response")
    ml.remove_by_ids([ml.get.response.db()[0].id])
    ml.add_system("Your last answer was rejected", tag="processor-retry-feedback")
    ml.add(Message.assistant("a2"), "response")
    part = ml.get.input.db()[0].content.parts[0]
    assert isinstance(part, TextPart)
    part.text = "q2 with a [REDACTED]"  # an in-place edit, as a processor makes it
    saved = await memory.save_turn("t", "alice", ml)
    assert [m.text for m in saved] == ["q2 with a [REDACTED]", "a2"]
    stored = await storage.list_messages("t", "alice")
    assert [m.text for m in stored] == ["q1", "a1", "q2 with a [REDACTED]", "a2"]
    assert await memory.save_turn("t", "alice", ml) == []  # drained: nothing twice


async def test_data_parts_are_saved_unless_transient(storage: MemoryStorage) -> None:
    memory = Memory(storage=storage)
    ml = MessageList(thread_id="t", resource_id="alice")
    ml.add("hi", "input")
    answer = Message.assistant("hello")
    answer.content.parts.append(
        DataPart(type="data-scratch", data=1, extra={"transient": True})
    )
    ml.add(answer, "response")
    chunks = [
        DataChunk(type="data-moderation", data={"level": "warn"}),
        DataChunk(type="data-progress", data={"pct": 50}, transient=True),
    ]
    await memory.save_turn("t", "alice", ml, custom_chunks=chunks)
    stored = await storage.list_messages("t", "alice")
    data = [p for p in stored[1].content.parts if isinstance(p, DataPart)]
    assert [(p.type, p.data) for p in data] == [("data-moderation", {"level": "warn"})]
    # The run's own objects are not changed by saving.
    assert [p.type for p in answer.content.parts] == ["text", "data-scratch"]


async def test_a_thread_of_another_resource_is_not_loaded(
    storage: MemoryStorage,
) -> None:
    await storage.save_turn("t", "bob", [Message.user("bob's secret")])
    ml = MessageList(thread_id="t", resource_id="alice")
    with pytest.raises(ThreadOwnershipError, match="belongs to another resource"):
        await MessageHistory(storage).process_input(input_args(ml))
    assert len(ml) == 0


async def test_memory_needs_a_thread_and_a_resource(storage: MemoryStorage) -> None:
    with pytest.raises(MissingThreadError, match="names no thread and resource"):
        await MessageHistory(storage).process_input(input_args(MessageList()))
    with pytest.raises(MissingThreadError, match="names no resource"):
        memory_ids(MessageList(thread_id="t"), None)
    context = RequestContext(threadId="t2", resource_id="carol")
    assert memory_ids(MessageList(), context) == ("t2", "carol")
    assert memory_ids(MessageList(thread_id="t"), context) == ("t", "carol")


async def test_working_memory_is_shown_and_updated_by_its_tool(
    storage: MemoryStorage,
) -> None:
    memory = Memory(storage=storage, working_memory=True)
    assert [p.id for p in memory.input_processors()] == [
        "message-history",
        "working-memory",
    ]
    ml = MessageList(thread_id="t", resource_id="alice")
    await WorkingMemory(storage).process_input(input_args(ml))
    (shown,) = ml.get_system_messages(MEMORY_TAG)
    assert DEFAULT_WORKING_MEMORY_TEMPLATE in shown.content
    assert UPDATE_WORKING_MEMORY in shown.content

    tool = memory.working_memory_tool()
    assert tool is not None
    assert tool.name == "updateWorkingMemory"
    assert tool.input_schema["required"] == ["memory"]
    context = RequestContext(resource_id="alice")
    assert await tool.execute({"memory": "# Alice\n- likes tea"}, context) == {
        "success": True
    }
    ml = MessageList(thread_id="another-thread", resource_id="alice")
    await WorkingMemory(storage).process_input(input_args(ml))
    (shown,) = ml.get_system_messages(MEMORY_TAG)
    assert "<working_memory_data>\n# Alice\n- likes tea\n</working_memory_data>" in (
        shown.content
    )
    with pytest.raises(ToolArgumentsError, match="'memory' must be a string"):
        await tool.execute({"memory": 3}, context)
    with pytest.raises(MissingThreadError, match="without a resource id"):
        await tool.execute({"memory": "x"}, RequestContext())


def test_memory_options_are_checked() -> None:
    from procession.memory import SqliteStorage

    storage = SqliteStorage()
    assert Memory(storage=storage).working_memory_tool() is None
    assert Memory(storage=storage, working_memory="# Mine").working_memory_template == (
        "# Mine"
    )
    assert [p.id for p in Memory(storage=storage).input_processors()] == [
        "message-history"
    ]
    with pytest.raises(ConfigurationError, match="last_messages=-1"):
        Memory(storage=storage, last_messages=-1)
    with pytest.raises(ConfigurationError, match="last_messages=True"):
        Memory(storage=storage, last_messages=True)
    with pytest.raises(ConfigurationError, match="working_memory=3"):
        # Deliberately the wrong type: the error is what is tested.
        Memory(storage=storage, working_memory=3)  # type: ignore[arg-type]


async def test_runs_on_one_thread_take_turns(storage: MemoryStorage) -> None:
    """Under ``thread_lock`` the second run loads the first run's turn; other
    threads do not wait."""
    memory = Memory(storage=storage)
    first_in = trio.Event()
    release_first = trio.Event()
    seen: dict[str, list[str]] = {}
    done = {name: trio.Event() for name in ("first", "second", "elsewhere")}

    async def run(name: str, thread: str, hold: bool = False) -> None:
        async with memory.thread_lock(thread):
            if hold:
                first_in.set()
                await release_first.wait()
            ml = await run_turn(memory, f"{name}?", f"{name}!", thread=thread)
            seen[name] = [m.text for m in ml.get.remembered.db()]
            done[name].set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "first", "t", True)
        await first_in.wait()
        nursery.start_soon(run, "second", "t")
        nursery.start_soon(run, "elsewhere", "u")
        await done["elsewhere"].wait()  # another thread is not held up
        assert not done["second"].is_set()
        release_first.set()
    assert seen == {"first": [], "second": ["first?", "first!"], "elsewhere": []}
    assert memory._locks == {}


async def test_a_thread_lease_has_one_holder_at_a_time(storage: MemoryStorage) -> None:
    """The lease row behind runs on one thread taking turns across
    processes: one holder until it gives the lease back or lets it lapse."""
    assert isinstance(storage, ThreadLeases)
    await storage.migrate()
    assert await storage.acquire_thread_lease("t", "a", 30)
    assert await storage.acquire_thread_lease("t", "a", 30)  # a has it already
    assert not await storage.acquire_thread_lease("t", "b", 30)
    assert await storage.acquire_thread_lease("u", "b", 30)  # another thread
    assert await storage.renew_thread_lease("t", "a", 30)
    assert not await storage.renew_thread_lease("t", "b", 30)
    await storage.release_thread_lease("t", "b")  # not b's: nothing
    assert not await storage.acquire_thread_lease("t", "b", 30)
    await storage.release_thread_lease("t", "a")
    assert await storage.acquire_thread_lease("t", "b", 0)  # lapses at once
    assert await storage.acquire_thread_lease("t", "c", 30)
    assert not await storage.renew_thread_lease("t", "b", 30)


class _CountedLeases:
    """A storage's leases, with the refused tries counted."""

    def __init__(self, storage: Any) -> None:
        self._storage = storage
        self.refused = 0
        self.twice_refused = trio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)

    async def acquire_thread_lease(
        self, thread_id: str, holder: str, ttl_s: float
    ) -> bool:
        taken: bool = await self._storage.acquire_thread_lease(thread_id, holder, ttl_s)
        if not taken:
            self.refused += 1
            if self.refused == 2:
                self.twice_refused.set()
        return taken

    async def renew_thread_lease(
        self, thread_id: str, holder: str, ttl_s: float
    ) -> bool:
        renewed: bool = await self._storage.renew_thread_lease(thread_id, holder, ttl_s)
        return renewed

    async def release_thread_lease(self, thread_id: str, holder: str) -> None:
        await self._storage.release_thread_lease(thread_id, holder)


async def test_runs_on_one_thread_wait_for_another_holder_of_the_lease(
    storage: MemoryStorage,
) -> None:
    """A holder elsewhere (another process, as far as the storage can tell)
    keeps this process's run waiting until it gives the thread back."""
    assert isinstance(storage, ThreadLeases)
    counted = _CountedLeases(storage)
    memory = Memory(storage=counted)
    await storage.migrate()
    assert await storage.acquire_thread_lease("t", "elsewhere", 30)
    entered = trio.Event()

    async def run() -> None:
        async with memory.thread_lock("t"):
            entered.set()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await counted.twice_refused.wait()
            assert not entered.is_set()
            await storage.release_thread_lease("t", "elsewhere")
            await entered.wait()
    # Given back at the end of the block: free for anyone.
    assert await storage.acquire_thread_lease("t", "next", 30)
