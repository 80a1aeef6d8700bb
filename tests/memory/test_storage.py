"""The storage contract, on every backend: round trips, ownership, ordering,
schema versions, faults and cancellation."""

from __future__ import annotations

import datetime as _dt
import threading
from typing import Any, cast

import attrs
import pytest
import trio

from procession import MessageFormatError
from procession.memory import (
    SCHEMA_VERSION,
    MemoryStorage,
    SchemaVersionError,
    StorageError,
    StorageUnavailableError,
    ThreadOwnershipError,
)
from procession.messages import (
    DataPart,
    Message,
    MessageContent,
    TextPart,
    ToolInvocation,
    ToolInvocationPart,
)
from tests.memory.memory_helpers import Backend, admin_connection

pytestmark = pytest.mark.procession_real_clock

T0 = _dt.datetime(2026, 1, 1, 12, 0, tzinfo=_dt.UTC)


def at(seconds: float) -> _dt.datetime:
    return T0 + _dt.timedelta(seconds=seconds)


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


def rich_message() -> Message:
    """An assistant message with a tool call, a data part and unmodelled keys."""
    return Message(
        id="msg-rich",
        role="assistant",
        created_at=at(1),
        content=MessageContent(
            parts=[
                TextPart(text="checking"),
                ToolInvocationPart(
                    tool_invocation=ToolInvocation(
                        state="result",
                        tool_call_id="call-1",
                        tool_name="lookup",
                        args={"id": "A-1"},
                        result={"status": "shipped", "ünïcode": "✓"},
                    )
                ),
                DataPart(type="data-moderation", data={"level": "warn"}),
            ],
            metadata={"k": [1, 2.5, None]},
        ),
        extra={"customKey": {"nested": True}},
    )


async def test_a_turn_reads_back_exactly(storage: MemoryStorage) -> None:
    """Every field of a saved message reads back, keys we do not model too;
    the thread and resource ids are the thread's."""
    user = Message.user("where is my order?", created_at=at(0))
    rich = rich_message()
    thread = await storage.save_turn("thread-1", "alice", [user, rich])
    assert (thread.id, thread.resource_id) == ("thread-1", "alice")
    saved = await storage.list_messages("thread-1", "alice")
    expected = [
        attrs.evolve(m, thread_id="thread-1", resource_id="alice") for m in (user, rich)
    ]
    assert saved == expected
    assert user.thread_id is None  # the caller's objects are not changed


async def test_last_n_is_the_newest_n_in_order(storage: MemoryStorage) -> None:
    turn = [Message.user(f"m{i}", created_at=at(i)) for i in range(5)]
    await storage.save_turn("t", "alice", turn)
    assert texts(await storage.list_messages("t", "alice", last=2)) == ["m3", "m4"]
    assert texts(await storage.list_messages("t", "alice", last=10)) == [
        f"m{i}" for i in range(5)
    ]
    assert await storage.list_messages("t", "alice", last=0) == []
    assert await storage.list_messages("nope", "alice") == []


async def test_a_thread_is_created_on_first_use_owned_by_the_resource(
    storage: MemoryStorage,
) -> None:
    assert await storage.get_thread("t-a") is None
    await storage.save_turn("t-a", "alice", [Message.user("hi")])
    await storage.create_thread("t-b", "alice", title="Second", metadata={"x": 1})
    await storage.create_thread("t-c", "bob")
    thread = await storage.get_thread("t-b", resource_id="alice")
    assert thread is not None
    assert (thread.resource_id, thread.title, dict(thread.metadata)) == (
        "alice",
        "Second",
        {"x": 1},
    )
    again = await storage.create_thread("t-b", "alice", title="ignored")
    assert again == thread
    assert [t.id for t in await storage.list_threads("alice")] == ["t-b", "t-a"]
    assert [t.id for t in await storage.list_threads("bob")] == ["t-c"]
    assert await storage.list_threads("carol") == []


async def test_a_thread_is_never_readable_or_writable_across_resources(
    storage: MemoryStorage,
) -> None:
    await storage.save_turn("t", "alice", [Message.user("secret", created_at=at(0))])
    with pytest.raises(ThreadOwnershipError, match="thread 't' belongs to another"):
        await storage.list_messages("t", "mallory")
    with pytest.raises(ThreadOwnershipError, match="than 'mallory'"):
        await storage.save_turn("t", "mallory", [Message.user("injected")])
    with pytest.raises(ThreadOwnershipError, match="thread 't'"):
        await storage.get_thread("t", resource_id="mallory")
    with pytest.raises(ThreadOwnershipError, match="thread 't'"):
        await storage.create_thread("t", "mallory")
    assert texts(await storage.list_messages("t", "alice")) == ["secret"]
    assert await storage.list_threads("mallory") == []


