"""What a durable run costs, and how fast one goes on after its process dies.

1. **Checkpoints.** A run of ``--steps`` tool steps and an answer, through
   ``agent.generate`` with memory, without ``durable`` (the baseline, in the
   same run, interleaved) and with ``durable=True``, on a SQLite file and on
   PostgreSQL: the added milliseconds per step (a durable step writes its
   checkpoint, the model's answer, each tool's start and outcome).
2. **Kill to first chunk.** A child process runs a durable run (lease
   ``--lease`` s) into a tool that never returns and is killed (``kill -9``);
   this process watches with ``adopt_lapsed_runs`` (as ``procession serve``
   does) and takes the run over. Printed: kill → first chunk of the redone
   attempt, and lease lapse → first chunk (goal: under 100 ms).
3. **100 takeovers.** One run of 100 steps is crashed in every step
   (``procession.testing.crash_run``: as ``kill -9``, the lease lapsed at
   once) and taken over each time; what a follower reading every process's
   stream keeps (each ``step-retry`` withdrawing its step) is compared, chunk by
   chunk, with the same run without crashes: chunks lost and duplicated (goal:
   0), and the time per takeover.

Not part of the test suite; a smoke test runs ``--quick``.

    python benchmarks/durable.py          # 5 rounds; 5 kills; 100 takeovers
    python benchmarks/durable.py --quick  # tiny, to check it runs

PostgreSQL rows need ``PROCESSION_TEST_POSTGRES_DSN`` (``bash .ci/pg --
python benchmarks/durable.py`` starts a private server); without it they are
left out, and the table says so.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio

from procession import Agent, tool
from procession.memory import Memory, PostgresStorage, RunRecord, SqliteStorage
from procession.runtime import Durable, adopt_lapsed_runs
from procession.testing import ScriptedModel, crash_run, text_turn, tool_call_turn

DSN_VARIABLE = "PROCESSION_TEST_POSTGRES_DSN"
THREAD = {"thread": "t-1", "resource": "bench"}


@attrs.frozen
class Query:
    q: str


@attrs.frozen
class CheckpointRow:
    storage: str
    steps: int
    plain_ms: float
    durable_ms: float

    @property
    def added_ms_per_step(self) -> float:
        return (self.durable_ms - self.plain_ms) / (self.steps + 1)


@attrs.frozen
class KillRow:
    lease_s: float
    kill_to_first_ms: float
    lapse_to_first_ms: float


@attrs.frozen
class TakeoverRow:
    takeovers: int
    lost: int
    duplicated: int
    ms_per_takeover: float


def _turns(steps: int) -> list[Any]:
    return [
        *(
            tool_call_turn("look", {"q": f"q{i}"}, tool_call_id=f"c{i}")
            for i in range(steps)
        ),
        text_turn("The answer, in a few words of text."),
    ]


def _agent(storage: Any, steps: int, durable: bool, lease_s: float = 10.0) -> Agent:
    @tool(idempotent=True)
    def look(args: Query) -> dict[str, str]:
        """Look something up."""
        return {"found": args.q}

    return Agent(
        id="bench",
        model=ScriptedModel(_turns(steps)),
        tools=[look],
        memory=Memory(storage=storage),
        durable=Durable(lease_s=lease_s) if durable else False,
        max_steps=steps + 2,
    )


# --- 1. checkpoints -------------------------------------------------------------


async def _checkpoints(
    name: str, make: Callable[[], Any], steps: int, rounds: int
) -> CheckpointRow:
    storage = make()
    await storage.migrate()
    times: dict[bool, list[float]] = {False: [], True: []}
    try:
        for _ in range(rounds + 1):  # the first round warms up
            for durable in (False, True):
                agent = _agent(storage, steps, durable)
                ids = {"thread": uuid.uuid4().hex, "resource": "bench"}
                start = time.perf_counter()
                result = await agent.generate("go", memory=ids)
                times[durable].append((time.perf_counter() - start) * 1e3)
                assert result.finish_reason == "stop", result.finish_reason
    finally:
        await storage.aclose()
    plain, durable_ = (
        sorted(times[d][1:])[len(times[d][1:]) // 2] for d in (False, True)
    )
    return CheckpointRow(name, steps, plain, durable_)


# --- 2. kill -9 to first chunk ----------------------------------------------------


def _store(argv: Sequence[str]) -> Any:
    if argv[0].startswith("postgresql://"):
        return PostgresStorage(argv[0], schema_name=argv[1])
    return SqliteStorage(argv[0])


async def _child(store: list[str], lease_s: float, marker: str) -> None:
    """The process that dies: its run's one tool never returns."""

    @tool
    async def hang(args: Query) -> str:
        """Never returns."""
        await trio.Path(marker).write_text(args.q)
        await trio.sleep_forever()

    agent = Agent(
        id="victim",
        model=ScriptedModel([tool_call_turn("hang", {"q": "x"}), text_turn("after")]),
        tools=[hang],
        memory=Memory(storage=_store(store)),
        durable=Durable(lease_s=lease_s),
    )
    async with agent.stream("go", memory=THREAD) as stream:
        async for _chunk in stream:
            pass


