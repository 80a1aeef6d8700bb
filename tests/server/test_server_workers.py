"""``procession serve --workers N`` (issue 23 §3), with real processes on a
real socket: bad values refused by name; the in-process resume bus refused;
two workers both serving streams without a bus; a cancel reaching the other
worker is a 404 that says why; the concurrent-runs limit per worker; runs on
one thread taking turns across workers (memory's lease); SIGTERM to the
parent stopping every worker; a worker outliving a killed parent by < 1 s."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from procession._cli import main
from procession.server import GC_THRESHOLD

HERE = Path(__file__).resolve().parent
TARGET = str(HERE / "workers_target.py")
PID = re.compile(r"pid=(\d+)")


def test_workers_takes_a_count_or_auto(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("0", "x", "-1", "1.5"):
        assert main(["serve", "--workers", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert f"--workers takes a count >= 1 or 'auto', got {bad!r}" in err


def test_resume_on_the_in_process_bus_is_refused_with_workers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", f"{TARGET}:resumable", "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "--workers 2 cannot serve create_app(resume=True) on the in-process" in err
    assert "--bus redis://" in err


class _Server:
    def __init__(self, process: subprocess.Popen[str], base: str, pids: list[int]):
        self.process = process
        self.base = base
        self.pids = pids


@contextmanager
def _serving(tmp_path: Path, limit: int) -> Iterator[_Server]:
    """``procession serve workers_target.py:app --workers 2`` on a free port,
    each worker running at most ``limit`` runs."""
    env = {
        **os.environ,
        "PROCESSION_TEST_WORKERS_DB": str(tmp_path / "memory.db"),
        "PROCESSION_TEST_WORKERS_LIMIT": str(limit),
    }
    command = [sys.executable, "-m", "procession", "serve", f"{TARGET}:app"]
    process = subprocess.Popen(
        [*command, "--workers", "2", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "2 workers: pids" in line, line
        base = line.split(" on ")[1].split()[0]
        pids = [int(p) for p in line.split("pids ")[1].split(")")[0].split()]
        yield _Server(process, base, pids)
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=15)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[_Server]:
    with _serving(tmp_path, limit=256) as server:
        yield server


@pytest.fixture
def one_run_each(tmp_path: Path) -> Iterator[_Server]:
    with _serving(tmp_path, limit=1) as server:
        yield server


def _body(text: str, thread: str | None = None, **extra: Any) -> dict[str, Any]:
    """A stream request; memory is on, so on a thread of its own unless
    ``thread`` names one."""
    thread = thread or f"t-{next(_THREADS)}"
    return {"messages": text, "memory": {"thread": thread, "resource": "u"}, **extra}


_THREADS = itertools.count()


class _Deltas:
    """A streamed response read off a plain socket (one connection per
    request: a kept-alive one would stay with one worker)."""

    def __init__(self, sock: trio.SocketStream) -> None:
        self._sock = sock
        self.seen = b""

    async def next(self) -> str:
        """The text of the next ``pid=...`` delta (StopAsyncIteration at the
        end of the response: the last chunk, or the whole of a sized body)."""
        while True:
            match = PID_DELTA.search(self.seen)
            if match is not None:
                self.seen = self.seen[match.end() :]
                return match[1].decode()
            if self.seen.endswith(b"\r\n0\r\n\r\n") or self._sized_body_in():
                raise StopAsyncIteration
            data = await self._sock.receive_some(65536)
            if not data:
                raise StopAsyncIteration
            self.seen += data

    def _sized_body_in(self) -> bool:
        head, sep, body = self.seen.partition(b"\r\n\r\n")
        size = re.search(rb"content-length: (\d+)", head)
        return bool(sep) and size is not None and len(body) >= int(size[1])

    async def rest(self) -> list[str]:
        out = []
        try:
            while True:
                out.append(await self.next())
        except StopAsyncIteration:
            return out


PID_DELTA = re.compile(rb'"text":"(pid=[^"]*)"')


@asynccontextmanager
async def _stream(
    base: str, body: dict[str, Any]
) -> AsyncIterator[tuple[int, _Deltas]]:
    """A Mastra stream: its status and its text deltas."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    payload = json.dumps(body).encode()
    async with await trio.open_tcp_stream(host, int(port)) as sock:
        await sock.send_all(
            b"POST /api/agents/who/stream HTTP/1.1\r\nhost: x\r\n"
            b"connection: close\r\ncontent-type: application/json\r\n"
            b"content-length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload
        )
        deltas = _Deltas(sock)
        while b"\r\n" not in deltas.seen:
            deltas.seen += await sock.receive_some(65536)
        status = int(deltas.seen.split(b" ", 2)[1])
        yield status, deltas


async def _answer(base: str, body: dict[str, Any]) -> str:
    async with _stream(base, body) as (status, deltas):
        assert status == 200, deltas.seen
        return "".join(await deltas.rest())


