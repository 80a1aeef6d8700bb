"""``PostgresStorage`` across a PostgreSQL outage, on a server of the test's
own that it stops (as if it crashed) and starts again: a call while it is
down fails at once with ``StorageUnavailableError``, not after
``connect_timeout``; the first call after it is back succeeds.

The bounds below are correctness checks with wide margins, not timing goals:
``connect_timeout`` is 30 s, and "at once" means well inside it (a refused
connection takes milliseconds)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, cast

import pytest
import trio

from procession.memory import PostgresStorage, StorageUnavailableError
from procession.messages import Message
from tests.memory.memory_helpers import PrivatePostgres

pytestmark = pytest.mark.procession_real_clock

CONNECT_TIMEOUT = 30.0
# Far below CONNECT_TIMEOUT: a call that waits for the timeout cannot pass.
AT_ONCE = 10.0
REFUSED = r"cannot connect to PostgreSQL at 127\.0\.0\.1:\d+/postgres"


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


async def fails_at_once(call: Awaitable[object], match: str = REFUSED) -> None:
    with (
        trio.fail_after(AT_ONCE),
        pytest.raises(StorageUnavailableError, match=match),
    ):
        await call


async def back_up(server: PrivatePostgres, storage: PostgresStorage) -> None:
    """Start the server again: the first save after it succeeds, and the
    thread holds exactly what was saved while it was up."""
    await server.start()
    with trio.fail_after(AT_ONCE):
        await storage.save_turn("t", "alice", [Message.user("after")])
    assert texts(await storage.list_messages("t", "alice")) == ["before", "after"]
    await storage.aclose()


async def test_calls_while_down_fail_at_once_and_the_first_after_succeeds(
    private_postgres: PrivatePostgres,
) -> None:
    storage = PostgresStorage(private_postgres.dsn, connect_timeout=CONNECT_TIMEOUT)
    await storage.save_turn("t", "alice", [Message.user("before")])
    await private_postgres.stop()
    # The first call finds the pool's connection dead; the next finds no
    # server to connect to: both say so at once.
    await fails_at_once(storage.save_turn("t", "alice", [Message.user("lost")]))
    await fails_at_once(storage.list_messages("t", "alice"))
    await back_up(private_postgres, storage)


async def test_a_restart_between_two_calls_goes_unnoticed(
    private_postgres: PrivatePostgres,
) -> None:
    storage = PostgresStorage(private_postgres.dsn, connect_timeout=CONNECT_TIMEOUT)
    await storage.save_turn("t", "alice", [Message.user("before")])
    await private_postgres.stop()
    await back_up(private_postgres, storage)


async def test_concurrent_calls_across_an_outage(
    private_postgres: PrivatePostgres,
) -> None:
    """Four calls at once, each holding a pooled connection, then four while
    the server is down (each fails at once, whichever of them finds the dead
    connections first), then four once it is back (each succeeds)."""
    storage = PostgresStorage(
        private_postgres.dsn, connect_timeout=CONNECT_TIMEOUT, pool_size=4
    )
    outcomes: list[str] = []

    async def save(text: str) -> None:
        try:
            await storage.save_turn(f"t-{text}", "alice", [Message.user(text)])
        except StorageUnavailableError as exc:
            outcomes.append(f"unavailable: {exc}")
        else:
            outcomes.append("saved")

    async def four(label: str) -> None:
        with trio.fail_after(AT_ONCE):
            async with trio.open_nursery() as nursery:
                for i in range(4):
                    nursery.start_soon(save, f"{label}{i}")

    await four("before")
    assert outcomes == ["saved"] * 4
    await private_postgres.stop()
    outcomes.clear()
    await four("down")
    assert len(outcomes) == 4
    for outcome in outcomes:
        assert outcome.startswith("unavailable: cannot connect to PostgreSQL"), outcome
    await private_postgres.start()
    outcomes.clear()
    await four("after")
    assert outcomes == ["saved"] * 4
    await storage.aclose()


async def test_a_save_cut_off_by_the_crash_then_the_server_returns(
    private_postgres: PrivatePostgres,
) -> None:
    """The server goes down inside a save's transaction: that save fails
    (nothing of it written), the next call fails at once, and once the
    server is back the storage works again."""
    storage = PostgresStorage(private_postgres.dsn, connect_timeout=CONNECT_TIMEOUT)
    await storage.save_turn("t", "alice", [Message.user("before")])

    def crash(conn: Any) -> None:
        private_postgres.stop_sync()  # in the storage's worker thread

    # The fault-injection hook is private to the backends, not in the protocol.
    cast(Any, storage)._before_commit = crash
    await fails_at_once(
        storage.save_turn("t", "alice", [Message.user("cut off")]),
        match=r"the connection to PostgreSQL .* failed",
    )
    cast(Any, storage)._before_commit = None
    await fails_at_once(storage.list_messages("t", "alice"))
    await back_up(private_postgres, storage)
