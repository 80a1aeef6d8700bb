"""Durable runs (issue 24): a run kept in storage from its start, checkpointed
at every step, that another process takes over when its own dies.

The crash is real: a child process runs the agent and is killed with
``SIGKILL`` while a tool runs; this process (or a "restarted" child) takes the
run over from the SQLite file or the PostgreSQL database they share."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from procession import (
    Agent,
    ConfigurationError,
    NoRunStorageError,
)
from procession.chunks import StepRetryChunk
from procession.memory import (
    Memory,
    RunLostError,
    RunRecord,
    SqliteStorage,
)
from procession.runtime import Durable, adopt_lapsed_runs
from procession.testing import (
    ScriptedModel,
    assert_run_shape,
    text_turn,
)

TARGET = pathlib.Path(__file__).with_name("durable_target.py")
_spec = importlib.util.spec_from_file_location("durable_target", TARGET)
assert _spec is not None
assert _spec.loader is not None
target = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(target)

THREAD = target.THREAD

# Leases are wall-clock times in the database, and SQLite works in threads: a
# virtual clock would jump past every lease while a thread is busy.
pytestmark = pytest.mark.procession_real_clock


def _dsn() -> str:
    dsn = os.environ.get("PROCESSION_TEST_POSTGRES_DSN")
    if not dsn:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but PROCESSION_TEST_POSTGRES_DSN is not set (.ci/pg)")
        pytest.skip("PROCESSION_TEST_POSTGRES_DSN is not set (bash .ci/pg -- ...)")
    return dsn


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> list[str]:
    """The store the processes share, as the target takes it on its command
    line."""
    if request.param == "sqlite":
        return [str(tmp_path / "runs.db")]
    return [_dsn(), f"t_{uuid.uuid4().hex[:12]}"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).parents[2])}


def _lines(ledger: pathlib.Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


async def _crash(store: list[str], ledger: pathlib.Path) -> str:
    """Run the target until its ``note`` tool's outcome is recorded and its
    ``fetch`` tool runs, then ``kill -9`` it; the run id."""
    out = ledger.with_name("crash.out")
    with out.open("wb") as output:
        child = await trio.lowlevel.open_process(
            [sys.executable, str(TARGET), "crash", *store, str(ledger)],
            stdout=output,
            stderr=output,
            env=_env(),
        )
    storage = _storage(store)
    try:
        with trio.fail_after(60):
            while not out.read_text().strip():  # noqa: ASYNC110 (another process)
                await trio.sleep(0.02)
            run_id: str = json.loads(out.read_text().splitlines()[0])["run_id"]
            while True:
                if child.poll() is not None:
                    raise AssertionError(out.read_text())
                records = await storage.tool_records(run_id)
                states = {r.tool_call_id: r.state for r in records}
                if states == {"c1": "done", "c2": "started"} and "fetch b" in _lines(
                    ledger
                ):
                    break
                await trio.sleep(0.02)
        child.send_signal(signal.SIGKILL)
    finally:
        await storage.aclose()
        child.kill()
        with trio.move_on_after(30):
            await child.wait()
    assert child.returncode == -signal.SIGKILL
    return run_id


async def _lapsed(agent: Agent, run_id: str) -> RunRecord:
    """The run as ``lapsed_runs`` lists it, once its lease has lapsed."""
    with trio.fail_after(15):
        while True:
            for record in await agent.lapsed_runs():
                if record.id == run_id:
                    return record
            await trio.sleep(0.05)


def _storage(store: list[str]) -> Any:
    storage: Any = target.storage(store)
    return storage


async def _close(agent: Agent) -> None:
    storage: Any = agent.run_storage
    await storage.aclose()


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
async def test_a_run_killed_mid_tool_goes_on_in_another_process(
    store: list[str], tmp_path: pathlib.Path, idempotent: bool
) -> None:
    ledger = tmp_path / "ledger.txt"
    run_id = await _crash(store, ledger)
    assert sorted(_lines(ledger)) == ["fetch b", "note a"]

    model = ScriptedModel([text_turn("All done.")])
    scribe = target.agent(_storage(store), str(ledger), model, idempotent=idempotent)
    try:
        record = await _lapsed(scribe, run_id)
        assert record.owner is not None
        assert str(os.getpid()) not in record.owner
        async with scribe.take_over(record) as stream:
            assert stream.run_id == run_id
            chunks = [c async for c in stream]
            result = await stream.result()
        storage: Any = scribe.run_storage
        saved = await storage.list_messages("t-1", "ada")
        after = await storage.get_run(run_id)
        tools = await storage.tool_records(run_id)
    finally:
        await _close(scribe)

    # It redoes step 0, the attempt that was cut off: first withdrawn for
    # whoever followed it, then replayed from its record (the model is asked
    # only for step 1).
    first = chunks[0]
    assert first.type == "step-retry"
    assert (first.payload.step_number, first.payload.reason) == (0, "takeover")
    assert first.payload.retry_count == 0  # a takeover uses no retry budget
    assert assert_run_shape(chunks) == "finish"
    assert all(c.run_id == run_id for c in chunks)
    assert len(model.calls) == 1
    assert result.finish_reason == "stop"
    assert result.text == "All done."

    # The recorded tool is not run again; the one cut off runs again only if
    # it says it may, else the model is told it was interrupted.
    results = {
        c.payload.tool_call_id: c.payload for c in chunks if c.type == "tool-result"
    }
    errors = {
        c.payload.tool_call_id: c.payload for c in chunks if c.type == "tool-error"
    }
    assert results["c1"].result == {"noted": "a"}
    if idempotent:
        assert sorted(_lines(ledger)) == ["fetch b", "fetch b", "note a"]
        assert results["c2"].result == {"page": "B"}
    else:
        assert sorted(_lines(ledger)) == ["fetch b", "note a"]
        assert "c2" not in results
        assert "interrupted" in str(errors["c2"].error)
        assert "interrupted" in repr(model.calls[0].prompt)

    # The turn is saved once: one user message, ids unique, the answer last.
    ids = [m.id for m in saved]
    assert len(ids) == len(set(ids))
    assert [m.role for m in saved].count("user") == 1
    assert saved[-1].role == "assistant"
    assert after is not None
    assert after.status == "ended"
    assert (after.lease_until, after.attempt) == (None, None)
    assert tools == []


async def test_a_restarted_process_adopts_its_lapsed_runs(
    tmp_path: pathlib.Path,
) -> None:
    store = [str(tmp_path / "runs.db")]
    ledger = tmp_path / "ledger.txt"
    run_id = await _crash(store, ledger)
    with trio.fail_after(120):
        done = await trio.run_process(
            [sys.executable, str(TARGET), "adopt", *store, str(ledger)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=_env(),
        )
    assert done.returncode == 0, done.stderr.decode()
    adopted = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert adopted["run_id"] == run_id
    assert adopted["text"] == "Adopted."
    assert adopted["types"][0] == "step-retry"
    assert adopted["types"][-1] == "finish"
    assert sorted(_lines(ledger)) == ["fetch b", "note a"]  # not idempotent


async def test_two_takers_of_one_run_one_wins(tmp_path: pathlib.Path) -> None:
    store = [str(tmp_path / "runs.db")]
    ledger = tmp_path / "ledger.txt"
    run_id = await _crash(store, ledger)
    takers = [
        target.agent(_storage(store), str(ledger), ScriptedModel([text_turn("ok")]))
        for _ in range(2)
    ]
    outcomes: list[str] = []

    async def take(agent: Agent, record: RunRecord) -> None:
        try:
            async with agent.take_over(record) as stream:
                async for _chunk in stream:
                    pass
                outcomes.append((await stream.result()).finish_reason or "")
        except RunLostError as exc:
            outcomes.append("lost" if run_id in str(exc) else repr(exc))

    try:
        records = [await _lapsed(a, run_id) for a in takers]
        async with trio.open_nursery() as nursery:
            for agent, record in zip(takers, records, strict=True):
                nursery.start_soon(take, agent, record)
    finally:
        for agent in takers:
            await _close(agent)
    assert sorted(outcomes) == ["lost", "stop"]
    assert sorted(_lines(ledger)) == ["fetch b", "note a"]


# --- in one process -------------------------------------------------------------


def _durable_agent(
    storage: Any, model: Any, tools: Sequence[Any] = (), lease_s: float = 10.0
) -> Agent:
    return Agent(
        id="scribe",
        model=model,
        tools=list(tools),
        memory=Memory(storage=storage),
        durable=Durable(lease_s=lease_s),
    )


class _Watched:
    """A model that calls ``before()`` ahead of each call of ``inner``."""

    provider = "test"
    model_id = "watched"

    def __init__(self, inner: ScriptedModel, before: Callable[[], Any]) -> None:
        self.inner = inner
        self.before = before

    @asynccontextmanager
    async def stream(self, request: Any) -> AsyncIterator[Any]:
        await self.before()
        async with self.inner.stream(request) as response:
            yield response


async def test_a_durable_run_is_kept_from_before_its_first_model_call(
    tmp_path: pathlib.Path,
) -> None:
    storage = SqliteStorage(str(tmp_path / "m.db"))
    seen: list[RunRecord | None] = []
    run_ids: list[str] = []

    async def before() -> None:
        seen.append(await storage.get_run(run_ids[0]))

    agent = _durable_agent(storage, _Watched(ScriptedModel([text_turn("hi")]), before))
    try:
        async with agent.stream(
            "hello", memory=THREAD, request_context={"tenant": "ada"}
        ) as s:
            run_ids.append(s.run_id)
            assert s.durable
            chunks = [c async for c in s]
        ended = await storage.get_run(run_ids[0])
    finally:
        await storage.aclose()
    assert [c.type for c in chunks][-1] == "finish"
    (record,) = seen
    assert record is not None
    assert (record.status, record.durable, record.agent_id) == (
        "running",
        True,
        "scribe",
    )
    assert (record.thread_id, record.resource_id) == ("t-1", "ada")
    assert record.owner is not None
    assert record.lease_until is not None
    assert record.snapshot is not None
    assert record.snapshot["checkpoint"]["stepNumber"] == 0
    assert record.snapshot["requestContext"]["tenant"] == "ada"
    assert "hello" in json.dumps(record.snapshot["messageList"])
    assert ended is not None
    assert ended.status == "ended"
    assert ended.lease_until is None


async def test_durable_needs_storage_that_other_processes_read() -> None:
    model = ScriptedModel([text_turn("hi")])
    with pytest.raises(NoRunStorageError, match=r"agent 'a' runs durable runs"):
        Agent(id="a", model=model).generate("hi", durable=True).close()
    in_memory = SqliteStorage(":memory:")
    agent = Agent(id="a", model=model, storage=in_memory, durable=True)
    with pytest.raises(ConfigurationError, match=r"in-memory SQLite database"):
        agent.generate("hi").close()
    assert model.calls == []
    with pytest.raises(ConfigurationError, match=r"durable must be True, False"):
        Agent(id="a", model=model, durable="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"lease_s must be a positive"):
        Durable(lease_s=0)
    await in_memory.aclose()


async def test_a_run_that_is_not_durable_keeps_nothing_in_run_storage(
    tmp_path: pathlib.Path,
) -> None:
    storage = SqliteStorage(str(tmp_path / "m.db"))
    agent = Agent(
        id="scribe",
        model=ScriptedModel([text_turn("hi")]),
        memory=Memory(storage=storage),
    )
    try:
        result = await agent.generate("hello", memory=THREAD)
        assert await storage.get_run(result.run_id) is None
    finally:
        await storage.aclose()


class _Gate:
    """A model call held until ``open`` is set; ``reached`` once one waits."""

    def __init__(self) -> None:
        self.reached = trio.Event()
        self.open = trio.Event()

    async def __call__(self) -> None:
        self.reached.set()
        await self.open.wait()


async def test_a_handed_over_run_ends_moved_and_another_process_takes_it_at_once(
    tmp_path: pathlib.Path,
) -> None:
    db = str(tmp_path / "m.db")
    gate = _Gate()
    first = _durable_agent(
        SqliteStorage(db), _Watched(ScriptedModel([text_turn("never")]), gate)
    )
    # A long lease: the taker does not wait for it to lapse.
    second = _durable_agent(
        SqliteStorage(db), ScriptedModel([text_turn("Answered elsewhere.")])
    )
    try:
        async with first.stream("hello", memory=THREAD) as stream:
            run_id = stream.run_id
            seen: list[Any] = []
            async with trio.open_nursery() as nursery:

                async def read() -> None:
                    seen.extend([c async for c in stream])

                nursery.start_soon(read)
                await gate.reached.wait()
                assert await stream.hand_over()
            result = await stream.result()
            assert not await stream.hand_over()  # nothing left to hand over
        with trio.fail_after(1):
            (record,) = await second.lapsed_runs()
        async with second.take_over(record) as taken:
            chunks = [c async for c in taken]
            answer = await taken.result()
    finally:
        await _close(first)
        await _close(second)
    assert record.id == run_id
    assert [c.type for c in seen] == ["start", "step-start"]
    assert result.finish_reason == "moved"
    retry = chunks[0]
    assert isinstance(retry, StepRetryChunk)
    assert retry.payload.reason == "takeover"
    assert assert_run_shape(seen, moved=True) == "moved"
    assert assert_run_shape(chunks) == "finish"
    # A follower that read the run across the takeover reads one run.
    assert assert_run_shape([*seen, *chunks]) == "finish"
    with pytest.raises(AssertionError, match=r"ends with finish"):
        assert_run_shape(seen)
    assert answer.text == "Answered elsewhere."
    assert answer.run_id == run_id


async def test_a_run_whose_lease_another_process_took_stops_writing(
    tmp_path: pathlib.Path,
) -> None:
    db = str(tmp_path / "m.db")
    gate = _Gate()
    storage = SqliteStorage(db)
    owner = _durable_agent(
        storage, _Watched(ScriptedModel([text_turn("never")]), gate), lease_s=0.3
    )
    taker = SqliteStorage(db)
    try:
        async with owner.stream("hello", memory=THREAD) as stream:
            run_id = stream.run_id
            async with trio.open_nursery() as nursery:
                chunks: list[Any] = []

                async def read() -> None:
                    chunks.extend([c async for c in stream])

                nursery.start_soon(read)
                await gate.reached.wait()
                # Another process: the owner's lease lapsed (as if its network
                # was cut), and it takes the run over.
                held = await taker.get_run(run_id)
                assert held is not None
                await taker.release_run(run_id, epoch=held.epoch)
                taken = await taker.take_over(
                    run_id, expected_epoch=held.epoch, owner="elsewhere", lease_s=60
                )
                assert taken is not None
                assert taken.epoch == held.epoch + 1
            result = await stream.result()
        after = await taker.get_run(run_id)
    finally:
        await storage.aclose()
        await taker.aclose()
    assert result.finish_reason == "moved"
    assert [c.type for c in chunks] == ["start", "step-start"]  # no terminal chunk
    # The run is the taker's: the lost owner ended nothing and wrote nothing.
    assert after is not None
    assert (after.status, after.owner, after.epoch) == (
        "running",
        "elsewhere",
        taken.epoch,
    )
    assert gate.open.is_set() is False


async def test_adopt_lapsed_runs_serves_each_lapsed_run_once(
    tmp_path: pathlib.Path,
) -> None:
    db = str(tmp_path / "m.db")
    gate = _Gate()
    first = _durable_agent(
        SqliteStorage(db), _Watched(ScriptedModel([text_turn("never")]), gate)
    )
    model = ScriptedModel([text_turn("one"), text_turn("two")])
    adopter = _durable_agent(SqliteStorage(db), model)
    served: list[str] = []
    finished = trio.Event()

    async def serve(agent: Agent, record: RunRecord) -> None:
        served.append(record.id)
        async with agent.take_over(record) as stream:
            async for _chunk in stream:
                pass
        finished.set()

    try:
        async with (
            first.stream("hello", memory=THREAD) as stream,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(stream.result)
            await gate.reached.wait()
            assert await stream.hand_over()
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await nursery.start(adopt_lapsed_runs, [adopter], serve)
                await finished.wait()
                await trio.sleep(0.2)  # a few more polls: nothing served twice
                nursery.cancel_scope.cancel()
    finally:
        await _close(first)
        await _close(adopter)
    assert served == [stream.run_id]
    assert len(model.calls) == 1