async def _kill_once(store: list[str], lease_s: float, tmp: str) -> KillRow:
    marker = os.path.join(tmp, f"{uuid.uuid4().hex}.started")
    child = await trio.lowlevel.open_process(
        [sys.executable, __file__, "--child", str(lease_s), marker, *store]
    )
    storage = _store(store)

    @tool
    async def hang(args: Query) -> str:
        """Returns at once here."""
        return "ok"

    taker = Agent(
        id="victim",
        model=ScriptedModel([text_turn("after")]),
        tools=[hang],
        memory=Memory(storage=storage),
        durable=Durable(lease_s=lease_s),
    )
    first: list[float] = []
    lease_until: list[dt.datetime] = []

    async def serve(agent: Agent, record: RunRecord) -> None:
        assert record.lease_until is not None
        lease_until.append(record.lease_until)
        async with agent.take_over(record) as stream:
            async for _chunk in stream:
                if not first:
                    first.append(time.time())
        done.set()

    done = trio.Event()
    try:
        with trio.fail_after(60):
            # (another process writes it: no trio.Event can say so)
            while not await trio.Path(marker).exists():  # noqa: ASYNC110
                await trio.sleep(0.01)
            await trio.sleep(0.05)  # the tool's start is recorded
            async with trio.open_nursery() as nursery:
                await nursery.start(adopt_lapsed_runs, [taker], serve)
                killed = time.time()
                child.send_signal(signal.SIGKILL)
                await done.wait()
                nursery.cancel_scope.cancel()
    finally:
        child.kill()
        await child.wait()
        await storage.aclose()
    lapse = lease_until[0].timestamp()
    return KillRow(lease_s, (first[0] - killed) * 1e3, (first[0] - lapse) * 1e3)


# --- 3. takeovers -------------------------------------------------------------------


def _kept(chunks: Sequence[Any]) -> list[str]:
    """A follower's view: the chunks kept once every ``step-retry`` withdrew
    its step and after, as comparable strings."""
    kept: list[tuple[int, str]] = []
    step = -1
    for chunk in chunks:
        if chunk.type == "step-retry":
            kept = [(s, c) for s, c in kept if s < chunk.payload.step_number]
            step = chunk.payload.step_number - 1
            continue
        if chunk.type == "step-start":
            step += 1
        if chunk.type in ("text-delta", "tool-call", "tool-result", "finish"):
            payload = chunk.payload
            key = getattr(payload, "text", None) or getattr(payload, "tool_call_id", "")
            kept.append((step, f"{chunk.type}:{key}"))
    return [c for _s, c in kept]


async def _takeovers(steps: int, tmp: str) -> TakeoverRow:
    db = os.path.join(tmp, f"{uuid.uuid4().hex}.db")
    reference_storage = SqliteStorage(os.path.join(tmp, "reference.db"))
    reference: list[Any] = []
    async with _agent(reference_storage, steps, True).stream(
        "go", memory=THREAD
    ) as stream:
        reference = [c async for c in stream]
    await reference_storage.aclose()

    seen: list[Any] = []
    storages: list[Any] = []
    takeovers = 0
    elapsed = 0.0
    storage = SqliteStorage(db)
    storages.append(storage)
    agent = _agent(storage, steps, True, lease_s=30)
    opening = agent.stream("go", memory=THREAD)
    try:
        while True:
            async with opening as stream:
                async for chunk in stream:
                    seen.append(chunk)
                    # Crash at each step's model answer, once per step.
                    if chunk.type == "tool-call" and takeovers < steps:
                        await crash_run(stream)
                        break
                result = await stream.result()
            if result.finish_reason != "moved":
                break
            start = time.perf_counter()
            takeovers += 1
            storage = SqliteStorage(db)
            storages.append(storage)
            agent = _agent(storage, steps, True, lease_s=30)
            (record,) = await agent.lapsed_runs()
            opening = agent.take_over(record)
            elapsed += time.perf_counter() - start
    finally:
        for s in storages:
            await s.aclose()
    want, got = _kept(reference), _kept(seen)
    lost = sum(1 for c in set(want) if got.count(c) < want.count(c))
    duplicated = sum(1 for c in set(got) if got.count(c) > want.count(c))
    return TakeoverRow(takeovers, lost, duplicated, elapsed / max(1, takeovers) * 1e3)