async def test_two_workers_each_serve_streams_without_a_bus(workers: _Server) -> None:
    # Which worker accepts a connection is the kernel's race: requests go in
    # rounds of four at once (one sequential request after another could
    # each time find the same worker first, as it once did a hundred times).
    seen: set[int] = set()

    async def one() -> None:
        answer = await _answer(workers.base, _body("hi"))
        match = PID.search(answer)
        assert match is not None, answer
        seen.add(int(match[1]))

    for _ in range(50):
        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(one)
        if len(seen) == 2:
            break
    assert seen == set(workers.pids)


def test_each_worker_tunes_its_collector_as_the_parent_was_told(
    workers: _Server,
) -> None:
    for pid in workers.pids:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        at = argv.index(b"--gc-threshold")
        assert argv[at + 1] == str(GC_THRESHOLD).encode(), argv


async def test_a_cancel_on_the_other_worker_is_a_404_that_says_why(
    workers: _Server,
) -> None:
    """Cancels on new connections land on either worker: the other one
    answers 404 naming itself and the way across (--bus); the run's own
    cancels it."""
    refused: list[str] = []
    for trial in range(10):
        run_id = f"r-slow-{trial}"
        async with _stream(workers.base, _body("slow", runId=run_id)) as (_s, deltas):
            owner = PID.search(await deltas.next())
            assert owner is not None
            for _ in range(40):
                answer = httpx2.post(
                    f"{workers.base}/api/agents/who/runs/{run_id}/cancel", timeout=10
                )
                if answer.status_code != 404:
                    break
                refused.append(answer.json()["error"])
            assert answer.status_code == 200, answer.text
            rest = await deltas.rest()
            assert len(rest) < 199  # cancelled, by its own worker
        if refused:
            break
    assert refused, "no cancel reached the other worker"
    assert owner is not None
    other_pid = ({*workers.pids} - {int(owner[1])}).pop()
    assert (
        f"no run {run_id!r} is running in this worker (one of 2, pid {other_pid})"
        in refused[0]
    )
    assert "serve with --bus to cancel across workers" in refused[0]


async def test_the_limit_on_concurrent_runs_is_per_worker(
    one_run_each: _Server,
) -> None:
    """``max_concurrent_runs=1``: two workers run two at once, never three."""
    held: list[Any] = []
    running: set[int] = set()
    try:
        for _ in range(40):
            if len(running) == 2:
                break
            opened = _stream(one_run_each.base, _body("slow"))
            status, deltas = await opened.__aenter__()
            if status != 200:
                await opened.__aexit__(None, None, None)
                continue
            held.append(opened)
            pid = PID.search(await deltas.next())
            assert pid is not None
            running.add(int(pid[1]))
        assert running == set(one_run_each.pids)
        for _ in range(6):
            async with _stream(one_run_each.base, _body("hi")) as (status, refused):
                assert status == 503, refused.seen[:300]
                await refused.rest()
                assert b"the server is running its limit of 1 runs" in refused.seen
    finally:
        for opened in held:
            await opened.__aexit__(None, None, None)


async def test_runs_on_one_thread_take_turns_across_workers(workers: _Server) -> None:
    """The second run on a thread, on the other worker, waits for the first
    to save its turn and loads it (saw=2), as in one process."""
    across = 0
    for trial in range(20):
        thread = f"thread-{trial}"
        async with _stream(workers.base, _body("hold", thread)) as (status, held):
            assert status == 200
            first = await held.next()  # its run holds the thread now
            second = await _answer(workers.base, _body("next", thread))
            rest = await held.rest()
        assert "saw=1" in first
        assert rest == []
        assert "saw=2" in second, (first, second)
        pids = PID.findall(first + second)
        if pids[0] != pids[1]:
            across += 1
            if across == 2:
                break
    assert across == 2, "the two runs never landed on different workers"


def _state(pid: int) -> str | None:
    """A process's state letter (``Z`` for a zombie), None when gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return None
    return status.split("State:")[1].split()[0]


def _wait_gone(pids: list[int], within_s: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < within_s:
        if all(_state(pid) in (None, "Z") for pid in pids):
            return time.monotonic() - start
        time.sleep(0.02)
    raise AssertionError(f"workers {pids} still running after {within_s} s")


def test_sigterm_to_the_parent_stops_every_worker(workers: _Server) -> None:
    with httpx2.Client(timeout=10) as client:
        assert client.get(f"{workers.base}/api/agents").status_code == 200
    workers.process.send_signal(signal.SIGTERM)
    workers.process.wait(timeout=5.0 + 1.0)  # the graceful timeout + 1 s
    assert workers.process.returncode == 0
    _wait_gone(workers.pids, 0.5)


def test_a_worker_whose_parent_is_killed_exits_within_a_second(
    workers: _Server,
) -> None:
    workers.process.kill()  # SIGKILL: no chance to pass anything on
    workers.process.wait(timeout=5)
    assert _wait_gone(workers.pids, 1.0) < 1.0
