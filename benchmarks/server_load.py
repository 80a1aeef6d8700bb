"""Load on the HTTP server, side by side in one run: ``procession serve`` (each
execution mode, 1 and N workers), Mastra 1.71's own server (``@mastra/deployer``
``createNodeServer``, node 22) and the floors (``_floors.py``: a bare hypercorn
trio app sending the same SSE bytes one ``send`` per frame and 16 frames per
``send``, and a raw trio socket server, one ``send_all`` per frame). Every
server runs in its own process(es); the load comes from another process:
``wrk`` (Debian's package) where it is installed, else this script's own
client. The paced workload has a client of its own in C (``_paced_client.c``:
epoll, one thread; compiled with ``cc -O2`` at run time into a temporary
directory, kept by the source's hash), which times every delta; where there
is no C compiler (or with ``--paced-client trio``) this script's trio client
does it, and says so: that client is itself the limit past a few hundred
streams. Server CPU is read from ``/proc/<pid>/stat`` (the server's
processes summed), memory from ``/proc/<pid>/status`` (VmRSS). Loopback
only; every run is bounded in time.

Workloads (the agent: 5 async pass-through output processors on a scripted
model, ``_served.py``; Mastra's the same, ``mastra/server.mjs``):

* (a) unpaced 200-delta answers at 50 and 1,000 connections: chunks/s and
  server CPU per chunk;
* (b) a paced model (a delta every 20 ms) with many live streams: server CPU
  per chunk; at the client, the p50/p99 *gap* between an answer's deltas
  (arrival to arrival, so ideally the pace) and the p99 *delay*, the gap
  minus the pace (how late a delta came); gaps are counted from the end of
  the client's ramp (50 connections every 50 ms) until the time is up;
* (c) one-chunk answers (``"ok"``): requests/s, server CPU per request;
* (d) memory: server RSS per open (paced) stream, and RSS after each of 5
  runs at 1,000 connections;
* (e) streams per core: the most paced streams a server holds with a p99
  delay under 50 ms (``--max-delay-ms``) and no failed connection (with
  ``--min-rate F`` also a stream getting F x 50 deltas a second), found by
  doubling from 25 streams while held, then bisecting 3 times
  (``--per-core-start``, ``-most``, ``-bisections``; ``--per-core-seconds``
  a step; no step starts past ``--per-core-budget`` seconds a server, 0:
  none); per core, at that count: the streams at the full pace (deltas the
  client got a second / 50) over the server's CPU share (its CPU seconds per
  wall second). The scripted model waits its 20 ms after its previous delta
  was taken, so a loaded server slows its streams instead of queueing
  deltas: a slowed stream counts for the deltas it got.

    python benchmarks/server_load.py                 # the tables (~30 min)
    python benchmarks/server_load.py --per-core-budget 0   # without (e)
    python benchmarks/server_load.py --quick         # tiny, to check it runs
    python benchmarks/server_load.py --rows procession-adaptive,hypercorn-one

Prints one table per workload with each row's ratio to the floors measured
in the same run, then ``summary:``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

# Run as a script, only benchmarks/ is on sys.path: add the repository root
# (ruff allows imports after a sys.path change).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._mastra import Mastra, find_mastra

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TICK = os.sysconf("SC_CLK_TCK")
MODES = ("adaptive", "fused", "actors")
FLOORS = ("hypercorn-one", "hypercorn-batched", "raw-trio")
PATH = "/api/agents/load/stream"
CLIENT_SOURCE = HERE / "_paced_client.c"
COMPILERS = ("cc", "gcc", "clang")


# --- servers ----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    out = [pid]
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return out
    for task in tasks:
        try:
            children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        except FileNotFoundError:
            continue
        for child in children:
            out += _tree(int(child))
    return out


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU of ``pids`` so far, in seconds."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICK


def rss_bytes(pids: Sequence[int]) -> int:
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            continue
        match = re.search(r"VmRSS:\s+(\d+) kB", status)
        total += int(match[1]) * 1024 if match else 0
    return total


@attrs.define
class Server:
    name: str
    process: subprocess.Popen[str]
    port: int
    pids: list[int] = attrs.field(factory=list)
    sizes: dict[int, int] = attrs.field(factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{PATH}"

    def cpu(self) -> float:
        return cpu_seconds(self.pids)

    def rss(self) -> int:
        return rss_bytes(self.pids)

    def answer_bytes(self, chunks: int) -> int:
        """The bytes of one whole ``chunks``-delta answer, headers and all."""
        if chunks not in self.sizes:
            self.sizes[chunks] = len(_request(self.port, _body(chunks)))
        return self.sizes[chunks]


def _command(
    name: str, port: int, mastra: Any
) -> tuple[list[str], dict[str, str], Path | None]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if name.startswith("procession-"):
        mode, _, workers = name.removeprefix("procession-").partition("-w")
        env["BENCH_MODE"] = mode
        argv = [
            sys.executable,
            "-m",
            "procession",
            "serve",
            "benchmarks/_served.py:app",
        ]
        argv += ["--port", str(port), "--workers", workers or "1"]
        return argv, env, ROOT
    if name in FLOORS:
        argv = [sys.executable, str(HERE / "_floors.py"), name, "--port", str(port)]
        return argv, env, ROOT
    params = {"port": port}
    return [str(mastra.node), "server.mjs", json.dumps(params)], env, mastra.root


@contextmanager
def running(name: str, mastra: Any, warm: int) -> Iterator[Server]:
    """The server ``name``, warmed up with ``warm`` requests, until the
    block ends."""
    port = _free_port()
    argv, env, cwd = _command(name, port, mastra)
    log = (Path(tempfile.gettempdir()) / f"server_load-{name}.log").open("w")
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=log,  # what a server said, if it failed
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith(("ready", "procession serve:")):
            raise RuntimeError(f"{name} did not start: {line!r}")
        server = Server(name, process, port)
        server.pids = _tree(process.pid)
        _warm(server, warm)
        yield server
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
        log.close()


def _body(chunks: int, pace_ms: float = 0.0) -> bytes:
    """A request for ``chunks`` deltas, ``pace_ms`` before each."""
    return json.dumps({"messages": f"chunks={chunks} pace={pace_ms:g}"}).encode()


def _request(port: int, body: bytes) -> bytes:
    """One whole answer (status line to the last chunk) on a connection of
    its own."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(
            f"POST {PATH} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
            f"content-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        seen = b""
        while not seen.endswith(b"0\r\n\r\n"):
            data = s.recv(65536)
            if not data:
                break
            seen += data
        return seen