async def test_a_later_turn_is_placed_after_the_thread_whole(
    storage: MemoryStorage,
) -> None:
    """A turn whose messages are older than the thread's newest (it began
    before another run saved) lands after it, its own order and spacing kept;
    a message saved again is updated where it stands."""
    first = [
        Message.user("q1", created_at=at(10)),
        Message.assistant("a1", created_at=at(11)),
    ]
    await storage.save_turn("t", "alice", first)
    late = [
        Message.user("q2", created_at=at(5)),
        Message.assistant("a2", created_at=at(7)),
    ]
    await storage.save_turn("t", "alice", late)
    saved = await storage.list_messages("t", "alice")
    assert texts(saved) == ["q1", "a1", "q2", "a2"]
    assert saved[3].created_at - saved[2].created_at == _dt.timedelta(seconds=2)
    assert saved[2].created_at > saved[1].created_at

    edited = attrs.evolve(
        first[0], content=MessageContent(parts=[TextPart(text="Q1!")])
    )
    await storage.save_turn("t", "alice", [edited])
    assert texts(await storage.list_messages("t", "alice")) == ["Q1!", "a1", "q2", "a2"]


async def test_a_message_id_of_another_thread_saves_nothing(
    storage: MemoryStorage,
) -> None:
    taken = Message.user("mine", id="msg-taken")
    await storage.save_turn("t1", "alice", [taken])
    with pytest.raises(StorageError, match=r"\['msg-taken'\] are already saved"):
        await storage.save_turn(
            "t2", "alice", [Message.user("new"), Message.user("x", id="msg-taken")]
        )
    assert await storage.get_thread("t2") is None
    assert texts(await storage.list_messages("t1", "alice")) == ["mine"]


@pytest.mark.parametrize(
    "created_at",
    [
        _dt.datetime(1, 1, 1, tzinfo=_dt.timezone(_dt.timedelta(hours=5))),
        _dt.datetime(999, 12, 31, tzinfo=_dt.UTC),
        _dt.datetime(9999, 1, 1, tzinfo=_dt.UTC),
    ],
)
async def test_a_time_outside_the_stored_years_saves_nothing(
    storage: MemoryStorage, created_at: _dt.datetime
) -> None:
    bad = Message.user("when?", id="msg-bad", created_at=created_at)
    with pytest.raises(
        MessageFormatError, match=r"'msg-bad' has created_at=.* 1000 to 9998"
    ):
        await storage.save_turn("t", "alice", [Message.user("fine"), bad])
    assert await storage.get_thread("t") is None


async def test_working_memory_is_per_resource(storage: MemoryStorage) -> None:
    assert await storage.get_resource("alice") is None
    first = await storage.update_working_memory("alice", "# Alice\n- likes tea")
    assert first.working_memory == "# Alice\n- likes tea"
    second = await storage.update_working_memory("alice", "# Alice\n- likes coffee")
    resource = await storage.get_resource("alice")
    assert resource == second
    assert resource.working_memory == "# Alice\n- likes coffee"
    assert resource.updated_at >= first.updated_at
    assert await storage.get_resource("bob") is None


async def test_concurrent_saves_on_one_thread_are_whole_and_ordered(
    backend: Backend,
) -> None:
    """Twenty turns saved at once, through two storages (two processes, as
    far as the database can tell) that both create the schema on this first
    use, all timestamped alike: each turn lands whole, none is lost or
    interleaved."""
    stores = [backend(), backend()]

    async def save(i: int) -> None:
        turn = [
            Message.user(f"q{i}", created_at=at(0)),
            Message.assistant(f"a{i}", created_at=at(1)),
        ]
        await stores[i % 2].save_turn("busy", "alice", turn)

    async with trio.open_nursery() as nursery:
        for i in range(20):
            nursery.start_soon(save, i)
    saved = texts(await stores[0].list_messages("busy", "alice"))
    assert len(saved) == 40
    pairs = [saved[k : k + 2] for k in range(0, 40, 2)]
    assert sorted(pairs) == sorted([f"q{i}", f"a{i}"] for i in range(20))