# --- the table ------------------------------------------------------------------------


def _drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def _run(args: argparse.Namespace, tmp: str) -> list[Any]:
    dsn = os.environ.get(DSN_VARIABLE)
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    steps, rounds, kills, takeovers = (
        (2, 1, 1, 3) if args.quick else (args.steps, args.rounds, args.kills, 100)
    )
    rows: list[Any] = []
    try:
        rows.append(
            await _checkpoints(
                "sqlite file",
                lambda: SqliteStorage(os.path.join(tmp, "checkpoints.db")),
                steps,
                rounds,
            )
        )
        if dsn:
            rows.append(
                await _checkpoints(
                    "postgres",
                    lambda: PostgresStorage(dsn, schema_name=schema),
                    steps,
                    rounds,
                )
            )
        stores = [[os.path.join(tmp, "kills.db")]]
        if dsn:
            stores.append([dsn, schema])
        for store in stores:
            for _ in range(kills):
                rows.append(await _kill_once(store, args.lease, tmp))
        rows.append(await _takeovers(takeovers, tmp))
    finally:
        if dsn:
            await trio.to_thread.run_sync(_drop_schema, dsn, schema)
    return rows


def main(argv: Sequence[str] | None = None) -> list[Any]:
    described = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    described.add_argument("--quick", action="store_true")
    described.add_argument("--rounds", type=int, default=5)
    described.add_argument("--steps", type=int, default=5)
    described.add_argument("--kills", type=int, default=5)
    described.add_argument("--lease", type=float, default=1.0)
    args = described.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rows = trio.run(_run, args, tmp)
    print(
        f"{'checkpoints':<14}{'steps':>6}{'plain ms':>10}{'durable ms':>12}"
        f"{'added ms/step':>15}"
    )
    for r in rows:
        if isinstance(r, CheckpointRow):
            print(
                f"{r.storage:<14}{r.steps:>6}{r.plain_ms:>10.2f}{r.durable_ms:>12.2f}"
                f"{r.added_ms_per_step:>+15.2f}"
            )
    kills = [r for r in rows if isinstance(r, KillRow)]
    print(
        f"\n{'kill -9':<14}{'lease s':>8}{'kill->first ms':>16}{'lapse->first ms':>17}"
    )
    for r in kills:
        print(
            f"{'':<14}{r.lease_s:>8.2f}{r.kill_to_first_ms:>16.1f}{r.lapse_to_first_ms:>17.1f}"
        )
    over = sorted(r.lapse_to_first_ms for r in kills)
    for r in rows:
        if isinstance(r, TakeoverRow):
            print(
                f"\ntakeovers {r.takeovers}: chunks lost {r.lost}, duplicated "
                f"{r.duplicated}; {r.ms_per_takeover:.1f} ms per takeover"
            )
            summary_takeovers = r
    if not os.environ.get(DSN_VARIABLE):
        print(f"(no PostgreSQL rows: {DSN_VARIABLE} is not set)")
    print(
        f"summary: lease lapse -> first chunk median {over[len(over) // 2]:.1f} ms "
        f"(goal < 100), max {over[-1]:.1f} ms; {summary_takeovers.takeovers} takeovers "
        f"lost {summary_takeovers.lost} and duplicated {summary_takeovers.duplicated} "
        f"chunks (goal 0)"
    )
    return rows


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        lease, marker, *store = sys.argv[2:]
        trio.run(_child, store, float(lease), marker)
    else:
        main()