def _warm(server: Server, requests: int) -> None:
    """A few requests before measuring (node's JIT, Python's caches)."""
    for attempt in range(100):  # node may print before it listens
        try:
            socket.create_connection(("127.0.0.1", server.port), timeout=30).close()
            break
        except ConnectionRefusedError:
            if attempt == 99:
                raise
            time.sleep(0.1)
    for _ in range(requests):
        _request(server.port, _body(200))


# --- load -------------------------------------------------------------------------

_LUA = """wrk.method = "POST"
wrk.body = '%s'
wrk.headers["Content-Type"] = "application/json"
"""


@attrs.frozen
class Load:
    requests: int
    seconds: float
    cpu_s: float
    errors: int
    rss_after: int


def settle(server: Server, limit_s: float = 30.0) -> None:
    """Until the server is idle (under 5% of a core over 0.3 s): what the
    last load left running (streams of clients that left) is not measured
    as the next load's."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        before = server.cpu()
        time.sleep(0.3)
        if server.cpu() - before < 0.015:
            return


def load(server: Server, connections: int, seconds: float, chunks: int) -> Load:
    """``connections`` clients POSTing for ``chunks``-delta answers for
    ``seconds``: ``wrk -t1`` where it is installed, else this script's
    client."""
    settle(server)
    if shutil.which("wrk") is not None:
        return wrk_load(server, connections, seconds, chunks)
    result = own_load(server, connections, seconds, chunks, 0.0)
    return Load(
        result["requests"],
        result["seconds"],
        result["cpu_s"],
        result["errors"],
        result["rss"],
    )


def wrk_load(server: Server, connections: int, seconds: float, chunks: int) -> Load:
    """``wrk -t1`` POSTing to the stream route; the requests completed."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(_LUA % _body(chunks).decode())
    cpu0 = server.cpu()
    try:
        done = subprocess.run(
            [
                "wrk",
                "-t1",
                f"-c{connections}",
                f"-d{max(1, math.ceil(seconds))}s",  # wrk takes whole seconds
                "--timeout",
                "30s",
                "-s",
                script.name,
                server.url,
            ],
            capture_output=True,
            text=True,
            timeout=seconds + 60,
            check=False,
        )
    finally:
        os.unlink(script.name)
    cpu = server.cpu() - cpu0
    out = done.stdout
    found = re.search(r"(\d+) requests in", out)
    read = re.search(r"([\d.]+)([KMG]?B) read", out)
    if found is None or read is None:
        raise RuntimeError(f"wrk said: {out[-500:]!r} {done.stderr[-500:]!r}")
    # What was read, in answers: the streams still open at the end count
    # for what they delivered (1,000 slow answers may not finish in time).
    scale = {"B": 1, "KB": 2**10, "MB": 2**20, "GB": 2**30}[read[2]]
    requests = round(float(read[1]) * scale / server.answer_bytes(chunks))
    match = re.search(r"in ([\d.]+)(m?s)", out)
    elapsed = float(match[1]) / (1000 if match[2] == "ms" else 1) if match else seconds
    errors = sum(
        int(n)
        for n in re.findall(r"(?:Non-2xx or 3xx responses|errors: .*?): (\d+)", out)
    )
    socket_errors = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out
    )
    if socket_errors:
        errors += sum(int(n) for n in socket_errors.groups())
    return Load(requests, elapsed, cpu, errors, server.rss())


