"""What a tool call that waits for approval adds: a run that pauses
(``agent.generate`` to ``finish_reason == "suspended"``: the pause is kept in
storage) and its resume (``agent.approve_tool_call_generate``: the answer is
decided once, the tool runs, the model answers), beside a plain turn (one
text answer) and the same tool turn without approval (call, tool, answer in
one run), measured in the same run on the same storage: SQLite (a file) and
PostgreSQL. Every run is in a thread of its own, over a ScriptedModel (no
network: what is measured is the library and its storage); one run of each
setup in turn, after three uncounted, so a shared machine's drift hits them
alike. Not part of the test suite.

    python benchmarks/approval.py          # 200 runs of each, per backend
    python benchmarks/approval.py --quick  # tiny, to check it runs

PostgreSQL rows need ``PROCESSION_TEST_POSTGRES_DSN`` (``bash .ci/pg --
python benchmarks/approval.py`` starts a private server); without it they
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
from typing import Any

import attrs
import trio

from procession import Agent, tool
from procession.memory import Memory, MemoryStorage, PostgresStorage, SqliteStorage
from procession.models import ModelRequest
from procession.testing import ScriptedModel, text_turn, tool_call_turn

DSN_VARIABLE = "PROCESSION_TEST_POSTGRES_DSN"
SETUPS = ("plain turn", "tool turn", "pause", "resume", "pause + resume")


@attrs.frozen
class RecordId:
    id: int


@attrs.frozen
class Row:
    backend: str
    setup: str
    runs: int
    ms: float
    """The median milliseconds of one (for ``pause + resume``: the median of
    each run's pause plus its resume)."""
    p95_ms: float
    vs_plain: float
    """``ms`` over the plain turn's, same backend, same run."""


def _agent(storage: MemoryStorage, *, approval: bool, calls_tool: bool) -> Agent:
    @tool(require_approval=approval)
    def delete_record(args: RecordId) -> dict[str, Any]:
        """Delete a record."""
        return {"deleted": args.id}

    def turn(request: ModelRequest) -> list[Any]:
        if calls_tool and request.prompt[-1].role == "user":
            return tool_call_turn("delete_record", {"id": 42})
        return text_turn("Done: the record is gone.")

    return Agent(
        id="bench",
        model=ScriptedModel([turn] * 1_000_000),
        tools=[delete_record],
        memory=Memory(storage=storage),
    )


def _memory() -> dict[str, str]:
    return {"thread": f"t-{uuid.uuid4().hex}", "resource": "bench-user"}


async def _timed(times: list[float], run: Any) -> Any:
    start = time.perf_counter()
    result = await run
    times.append((time.perf_counter() - start) * 1e3)
    return result


async def _measure(
    make: Callable[[], MemoryStorage], runs: int
) -> dict[str, list[float]]:
    """Milliseconds of every run of each setup, on one storage."""
    storage = make()
    await storage.migrate()  # schema creation is not a run's cost
    plain = _agent(storage, approval=False, calls_tool=False)
    tooled = _agent(storage, approval=False, calls_tool=True)
    waiting = _agent(storage, approval=True, calls_tool=True)
    times: dict[str, list[float]] = {name: [] for name in SETUPS}

    async def once(times: dict[str, list[float]]) -> None:
        # One run of each setup, in turn: drift hits them alike.
        done = await _timed(times["plain turn"], plain.generate("hi", memory=_memory()))
        assert done.finish_reason == "stop", done.finish_reason
        done = await _timed(
            times["tool turn"], tooled.generate("delete 42", memory=_memory())
        )
        assert done.finish_reason == "stop", done.finish_reason
        paused = await _timed(
            times["pause"], waiting.generate("delete 42", memory=_memory())
        )
        assert paused.finish_reason == "suspended", paused.finish_reason
        done = await _timed(
            times["resume"],
            waiting.approve_tool_call_generate(paused.run_id, resource_id="bench-user"),
        )
        assert done.finish_reason == "stop", done.finish_reason
        times["pause + resume"].append(times["pause"][-1] + times["resume"][-1])

    try:
        for _ in range(3):  # warm-up (connections, caches), not counted
            await once({name: [] for name in SETUPS})
        for _ in range(runs):
            await once(times)
    finally:
        await storage.aclose()
    return times


def _rows(backend: str, times: dict[str, list[float]]) -> list[Row]:
    base = statistics.median(times["plain turn"])
    rows = []
    for name in SETUPS:
        ordered = sorted(times[name])
        median = statistics.median(ordered)
        p95 = ordered[int(0.95 * (len(ordered) - 1))]
        rows.append(Row(backend, name, len(ordered), median, p95, median / base))
    return rows


def _drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def _run(runs: int, tmp: str) -> list[Row]:
    dsn = os.environ.get(DSN_VARIABLE)
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    backends: list[tuple[str, Callable[[], MemoryStorage]]] = [
        ("sqlite file", lambda: SqliteStorage(os.path.join(tmp, "m.db"))),
    ]
    if dsn:
        backends.append(("postgres", lambda: PostgresStorage(dsn, schema_name=schema)))
    rows: list[Row] = []
    try:
        for backend, make in backends:
            rows += _rows(backend, await _measure(make, runs))
    finally:
        if dsn:
            await trio.to_thread.run_sync(_drop_schema, dsn, schema)
    return rows


def _added(rows: Sequence[Row], backend: str) -> str:
    by = {r.setup: r for r in rows if r.backend == backend}
    plain, tooled, both = by["plain turn"], by["tool turn"], by["pause + resume"]
    added = both.ms - tooled.ms
    return (
        f"{backend}: a pause and a resume add {added:+.2f} ms to the same tool "
        f"turn run straight through ({both.ms / tooled.ms:.2f}x it; "
        f"{added / plain.ms:+.2f} plain turns)"
    )


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=200, help="runs of each setup")
    args = parser.parse_args(argv)
    runs = 3 if args.quick else args.runs
    with tempfile.TemporaryDirectory() as tmp:
        rows = trio.run(_run, runs, tmp)
    print(
        f"{'backend':<13}{'setup':<16}{'runs':>6}{'ms':>9}{'p95 ms':>9}{'vs plain':>10}"
    )
    for r in rows:
        print(
            f"{r.backend:<13}{r.setup:<16}{r.runs:>6}{r.ms:>9.2f}{r.p95_ms:>9.2f}"
            f"{r.vs_plain:>9.2f}x"
        )
    for backend in dict.fromkeys(r.backend for r in rows):
        print(_added(rows, backend))
    if not os.environ.get(DSN_VARIABLE):
        print(f"(no PostgreSQL rows: {DSN_VARIABLE} is not set)")
    return rows


if __name__ == "__main__":
    main()