async def test_a_failure_before_commit_writes_nothing(backend: Backend) -> None:
    """The save's transaction fails at its last moment (on PostgreSQL the
    connection is killed from another session): nothing of the turn is
    written, and the storage keeps working."""
    storage = backend()
    await storage.save_turn("t", "alice", [Message.user("kept", created_at=at(0))])
    failures: list[str] = []

    def kill(conn: Any) -> None:
        if backend.name == "postgres":
            with admin_connection() as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,)
                )
            failures.append("terminated")
        else:
            failures.append("raised")
            raise OSError("disk unplugged")

    # The fault-injection hook is private to the backends, not in the protocol.
    cast(Any, storage)._before_commit = kill
    expected: type[Exception] = (
        StorageUnavailableError if backend.name == "postgres" else OSError
    )
    with pytest.raises(expected, match=r"terminat|disk unplugged"):
        await storage.save_turn(
            "t", "alice", [Message.user("lost"), Message.assistant("lost too")]
        )
    assert failures
    cast(Any, storage)._before_commit = None
    assert texts(await storage.list_messages("t", "alice")) == ["kept"]
    await storage.save_turn("t", "alice", [Message.user("after")])
    assert texts(await storage.list_messages("t", "alice")) == ["kept", "after"]


async def test_a_cancelled_save_stops_its_query_and_writes_nothing(
    backend: Backend,
) -> None:
    """Cancelling a save whose statement is running interrupts the statement
    (SQLite: ``Connection.interrupt``; PostgreSQL: a cancel request), so the
    worker thread ends at once and the turn is rolled back."""
    storage = backend()
    started = trio.Event()
    finished = threading.Event()
    outcome: list[str] = []

    pids: list[int] = []

    def slow(conn: Any) -> None:
        if backend.name == "postgres":
            pids.append(conn.info.backend_pid)
        trio.from_thread.run_sync(started.set)
        try:
            conn.execute(backend.slow_statement).fetchall()
            outcome.append("ran to the end")
        except Exception as exc:
            outcome.append(type(exc).__name__ + ": " + str(exc))
            raise
        finally:
            finished.set()

    cast(Any, storage)._before_commit = slow
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                storage.save_turn, "t", "alice", [Message.user("never saved")]
            )
            await started.wait()
            if pids:  # cancel only once the server runs the statement
                assert await trio.to_thread.run_sync(_wait_until_sleeping, pids[0])
            scope.cancel()
    assert scope.cancelled_caught
    # The statement would run for a minute; interrupted, it ends at once.
    assert await trio.to_thread.run_sync(finished.wait, 20)
    assert len(outcome) == 1
    assert "interrupted" in outcome[0] or "QueryCanceled" in outcome[0]
    cast(Any, storage)._before_commit = None
    assert await storage.list_messages("t", "alice") == []
    await storage.save_turn("t", "alice", [Message.user("later")])
    assert texts(await storage.list_messages("t", "alice")) == ["later"]


def _wait_until_sleeping(pid: int) -> bool:
    """Whether the server session ``pid`` started its ``pg_sleep`` (polled
    from a second session, a few thousand times at most)."""
    with admin_connection() as admin:
        for _ in range(5000):
            row = admin.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND state = 'active' "
                "AND query LIKE 'SELECT pg_sleep%%'",
                (pid,),
            ).fetchone()
            if row is not None:
                return True
    return False


async def test_a_closed_storage_says_so(backend: Backend) -> None:
    storage = backend()
    await storage.save_turn("t", "alice", [Message.user("hi")])
    await storage.aclose()
    await storage.aclose()  # idempotent
    with pytest.raises(StorageUnavailableError, match="is closed"):
        await storage.list_messages("t", "alice")


async def test_schema_versions_say_what_to_run(backend: Backend) -> None:
    """A database one version behind asks for ``migrate()``, which upgrades
    it; code one version behind the database asks to upgrade procession."""
    if backend.name == "sqlite-memory":
        pytest.skip("a ':memory:' database cannot be reopened by another storage")
    old = backend()
    await old.save_turn("t", "alice", [Message.user("from v1")])
    await old.aclose()

    newer = backend()
    private = cast(Any, newer)  # the schema is the backend's, not the protocol's
    v1 = private._schema
    private._schema = attrs.evolve(
        v1,
        version=v1.version + 1,
        upgrades={
            v1.version: (
                "ALTER TABLE {threads} ADD COLUMN archived BOOLEAN DEFAULT FALSE",
            )
        },
    )
    with pytest.raises(
        SchemaVersionError,
        match=rf"version {SCHEMA_VERSION}, .* run `await storage.migrate\(\)`",
    ):
        await newer.list_messages("t", "alice")
    await newer.migrate()
    assert texts(await newer.list_messages("t", "alice")) == ["from v1"]
    await newer.aclose()

    behind = backend()
    with pytest.raises(SchemaVersionError, match="upgrade procession") as info:
        await behind.list_threads("alice")
    assert (info.value.found, info.value.expected) == (
        SCHEMA_VERSION + 1,
        SCHEMA_VERSION,
    )