def compiled_client() -> Path | str:
    """The C load client (``_paced_client.c``) compiled with ``cc -O2``
    into a temporary directory, once per source and compiler; or why not
    (no compiler, or it failed)."""
    compiler = next((shutil.which(c) for c in COMPILERS if shutil.which(c)), None)
    if compiler is None:
        return f"no C compiler ({', '.join(COMPILERS)}) on PATH"
    flags = ["-O2"]
    key = CLIENT_SOURCE.read_bytes() + " ".join([compiler, *flags]).encode()
    directory = Path(tempfile.gettempdir()) / "procession-bench-client"
    binary = directory / f"paced_client-{hashlib.sha256(key).hexdigest()[:16]}"
    if binary.exists():
        return binary
    directory.mkdir(exist_ok=True)
    partial = directory / f".{binary.name}.{os.getpid()}"  # then renamed: atomic
    done = subprocess.run(
        [compiler, *flags, "-o", str(partial), str(CLIENT_SOURCE)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        said = done.stderr.strip().splitlines() or ["(nothing)"]
        return f"{compiler} failed on {CLIENT_SOURCE.name}: {said[0]}"
    os.replace(partial, binary)
    return binary


def paced_client(choice: str) -> tuple[Path | None, str]:
    """The client of the paced workload (``c``: the C client, ``trio``: this
    script's own) as ``own_load`` takes it (``None``: the trio client), and
    a line saying which it is."""
    if choice == "trio":
        return None, "# paced load: this script's trio client (--paced-client trio)"
    found = compiled_client()
    if isinstance(found, Path):
        return found, f"# paced load: the C client ({found})"
    return None, (
        f"# {found}: the paced load falls back to this script's trio client, "
        "itself the limit past a few hundred streams"
    )


def own_load(
    server: Server,
    connections: int,
    seconds: float,
    chunks: int,
    pace_ms: float,
    binary: Path | None = None,
) -> dict[str, Any]:
    """A client in another process (the C one at ``binary``, else this
    script's trio client): ``connections`` streams kept open for
    ``seconds``; for each delta the gap since the answer's previous one
    (``gap_*``) and how late it came, the gap minus ``pace_ms``
    (``late_*``); the server's CPU and peak RSS meanwhile."""
    settle(server)
    cpu0 = server.cpu()
    body = _body(chunks, pace_ms).decode()
    argv = [str(server.port), str(connections), str(seconds), body]
    if binary is not None:
        argv = [str(binary), argv[0], PATH, *argv[1:]]
    else:
        argv = [sys.executable, __file__, "--client", *argv]
    client = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    peak = 0
    while client.poll() is None:  # the server's RSS while the streams are open
        peak = max(peak, server.rss())
        time.sleep(0.1)
    assert client.stdout is not None
    out = client.stdout.read()
    client.stdout.close()
    if client.returncode != 0:
        raise RuntimeError(f"the load client failed ({client.returncode})")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["late_p50_ms"] = result["gap_p50_ms"] - pace_ms
    result["late_p99_ms"] = result["gap_p99_ms"] - pace_ms
    result["cpu_s"] = server.cpu() - cpu0
    result["rss"] = server.rss()
    result["rss_peak"] = peak
    return result


async def _client(
    port: int, connections: int, seconds: float, body: bytes
) -> dict[str, Any]:
    request = (
        f"POST {PATH} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n".encode()
        + body
    )
    gaps: list[float] = []
    counts = {"chunks": 0, "requests": 0, "errors": 0, "open": 0, "peak": 0}
    deadline = trio.current_time() + seconds
    window = [deadline]  # gaps are recorded from the ramp's end to the deadline
    held = [0.0]  # the seconds answers were under way, summed

    async def one() -> None:
        try:
            await session()
        except (OSError, trio.BrokenResourceError):
            counts["errors"] += 1  # a reset connection: counted, not fatal

    async def session() -> None:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            while trio.current_time() < deadline:
                await stream.send_all(request)
                counts["open"] += 1
                counts["peak"] = max(counts["peak"], counts["open"])
                asked = trio.current_time()
                last = None
                tail = b""
                try:
                    while True:
                        data = await stream.receive_some(65536)
                        if not data:
                            counts["errors"] += 1
                            return
                        now = trio.current_time()
                        n = data.count(b'"text-delta"')
                        if n:
                            if window[0] <= now <= deadline:
                                if last is not None:
                                    gaps.append(now - last)
                                gaps.extend([0.0] * (n - 1))  # bunched: gap 0
                            last = now
                            counts["chunks"] += n
                        tail = (tail + data)[-32:]
                        if b"0\r\n\r\n" in tail and b"[DONE]" in tail:
                            counts["requests"] += 1
                            break
                finally:
                    counts["open"] -= 1
                    held[0] += trio.current_time() - asked

    started = trio.current_time()
    async with trio.open_nursery() as nursery:
        for i in range(connections):
            nursery.start_soon(one)
            if i % 50 == 49 and i + 1 < connections:
                await trio.sleep(0.05)  # ramp up: the accept queue is finite
        window[0] = trio.current_time()
    elapsed = trio.current_time() - started
    gaps.sort()

    def q(p: float) -> float:
        return gaps[min(len(gaps) - 1, int(p * len(gaps)))] * 1000 if gaps else 0.0

    return {
        **counts,
        "seconds": elapsed,
        "gaps": len(gaps),
        "gap_p50_ms": q(0.5),
        "gap_p99_ms": q(0.99),
        "stream_s": held[0],
    }


# --- streams per core --------------------------------------------------------------


@attrs.frozen
class Step:
    """One paced load of the streams-per-core search: ``streams`` streams,
    each a sequence of answers, a delta every ``pace_ms``."""

    streams: int
    late_p99_ms: float  # p99 of (gap between an answer's deltas - pace)
    chunks: int  # the deltas the client got
    stream_s: float  # the seconds answers were under way, summed
    cpu_s: float  # the server's
    seconds: float
    pace_ms: float
    why: str  # why not held: "d" delay, "r" rate, "e" errors; "" held

    @property
    def held(self) -> bool:
        return not self.why

    @property
    def rate(self) -> float:
        """Deltas a stream got per second (at most 1000 / pace)."""
        return self.chunks / self.stream_s if self.stream_s else 0.0

    @property
    def cpu_share(self) -> float:
        return self.cpu_s / self.seconds if self.seconds else 0.0

    @property
    def per_core(self) -> float:
        """Streams at the full pace per core: the deltas the client got a
        second, over the pace's rate, over the server's CPU share (the
        streams held over the CPU share when every stream kept the pace; a
        stream slowed by a loaded server counts for the share it got)."""
        return self.chunks * self.pace_ms / 1000 / self.cpu_s if self.cpu_s else 0.0


def paced_step(
    server: Server, streams: int, args: argparse.Namespace, binary: Path | None
) -> Step:
    """``streams`` paced streams on ``server`` for ``--per-core-seconds``
    after the client's ramp (50 connections every 50 ms). Held if the p99
    delay is under ``--max-delay-ms`` (and some gap was measured), no
    connection failed nor answer was cut off, and (with ``--min-rate``) a
    stream got at least that share of the pace's deltas per second."""
    ramp = math.ceil(streams / 50) * 0.05
    result = own_load(
        server,
        streams,
        ramp + args.per_core_seconds,
        args.paced_chunks,
        args.pace_ms,
        binary,
    )
    step = Step(
        streams,
        result["late_p99_ms"],
        result["chunks"],
        result["stream_s"],
        result["cpu_s"],
        result["seconds"],
        args.pace_ms,
        why="",
    )
    late = not result["gaps"] or step.late_p99_ms >= args.max_delay_ms
    slow = step.rate < args.min_rate * 1000 / args.pace_ms
    failed = result["errors"] or result["open"]
    why = "d" * late + "r" * slow + "e" * bool(failed)
    return attrs.evolve(step, why=why)


def search_streams(
    measure: Callable[[int], Step],
    start: int,
    most: int,
    bisections: int,
    budget_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> list[Step]:
    """The steps of a search for the most paced streams a server holds:
    ``start`` streams, doubled while held up to ``most``; past the first not
    held, ``bisections`` steps halving the interval between the largest held
    (0 if none) and the smallest not held. No step starts once ``budget_s``
    has passed since the first."""
    began = clock()
    steps: list[Step] = []
    held, failed, halved = 0, 0, 0
    n = start
    while True:
        step = measure(n)
        steps.append(step)
        if step.held:
            held = n
        else:
            failed = n
        if clock() - began >= budget_s:
            break
        if not failed:
            if n >= most:
                break
            n = min(2 * n, most)
        elif halved < bisections and failed - held > 1:
            n = (held + failed) // 2
            halved += 1
        else:
            break
    return steps


def largest_held(steps: Sequence[Step]) -> Step | None:
    return max((s for s in steps if s.held), key=lambda s: s.streams, default=None)


# --- the run ----------------------------------------------------------------------


@attrs.define
class Row:
    name: str
    values: dict[str, list[float]] = attrs.field(factory=dict)
    notes: dict[str, list[str]] = attrs.field(factory=dict)

    def add(self, key: str, value: float) -> None:
        self.values.setdefault(key, []).append(value)

    def note(self, key: str, text: str) -> None:
        self.notes.setdefault(key, []).append(text)

    def get(self, key: str) -> float | None:
        found = self.values.get(key)
        return statistics.median(found) if found else None


def _rows(args: argparse.Namespace, mastra: Any) -> list[str]:
    if args.rows:
        return list(args.rows.split(","))
    names = [f"procession-{m}" for m in args.modes.split(",")]
    names.append(f"procession-adaptive-w{args.workers}")
    if mastra is not None:
        names.append("mastra")
    return [*names, *FLOORS]


def measure(args: argparse.Namespace, mastra: Any) -> dict[str, Row]:
    names = _rows(args, mastra)
    rows = {name: Row(name) for name in names}
    for round_ in range(args.rounds):
        order = names if round_ % 2 == 0 else names[::-1]  # interleaved rounds
        for name in order:
            row = rows[name]
            print(f"  round {round_ + 1}: {name}", file=sys.stderr, flush=True)
            try:
                _measure_row(args, names, round_, row, mastra)
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                print(f"  {name} failed: {exc}", file=sys.stderr, flush=True)
                row.add("failed", 1)
    return rows


def _measure_row(
    args: argparse.Namespace, names: list[str], round_: int, row: Row, mastra: Any
) -> None:
    """One round of every workload on the server ``row.name``."""
    name = row.name
    with running(name, mastra, 2 if args.quick else 20) as server:
        for connections in args.connections:
            done = load(server, connections, args.seconds, args.chunks)
            chunks = done.requests * args.chunks
            row.add(f"a{connections}_chunks_s", chunks / done.seconds)
            row.add(f"a{connections}_us", done.cpu_s / chunks * 1e6 if chunks else 0)
            row.add(f"a{connections}_errors", done.errors)
            row.add(f"a{connections}_rss_mb", done.rss_after / 2**20)
        if "-w" in name:  # N workers get N times the connections
            wide = args.connections[0] * args.workers
            done = load(server, wide, args.seconds, args.chunks)
            row.add("wide_chunks_s", done.requests * args.chunks / done.seconds)
        if round_ == 0 and not args.quick and name in (names[0], "mastra"):
            for i in range(5):  # (d) RSS across runs at the largest load
                done = load(server, args.connections[-1], args.seconds / 2, args.chunks)
                row.add(f"rss_run{i + 1}_mb", done.rss_after / 2**20)
        done = load(server, args.connections[0], args.seconds, 1)
        row.add("c_req_s", done.requests / done.seconds)
        row.add("c_us", done.cpu_s / done.requests * 1e6 if done.requests else 0)
        row.add("c_errors", done.errors)
        idle = server.rss()
        for streams in args.streams:
            result = own_load(
                server,
                streams,
                args.paced_seconds,
                args.paced_chunks,
                args.pace_ms,
                args.paced_binary,
            )
            chunks = result["chunks"]
            row.add(
                f"b{streams}_us",
                result["cpu_s"] / chunks * 1e6 if chunks else 0,
            )
            row.add(f"b{streams}_p50", result["gap_p50_ms"])
            row.add(f"b{streams}_p99", result["gap_p99_ms"])
            row.add(f"b{streams}_late_p99", result["late_p99_ms"])
            row.add(f"b{streams}_chunks_s", chunks / result["seconds"])
            row.add(f"b{streams}_errors", result["errors"])
            row.add(f"b{streams}_cpu_share", result["cpu_s"] / result["seconds"])
            row.add(f"b{streams}_peak", result["peak"])
            if streams == args.streams[0]:
                row.add("d_kib", (result["rss_peak"] - idle) / 1024 / streams)
        if args.per_core_budget > 0:
            _streams_per_core(args, server, row)


def _streams_per_core(args: argparse.Namespace, server: Server, row: Row) -> None:
    """(e) The most paced streams ``server`` holds, and per core."""
    steps = search_streams(
        lambda n: paced_step(server, n, args, args.paced_binary),
        args.per_core_start,
        args.per_core_most,
        args.per_core_bisections,
        args.per_core_budget,
    )
    row.note("e_steps", " ".join(f"{s.streams}{s.why or '+'}" for s in steps))
    best = largest_held(steps)
    row.add("e_held", best.streams if best else 0)
    row.add("e_tried", min(s.streams for s in steps))
    row.add("e_most", args.per_core_most)
    if best is not None:
        row.add("e_late_p99", best.late_p99_ms)
        row.add("e_rate", best.rate)
        row.add("e_cpu_share", best.cpu_share)
        row.add("e_per_core", best.per_core)


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _ratio(value: float | None, floor: float | None) -> str:
    if value is None or not floor:
        return "—"
    return f"{value / floor:.1f}x"


Column = tuple[str, int, Callable[[Row], str]]


def _value(key: str, spec: str, width: int, name: str) -> Column:
    """A column of the row's ``key``, formatted by ``spec``."""
    return (name, width, lambda row: _fmt(row.get(key), spec))


def _table(title: str, rows: dict[str, Row], columns: list[Column]) -> None:
    """A table: the server's name, then a cell per column."""
    print(f"\n{title}")
    print(f"{'server':<28}" + "".join(f"{name:>{w}}" for name, w, _ in columns))
    for row in rows.values():
        print(
            f"{row.name:<28}" + "".join(f"{cell(row):>{w}}" for _, w, cell in columns)
        )


def report(args: argparse.Namespace, rows: dict[str, Row]) -> None:
    """The tables, each row's ratios to the floors and Mastra of this run."""

    def of(name: str, key: str) -> float | None:
        row = rows.get(name)
        return row.get(key) if row is not None else None

    def versus(key: str, floor: str, name: str, width: int = 12) -> Column:
        return (name, width, lambda row: _ratio(row.get(key), of(floor, key)))

    def mastra_over(key: str) -> Column:
        return ("Mastra/this", 12, lambda row: _ratio(of("mastra", key), row.get(key)))

    for c in args.connections:
        key = f"a{c}_us"
        _table(
            f"(a) unpaced {args.chunks}-delta answers, wrk -t1 -c{c}, "
            f"{args.seconds:g} s",
            rows,
            [
                _value(f"a{c}_chunks_s", ",.0f", 10, "chunks/s"),
                _value(key, ".1f", 14, "µs CPU/chunk"),
                versus(key, "hypercorn-one", "vs one-send"),
                versus(key, "hypercorn-batched", "vs batched", 11),
                mastra_over(key),
                _value(f"a{c}_rss_mb", ".0f", 8, "RSS MB"),
                _value(f"a{c}_errors", ".0f", 7, "errors"),
            ],
        )
    for n in args.streams:
        key = f"b{n}_us"
        _table(
            f"(b) paced: a delta every {args.pace_ms:g} ms, {n} live streams, "
            f"{args.paced_seconds:g} s, {args.paced_name}; gap = between two "
            f"deltas' arrivals (ideal {args.pace_ms:g} ms), delay = gap - pace",
            rows,
            [
                _value(f"b{n}_chunks_s", ",.0f", 10, "chunks/s"),
                _value(key, ".1f", 14, "µs CPU/chunk"),
                versus(key, "hypercorn-one", "vs one-send"),
                mastra_over(key),
                _value(f"b{n}_p50", ".1f", 9, "gap p50"),
                _value(f"b{n}_p99", ".1f", 9, "gap p99"),
                _value(f"b{n}_late_p99", ".1f", 11, "delay p99"),
                _value(f"b{n}_cpu_share", ".2f", 10, "CPU share"),
                _value(f"b{n}_peak", ".0f", 7, "open"),
                _value(f"b{n}_errors", ".0f", 7, "errors"),
            ],
        )

    def over_floor(row: Row) -> str:
        us, floor = row.get("c_us"), of("hypercorn-one", "c_us")
        return f"{us - floor:+.0f}" if us is not None and floor is not None else "—"

    _table(
        f"(c) one-chunk answers, wrk -t1 -c{args.connections[0]}, {args.seconds:g} s",
        rows,
        [
            _value("c_req_s", ",.0f", 10, "req/s"),
            _value("c_us", ".0f", 12, "µs CPU/req"),
            ("minus one-send", 16, over_floor),
            _value("c_errors", ".0f", 7, "errors"),
        ],
    )

    def runs(row: Row) -> str:
        found = [row.get(f"rss_run{i}_mb") for i in range(1, 6)]
        return " ".join(_fmt(r, ".0f") for r in found) if found[0] is not None else "—"

    _table(
        f"(d) memory: RSS per open paced stream ({args.streams[0]} streams); RSS MB "
        f"after each of 5 runs at {args.connections[-1]} connections",
        rows,
        [_value("d_kib", ".1f", 11, "KiB/stream"), ("RSS MB, runs 1-5", 24, runs)],
    )
    if args.per_core_budget > 0:
        _per_core_table(args, rows)
    wide = rows.get(f"procession-adaptive-w{args.workers}")
    if wide is not None and wide.get("wide_chunks_s"):
        c = args.connections[0]
        one_worker = of("procession-adaptive", f"a{c}_chunks_s")
        print(
            f"\n--workers {args.workers} at {c * args.workers} connections: "
            f"{_fmt(wide.get('wide_chunks_s'), ',.0f')} chunks/s, "
            f"{_ratio(wide.get('wide_chunks_s'), one_worker)} --workers 1 at {c}"
        )
    first = next(iter(rows.values()))
    key = f"a{args.connections[0]}_us"
    per_core = ""
    if args.per_core_budget > 0:
        per_core = (
            f"; {_fmt(first.get('e_per_core'), ',.0f')} paced streams per core "
            f"(Mastra's {_fmt(of('mastra', 'e_per_core'), ',.0f')})"
        )
    print(
        f"\nsummary: {first.name} {_fmt(first.get(key), '.1f')} µs CPU/chunk unpaced "
        f"({_ratio(first.get(key), of('hypercorn-batched', key))} the batched floor, "
        f"Mastra {_ratio(of('mastra', key), first.get(key))} it); one-chunk "
        f"{_fmt(first.get('c_us'), '.0f')} µs/request{per_core}"
    )


def _per_core_table(args: argparse.Namespace, rows: dict[str, Row]) -> None:
    """(e) streams per core, each row's ratio to Mastra's."""
    mastra = rows.get("mastra")
    theirs = mastra.get("e_per_core") if mastra is not None else None

    def held(row: Row) -> str:
        count, tried = row.get("e_held"), row.get("e_tried")
        if count is None or tried is None:
            return "—"
        if not count:
            return f"<{tried:.0f}"
        return f"{'≥' if count >= (row.get('e_most') or 0) else ''}{count:.0f}"

    rate = ""
    if args.min_rate:
        rate = f", a stream getting >= {args.min_rate * 1000 / args.pace_ms:g} deltas/s"

    def steps(row: Row) -> str:
        return "  " + " | ".join(row.notes.get("e_steps", ["—"]))

    _table(
        f"(e) streams per core: the most paced streams (a delta every "
        f"{args.pace_ms:g} ms, {args.paced_chunks}-delta answers, "
        f"{args.per_core_seconds:g} s a step, {args.paced_name}) held: p99 "
        f"delay < {args.max_delay_ms:g} ms{rate}, no error; deltas/s: a stream "
        f"got; per core: streams at {1000 / args.pace_ms:g} deltas/s per core "
        "(deltas a second / the pace's rate / the server's CPU share); steps: "
        "+ held, else why not: d delay, r rate, e errors",
        rows,
        [
            ("held", 7, held),
            _value("e_late_p99", ".1f", 11, "delay p99"),
            _value("e_rate", ".1f", 10, "deltas/s"),
            _value("e_cpu_share", ".2f", 10, "CPU share"),
            _value("e_per_core", ",.0f", 14, "streams/core"),
            ("this/Mastra", 12, lambda row: _ratio(row.get("e_per_core"), theirs)),
            ("  steps", 0, steps),
        ],
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rows", default="", help="only these rows (comma-separated)")
    parser.add_argument("--no-mastra", action="store_true")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--connections", default="50,1000")
    parser.add_argument("--streams", default="250,1000")
    parser.add_argument("--pace-ms", type=float, default=20.0)
    parser.add_argument("--paced-chunks", type=int, default=100)
    parser.add_argument("--paced-seconds", type=float, default=10.0)
    parser.add_argument(
        "--paced-client",
        choices=["c", "trio"],
        default="c",
        help="the paced load's client: _paced_client.c (cc -O2) or the trio one",
    )
    parser.add_argument(
        "--max-delay-ms",
        type=float,
        default=50.0,
        help="(e): a count is held if the p99 of (gap - pace) is under this",
    )
    parser.add_argument(
        "--min-rate",
        type=float,
        default=0.0,
        help="(e): and a stream got this share of the pace's deltas a second",
    )
    parser.add_argument("--per-core-start", type=int, default=25)
    parser.add_argument("--per-core-most", type=int, default=6400)
    parser.add_argument("--per-core-bisections", type=int, default=3)
    parser.add_argument(
        "--per-core-seconds", type=float, default=5.0, help="(e): each step's load"
    )
    parser.add_argument(
        "--per-core-budget",
        type=float,
        default=150.0,
        help="(e): no step starts past this many seconds a server (0: no (e))",
    )
    parser.add_argument("--client", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client:
        port, connections, seconds, body = args.client
        result = trio.run(
            _client, int(port), int(connections), float(seconds), body.encode()
        )
        print(json.dumps(result))
        return {}
    if args.quick:
        args.seconds, args.paced_seconds, args.chunks = 1.0, 1.0, 20
        args.connections, args.streams, args.paced_chunks = "5", "5", 10
        args.per_core_start = args.per_core_most = 5
        args.per_core_seconds, args.per_core_bisections = 1.0, 0
    args.connections = [int(c) for c in args.connections.split(",")]
    args.streams = [int(s) for s in args.streams.split(",")]
    if shutil.which("wrk") is None:
        print("# no wrk: this script's own client makes the unpaced load")
    args.paced_binary, said = paced_client(args.paced_client)
    args.paced_name = "the C client" if args.paced_binary else "the trio client"
    print(said)
    mastra = None
    if not args.no_mastra:
        found = find_mastra()
        if isinstance(found, Mastra):
            mastra = found
            print(f"# {found.describe()}")
        else:
            print(f"mastra: skipped ({found.reason})")
    rows = measure(args, mastra)
    report(args, rows)
    return rows


if __name__ == "__main__":
    main()
