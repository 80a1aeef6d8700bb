"""The paced workload's C load client (``benchmarks/_paced_client.c``, run by
``server_load.py``) against scripted servers: what it counts, how it reads
an answer split anywhere, and the streams-per-core search it feeds."""

from __future__ import annotations

import argparse
import json
import pathlib
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import attrs
import pytest

from tests.benchmark_helpers import loaded

PATH = "/api/agents/load/stream"
START = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def _frame(kind: str) -> bytes:
    return b'data: {"type":"%s","payload":{"id":"t","text":"x "}}\n\n' % kind.encode()


DELTA = _chunk(_frame("text-delta"))
TAIL = _chunk(_frame("text-end") + _frame("finish") + b"data: [DONE]\n\n")


def _read_request(conn: socket.socket, buffer: bytes) -> bytes | None:
    """The bytes after one request (headers and body), or None at EOF."""
    while b"\r\n\r\n" not in buffer:
        data = conn.recv(65536)
        if not data:
            return None
        buffer += data
    header, _, rest = buffer.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in header.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(rest) < length:
        data = conn.recv(65536)
        if not data:
            return None
        rest += data
    return rest[length:]


Handler = Callable[[socket.socket, int], None]


@contextmanager
def serving(handler: Handler) -> Iterator[int]:
    """A server on a thread calling ``handler(conn, i)`` on a thread of its
    own for its i-th connection; yields its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    port: int = listener.getsockname()[1]
    stop = threading.Event()
    workers: list[threading.Thread] = []

    def accept() -> None:
        i = 0
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(30)

            def handle(conn: socket.socket = conn, i: int = i) -> None:
                with conn:
                    handler(conn, i)

            worker = threading.Thread(target=handle, daemon=True)
            worker.start()
            workers.append(worker)
            i += 1

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield port
    finally:
        stop.set()
        acceptor.join()
        for worker in workers:
            worker.join(timeout=30)
        listener.close()


def _binary(module: ModuleType) -> pathlib.Path:
    found = module.compiled_client()
    if not isinstance(found, pathlib.Path):
        pytest.skip(f"the C client is not built here: {found}")
    return found


def _run(
    binary: pathlib.Path, port: int, connections: int, seconds: float
) -> dict[str, Any]:
    done = subprocess.run(
        [str(binary), str(port), PATH, str(connections), str(seconds), "{}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_c_client_reads_split_and_bunched_deltas() -> None:
    """Each answer: a delta; 60 + 60 ms later the rest of a second delta cut
    inside ``"text-delta"`` with two more in the same write; the chunked
    terminator cut in two, 30 ms apart. Every delta is counted once, the
    two bunched ones gap 0, and the next request waits for the whole end."""
    requests = [0]

    def answers(conn: socket.socket, _i: int) -> None:
        buffer = b""
        cut = DELTA.index(b"text-delta") + 4
        while (rest := _read_request(conn, buffer)) is not None:
            buffer = rest
            requests[0] += 1
            conn.sendall(START + DELTA)
            time.sleep(0.06)
            conn.sendall(DELTA[:cut])
            time.sleep(0.06)
            conn.sendall(DELTA[cut:] + DELTA + DELTA + TAIL + b"0\r")
            time.sleep(0.03)
            conn.sendall(b"\n\r\n")

    with loaded("server_load") as module:
        binary = _binary(module)
        assert module.compiled_client() == binary  # cached, not rebuilt
        with serving(answers) as port:
            result = _run(binary, port, 1, 0.5)
    assert result["errors"] == 0
    assert result["requests"] == requests[0] >= 2
    assert result["chunks"] == 4 * result["requests"]
    assert result["peak"] == 1
    assert result["open"] == 0
    # Per answer: the second delta's gap (two sleeps), then two zeros.
    assert result["gaps"] >= 3
    assert result["gaps"] % 3 == 0
    assert result["gap_p50_ms"] == 0
    assert 60 <= result["gap_p99_ms"] < 1000
    assert result["seconds"] >= 0.5
    assert 0.5 * result["seconds"] < result["stream_s"] <= result["seconds"]


def test_the_c_client_counts_a_cut_answer_and_a_refusal() -> None:
    requests = [0]

    def fails(conn: socket.socket, i: int) -> None:
        if _read_request(conn, b"") is None:
            return
        requests[0] += 1
        if i == 0:
            conn.sendall(START + DELTA)  # then the connection ends mid-answer
        else:
            conn.sendall(
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n"
            )
            conn.recv(1)  # until the client gives up on it

    with loaded("server_load") as module:
        binary = _binary(module)
        with serving(fails) as port:
            result = _run(binary, port, 2, 0.5)
    assert requests[0] == 2
    assert result["errors"] == 2
    assert (result["requests"], result["chunks"], result["open"]) == (0, 1, 0)
    assert result["gaps"] == 0


def test_without_a_c_compiler_the_trio_client_makes_the_paced_load(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no cc, gcc or clang there
    with loaded("server_load") as module:
        binary, said = module.paced_client("c")
        assert binary is None
        assert "no C compiler (cc, gcc, clang) on PATH" in said
        assert "trio client" in said
        assert module.paced_client("trio") == (
            None,
            "# paced load: this script's trio client (--paced-client trio)",
        )


def _steps(module: ModuleType, most_held: int, **search: int) -> list[str]:
    """The search's steps (``25+``: 25 streams held) on a server that holds
    up to ``most_held`` streams."""

    def measure(n: int) -> object:
        return module.Step(n, 1.0, 50, 1.0, 1.0, 1.0, 20.0, "d" * (n > most_held))

    options = {"start": 25, "most": 6400, "bisections": 3, "budget_s": 1e9} | search
    steps = module.search_streams(measure, **options)
    return [f"{s.streams}{'+' if s.held else '-'}" for s in steps]


def test_the_streams_search_doubles_then_bisects() -> None:
    with loaded("server_load") as module:
        found = _steps(module, 137)
        assert found == ["25+", "50+", "100+", "200-", "150-", "125+", "137+"]
        # Not even the first count held: bisect down from it.
        assert _steps(module, 10) == ["25-", "12-", "6+", "9+"]
        assert _steps(module, 10**6, most=100) == ["25+", "50+", "100+"]
        assert _steps(module, 137, bisections=0) == ["25+", "50+", "100+", "200-"]
        clock = iter(range(0, 1000, 10))  # each step takes 10 s
        found = module.search_streams(
            lambda n: module.Step(n, 1.0, 50, 1.0, 1.0, 1.0, 20.0, ""),
            start=25,
            most=6400,
            bisections=3,
            budget_s=25,
            clock=lambda: next(clock),
        )
        assert [s.streams for s in found] == [25, 50, 100]
        assert module.largest_held(found).streams == 100
        assert module.largest_held([]) is None


def test_streams_per_core_counts_streams_at_the_full_pace() -> None:
    with loaded("server_load") as module:
        # 400 streams open for the 10 s of the run, each getting a delta every
        # 20 ms, the server using 0.8 of a core: 500 streams per core.
        step = module.Step(400, 12.0, 200_000, 4000.0, 8.0, 10.0, 20.0, "")
        assert (step.rate, step.cpu_share) == (50, pytest.approx(0.8))
        assert step.per_core == pytest.approx(500)
        # The same streams slowed to a delta every 40 ms count for half.
        slowed = attrs.evolve(step, chunks=100_000)
        assert (slowed.rate, slowed.per_core) == (25, pytest.approx(250))


@pytest.mark.parametrize(
    ("result", "why"),
    [
        ({}, ""),
        ({"late_p99_ms": 50.0}, "d"),
        ({"gaps": 0}, "d"),
        ({"chunks": 440}, "r"),  # 44 deltas/s a stream: under 90% of 50 (--min-rate)
        ({"errors": 1}, "e"),
        ({"open": 2}, "e"),
        ({"late_p99_ms": 80.0, "chunks": 100, "errors": 3}, "dre"),
    ],
)
def test_a_step_holds_at_the_pace_with_a_p99_delay_under_the_bound(
    monkeypatch: pytest.MonkeyPatch, result: dict[str, float], why: str
) -> None:
    """Held: p99 (gap - pace) < 50 ms, a stream got >= 45 deltas/s (90% of
    one every 20 ms), no connection failed and no answer was cut off."""
    args = argparse.Namespace(
        per_core_seconds=4.0,
        paced_chunks=100,
        pace_ms=20.0,
        max_delay_ms=50.0,
        min_rate=0.9,
    )
    asked = []

    def own_load(*call: object) -> dict[str, float]:
        asked.append(call[1:])
        # 10 streams for 1 s: 500 deltas at the pace.
        measured = {"gaps": 400, "late_p99_ms": 49.9, "chunks": 500}
        measured |= {"stream_s": 10.0, "errors": 0, "open": 0}
        return measured | {"cpu_s": 0.5, "seconds": 1.0} | result

    with loaded("server_load") as module:
        monkeypatch.setattr(module, "own_load", own_load)
        step = module.paced_step(None, 10, args, None)
    assert asked == [(10, 4.05, 100, 20.0, None)]  # the ramp: one batch of 50
    assert step.why == why
    assert step.held == (why == "")
