"""What conversation memory adds to a turn: a 20-turn conversation through
``agent.generate`` over a ScriptedModel, without memory (the baseline, in the
same run) and with ``Memory`` on SQLite (a file, ``":memory:"``) and on
PostgreSQL; then 100 conversations at once on PostgreSQL. Each turn loads the
last 10 messages (the ``MessageHistory`` processor) and saves the turn
(``Memory.save_turn``): ``Agent(memory=...)``, as a user writes it. Not
part of the test suite; a smoke test runs ``--quick``.

    python benchmarks/memory_turns.py          # 20 turns x 5 rounds; 100 at once
    python benchmarks/memory_turns.py --quick  # tiny, to check it runs

PostgreSQL rows need ``PROCESSION_TEST_POSTGRES_DSN`` (``bash .ci/pg --
python benchmarks/memory_turns.py`` starts a private server); without it they
are left out, and the table says so.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence

import attrs
import trio

from procession import Agent
from procession.memory import Memory, MemoryStorage, PostgresStorage, SqliteStorage
from procession.testing import ScriptedModel

DSN_VARIABLE = "PROCESSION_TEST_POSTGRES_DSN"


@attrs.frozen
class Row:
    setup: str
    conversations: int
    turns: int
    ms_per_turn: float
    """The median time of one turn (one generate, plus load and save)."""
    p95_ms: float
    added_ms: float
    """``ms_per_turn`` minus the same load without memory, in the same run."""
    turns_per_second: float
    """All conversations' turns over the wall time they took together."""


async def _conversation(
    memory: Memory | None, thread: str, turns: int, times: list[float]
) -> None:
    agent = Agent(
        id="bench",
        model=ScriptedModel([f"answer {i}" for i in range(turns)]),
        memory=memory,
    )
    ids = {"thread": thread, "resource": "bench-user"} if memory else None
    for i in range(turns):
        start = time.perf_counter()
        await agent.generate(f"question {i}", memory=ids)
        times.append((time.perf_counter() - start) * 1e3)


async def _measure(
    make: Callable[[], MemoryStorage] | None,
    conversations: int,
    turns: int,
    rounds: int,
) -> tuple[float, float, float]:
    """Median and p95 milliseconds per turn, and turns per second, over
    ``rounds`` runs of ``conversations`` concurrent conversations of ``turns``
    turns each."""
    times: list[float] = []
    storage = make() if make is not None else None
    memory = Memory(storage=storage) if storage is not None else None
    if storage is not None:
        await storage.migrate()  # schema creation is not a turn's cost
    wall = 0.0
    try:
        for _ in range(rounds):
            start = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for _ in range(conversations):
                    thread = f"thread-{uuid.uuid4().hex}"
                    nursery.start_soon(_conversation, memory, thread, turns, times)
            wall += time.perf_counter() - start
    finally:
        if storage is not None:
            await storage.aclose()
    ordered = sorted(times)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    return statistics.median(ordered), p95, len(ordered) / wall


async def _rows(
    setups: Sequence[tuple[str, Callable[[], MemoryStorage] | None]],
    conversations: int,
    turns: int,
    rounds: int,
) -> list[Row]:
    """One row per setup; the first (no memory) is the baseline of the rest."""
    rows: list[Row] = []
    for name, make in setups:
        median, p95, rate = await _measure(make, conversations, turns, rounds)
        base = rows[0].ms_per_turn if rows else median
        rows.append(Row(name, conversations, turns, median, p95, median - base, rate))
    return rows


def _postgres(dsn: str, schema: str) -> Callable[[], MemoryStorage]:
    return lambda: PostgresStorage(dsn, schema_name=schema, pool_size=20)


async def _run(turns: int, rounds: int, concurrent: int, tmp: str) -> list[Row]:
    dsn = os.environ.get(DSN_VARIABLE)
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    setups: list[tuple[str, Callable[[], MemoryStorage] | None]] = [
        ("no memory", None),
        ("sqlite file", lambda: SqliteStorage(os.path.join(tmp, "m.db"))),
        ("sqlite :memory:", lambda: SqliteStorage(":memory:")),
    ]
    if dsn:
        setups.append(("postgres", _postgres(dsn, schema)))
    rows: list[Row] = []
    try:
        rows += await _rows(setups, 1, turns, rounds)
        if dsn:
            many = [("no memory", None), ("postgres", _postgres(dsn, schema))]
            rows += await _rows(many, concurrent, max(1, turns // 4), 1)
    finally:
        if dsn:
            await trio.to_thread.run_sync(_drop_schema, dsn, schema)
    return rows


def _drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    turns, rounds, concurrent = (4, 1, 5) if args.quick else (20, 5, 100)
    with tempfile.TemporaryDirectory() as tmp:
        rows = trio.run(_run, turns, rounds, concurrent, tmp)
    print(
        f"{'setup':<17}{'at once':>8}{'turns':>7}{'ms/turn':>9}{'p95 ms':>8}"
        f"{'added ms':>10}{'turns/s':>9}"
    )
    for r in rows:
        print(
            f"{r.setup:<17}{r.conversations:>8}{r.turns:>7}{r.ms_per_turn:>9.2f}"
            f"{r.p95_ms:>8.2f}{r.added_ms:>+10.2f}{r.turns_per_second:>9.0f}"
        )
    if not os.environ.get(DSN_VARIABLE):
        print(f"(no PostgreSQL rows: {DSN_VARIABLE} is not set)")
    return rows


if __name__ == "__main__":
    main()
