"""The server's memory over rounds of concurrent streaming clients, some of
them leaving mid-stream at random: does it stay flat? Not part of the test
suite (a smoke test runs ``--quick``).

    python benchmarks/server_memory.py                   # 50 rounds x 500 clients
    python benchmarks/server_memory.py --rounds 10 --trace   # what grows, by line
    python benchmarks/server_memory.py --quick           # tiny, to check it runs

The server is ``procession serve`` serving the demo's support agent on its
scripted model (a tool call, a thin answer, a retry, the good answer, a word
every 30 ms) without memory (the served demo's memory would grow with every
turn it saves, which is storage, not the serving path), run by
``procession``'s own ``main(["serve", ...])`` in a process of its own. The
clients are in this process: each round N of them at once POST
``/api/agents/support-agent/stream`` (or ``/api/chat`` with ``--route
chat``); a fraction (``--leave``) close their connection after a random
number of SSE frames. After each round, once the server has no run
in flight, the script reads the server's RSS (``VmRSS``, /proc/<pid>/status)
and asks a debug hook in the server (a thread reading this script's commands
on its stdin) for the number of objects the garbage collector tracks, after
a ``gc.collect()``, and with ``--trace`` what tracemalloc holds.

The table has one row per round: the server's RSS; Python's allocated
blocks (``sys.getallocatedblocks()``: every object and buffer, blind to the
allocator; it counts the free lists' blocks too, which fill up to their
bounds); the objects the collector tracks; glibc's free heap (freed, kept,
so in the RSS); with ``--trace``, what tracemalloc holds. The summary line
gives the growth per round over the first and the second half of the rounds:
a leak grows in both; an allocator that settles at the peak's footprint
grows in the first only. With ``--trace`` it also prints the allocation
sites whose blocks grew most over the second half.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import gc
import json
import os
import pathlib
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Sequence
from typing import IO, Any

import attrs
import trio

SERVED: Any = None
"""The agent the server process serves (set there)."""

_SERVE_LINE = re.compile(r"procession serve: .* on (http://\S+)")


@attrs.frozen
class Row:
    round: int
    clients: int
    left: int
    refused: int
    errors: int
    seconds: float
    rss_kib: int
    objects: int
    blocks: int
    arenas_kib: float | None
    arena_free_kib: float | None
    malloc_free_kib: float | None
    traced_kib: float | None


# --- the server process ---------------------------------------------------------


def _serve(trace: bool) -> int:
    """The server process: ``procession serve`` on a free port, with the
    debug hook reading commands on stdin."""
    # main is what the `procession` command runs
    from procession._cli import main
    from procession._demo import ServedDemoModel, demo_agent

    if trace:
        tracemalloc.start(8)
    threading.Thread(
        target=_debug_hook, args=(sys.stdin, sys.stdout), daemon=True
    ).start()
    global SERVED
    SERVED = demo_agent(ServedDemoModel())  # no memory: see the docstring
    return main(["serve", "__main__:SERVED", "--port", "0"])


def _debug_hook(commands: IO[str], out: IO[str]) -> None:
    """Answer this script's commands, one JSON line each, after a
    collection: ``stats`` (the runs in flight, the collector's objects by
    type, Python's allocated blocks, glibc's heap, tracemalloc's total),
    ``mark`` (a tracemalloc snapshot) and ``top`` (the allocation sites
    whose blocks grew most since the ``mark``)."""
    first: Any = None
    for command in commands:
        gc.collect()
        answer: dict[str, Any] = {}
        if command.strip() == "stats":
            from procession.server import ProcessionApp

            objects = gc.get_objects()
            # type(), not isinstance(): an isinstance() over every object
            # fills the ABCs' caches, which would show as growth.
            apps = [o for o in objects if type(o) is ProcessionApp]
            answer["in_flight"] = sum(app.runs.reserved for app in apps)
            answer["objects"] = len(objects)
            answer["types"] = collections.Counter(
                type(o).__qualname__ for o in objects
            ).most_common(400)
            del objects, apps
            answer["blocks"] = sys.getallocatedblocks()
            answer.update(_malloc())
            answer.update(_pymalloc())
            if tracemalloc.is_tracing():
                answer["traced"] = tracemalloc.get_traced_memory()[0]
        elif command.strip() == "trim":
            # Hand glibc's free heap back to the system: what the RSS then
            # loses was malloc's, not live memory.
            with contextlib.suppress(OSError, AttributeError):
                ctypes.CDLL("libc.so.6").malloc_trim(0)
        elif command.strip() == "mark" and tracemalloc.is_tracing():
            first = _snapshot()
        elif command.strip() == "top" and first is not None:
            now = _snapshot()
            grown = now.compare_to(first, "traceback")
            # By blocks: a leak is so many blocks a request, whatever their size.
            grown.sort(key=lambda d: d.count_diff, reverse=True)
            answer["top"] = [
                f"{d.count_diff:+d} blocks {d.size_diff / 1024:+.1f} KiB  "
                + " <- ".join(
                    f"{_short(f.filename)}:{f.lineno}" for f in reversed(d.traceback)
                )
                for d in grown[:12]
            ]
        out.write(json.dumps(answer) + "\n")
        out.flush()


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
            "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _malloc() -> dict[str, int]:
    """glibc's heap (``mallinfo2``; {} elsewhere): the bytes malloc lends
    out, and the bytes it holds free (freed, not given back to the system,
    so still in the RSS)."""
    try:
        mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return {}
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return {"malloc_used": info.uordblks + info.hblkhd, "malloc_free": info.fordblks}


def _pymalloc() -> dict[str, int]:
    """pymalloc's arenas (``sys._debugmallocstats``, which writes to the C
    stderr): the bytes of the arenas it holds, and the free bytes in them.
    An arena goes back to the system only when none of its blocks is live."""
    with tempfile.TemporaryFile() as out:
        saved = os.dup(2)
        try:
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode(errors="replace")
    found: dict[str, int] = {}
    for key, pattern in (
        ("arenas", r"(\d[\d,]*) arenas \* (\d[\d,]*) bytes/arena"),
        ("arena_free", r"# bytes in available blocks\s*=\s*(\d[\d,]*)"),
    ):
        match = re.search(pattern, text)
        if match is not None:
            numbers = [int(g.replace(",", "")) for g in match.groups()]
            found[key] = numbers[0] * numbers[1] if len(numbers) == 2 else numbers[0]
    return found


def _short(filename: str) -> str:
    """``trio/_core/_run.py`` for a file of an installed package."""
    parts = pathlib.Path(filename).parts
    for anchor in ("site-packages", "procession", "python3.11"):
        if anchor in parts:
            return "/".join(parts[parts.index(anchor) + 1 :])
    return pathlib.Path(filename).name


def _snapshot() -> tracemalloc.Snapshot:
    """What tracemalloc holds, but for this hook's own allocations (any
    with the hook's frames in its traceback: its stack is shallow)."""
    return tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, __file__, all_frames=True)]
    )


class Server:
    """The server process and its debug hook."""

    def __init__(self, trace: bool) -> None:
        command = [sys.executable, __file__, "--serve-child"]
        if trace:
            command.append("--trace")
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=pathlib.Path(__file__).resolve().parents[1],
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        found = _SERVE_LINE.search(line)
        if found is None:
            self.process.kill()
            raise RuntimeError(f"the server did not start: {line!r}")
        host, port = found.group(1).removeprefix("http://").rsplit(":", 1)
        self.host, self.port = host, int(port)

    def ask(self, command: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        return answer

    def rss_kib(self) -> int:
        status = pathlib.Path(f"/proc/{self.process.pid}/status").read_text()
        found = re.search(r"VmRSS:\s+(\d+) kB", status)
        assert found is not None
        return int(found.group(1))

    def stop(self) -> None:
        """SIGTERM (``procession serve`` stops on it), then its pipes closed."""
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        with self.process:  # closes the pipes, waits
            pass


# --- the clients ------------------------------------------------------------------


@attrs.define
class _Client:
    leave_after: int | None  # SSE frames, then the connection closes
    frames: int = 0
    refused: int = 0  # 503s (more runs than the app's max_concurrent_runs)
    error: str | None = None


def _request(route: str, index: int) -> bytes:
    if route == "chat":
        path = "/api/chat"
        body = json.dumps(
            {
                "id": f"chat-{index}",
                "messages": [
                    {
                        "id": "m1",
                        "role": "user",
                        "parts": [{"type": "text", "text": "Where is A-1042?"}],
                    }
                ],
            }
        ).encode()
    else:
        path = "/api/agents/support-agent/stream"
        body = b'{"messages": "Where is my order A-1042?"}'
    return (
        f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _one(
    host: str, port: int, request: bytes, client: _Client, rng: random.Random
) -> None:
    """One client: its stream read to the end, or left after ``leave_after``
    frames; refused (503: the app runs at most 256 at once), it tries again
    a moment later, as a client honouring ``Retry-After`` would."""
    while await _attempt(host, port, request, client) == "refused":
        client.refused += 1
        await trio.sleep(rng.uniform(0.1, 0.5))


async def _attempt(host: str, port: int, request: bytes, client: _Client) -> str:
    try:
        stream = await trio.open_tcp_stream(host, port)
    except OSError as exc:
        client.error = repr(exc)
        return "error"
    async with stream:
        try:
            return await _exchange(stream, request, client)
        except trio.BrokenResourceError as exc:
            client.error = f"{exc} ({exc.__cause__!r})"
            return "error"


async def _exchange(stream: trio.SocketStream, request: bytes, client: _Client) -> str:
    await stream.send_all(request)
    head = tail = b""
    while True:
        data = await stream.receive_some(65536)
        if not head:
            head = data[:12]
            if head.startswith(b"HTTP/1.1 503"):
                return "refused"
            if not head.startswith(b"HTTP/1.1 200"):
                client.error = repr(data[:200])
                return "error"
        if not data:
            if b"[DONE]" not in tail:
                client.error = "closed before [DONE]"
            return "error"
        client.frames += data.count(b"\n\n")
        tail = tail[-16:] + data
        if client.leave_after is not None and client.frames >= client.leave_after:
            return "left"  # mid-stream: the connection closes
        if b"[DONE]" in tail:
            return "done"


async def _round(
    server: Server, clients: int, leave: float, route: str, rng: random.Random
) -> tuple[int, int, int, float]:
    states = [
        _Client(rng.randrange(1, 30) if rng.random() < leave else None)
        for _ in range(clients)
    ]
    jitter = random.Random(rng.random())  # the retries' pauses
    started = time.perf_counter()
    with trio.fail_after(120 + clients / 5):
        async with trio.open_nursery() as nursery:
            for index, state in enumerate(states):
                request = _request(route, index)
                nursery.start_soon(
                    _one, server.host, server.port, request, state, jitter
                )
    seconds = time.perf_counter() - started
    left = sum(1 for s in states if s.leave_after is not None and s.error is None)
    return left, sum(s.refused for s in states), _errors(states), seconds


def _errors(states: Sequence[_Client]) -> int:
    failed = [s.error for s in states if s.error is not None]
    for error in sorted(set(failed))[:3]:
        print(f"  error: {error}")
    return len(failed)


def _settle(server: Server) -> dict[str, Any]:
    """The debug hook's stats once no run is in flight and the count of
    objects stands still (the server notices each departure, and its
    connections wind down, on their own time); at most 30 s."""
    deadline = time.monotonic() + 30
    last: dict[str, Any] = {"objects": -1}
    while True:
        stats = server.ask("stats")
        if stats["in_flight"] == 0 and stats["objects"] == last["objects"]:
            return stats
        if time.monotonic() > deadline:
            return stats
        last = stats
        time.sleep(0.2)


def measure(
    rounds: int, clients: int, leave: float, route: str, trace: bool, seed: int
) -> tuple[list[Row], dict[str, Any], dict[str, Any], list[str], int]:
    server = Server(trace)
    rng = random.Random(seed)
    rows: list[Row] = []
    try:
        first = last = _settle(server)
        for number in range(1, rounds + 1):
            left, refused, errors, seconds = trio.run(
                _round, server, clients, leave, route, rng
            )
            last = _settle(server)
            if number == 1:
                first = last
            if trace and number == (rounds + 1) // 2:
                server.ask("mark")  # what grows after, grows in steady state
            rows.append(
                Row(
                    round=number,
                    clients=clients,
                    left=left,
                    refused=refused,
                    errors=errors,
                    seconds=seconds,
                    rss_kib=server.rss_kib(),
                    objects=last["objects"],
                    blocks=last["blocks"],
                    arenas_kib=_kib(last, "arenas"),
                    arena_free_kib=_kib(last, "arena_free"),
                    malloc_free_kib=_kib(last, "malloc_free"),
                    traced_kib=last["traced"] / 1024 if "traced" in last else None,
                )
            )
            _print_row(rows[-1], rows[0])
        top = server.ask("top").get("top", []) if trace else []
        server.ask("trim")
        trimmed = server.rss_kib()
    finally:
        server.stop()
    return rows, first, last, top, trimmed


def _kib(stats: dict[str, Any], key: str) -> float | None:
    return stats[key] / 1024 if key in stats else None


HEADER = (
    f"{'round':>5}{'clients':>8}{'left':>6}{'refused':>8}{'errors':>7}{'seconds':>8}"
    f"{'RSS MiB':>9}{'vs 1st':>7}{'arenas KiB':>11}{'free':>7}{'malloc free':>12}"
    f"{'blocks vs 1st':>14}{'objects vs 1st':>15}{'traced KiB':>11}"
)


def _print_row(row: Row, first: Row) -> None:
    def kib(value: float | None, width: int) -> str:
        return f"{value:>{width},.0f}" if value is not None else f"{'-':>{width}}"

    print(
        f"{row.round:>5}{row.clients:>8}{row.left:>6}{row.refused:>8}{row.errors:>7}"
        f"{row.seconds:>8.1f}{row.rss_kib / 1024:>9.1f}"
        f"{(row.rss_kib - first.rss_kib) / 1024:>+7.1f}"
        f"{kib(row.arenas_kib, 11)}{kib(row.arena_free_kib, 7)}"
        f"{kib(row.malloc_free_kib, 12)}"
        f"{row.blocks - first.blocks:>+14,}{row.objects - first.objects:>+15,}"
        f"{kib(row.traced_kib, 11)}",
        flush=True,
    )


def _per_round(rows: Sequence[Row], field: str) -> float:
    """Growth per round of ``field`` between the ends of ``rows``."""
    if len(rows) < 2:
        return 0.0
    start, end = getattr(rows[0], field), getattr(rows[-1], field)
    return float(end - start) / (len(rows) - 1)


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument(
        "--leave", type=float, default=0.3, help="the share that leaves mid-stream"
    )
    parser.add_argument("--route", choices=("stream", "chat"), default="stream")
    parser.add_argument("--trace", action="store_true", help="tracemalloc the server")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--serve-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_child:
        sys.exit(_serve(args.trace))
    rounds, clients = (3, 10) if args.quick else (args.rounds, args.clients)
    print(HEADER)
    rows, first, last, top, trimmed = measure(
        rounds, clients, args.leave, args.route, args.trace, args.seed
    )
    if top:
        print(f"tracemalloc, grown most since round {(rounds + 1) // 2}:")
        for line in top:
            print(f"  {line}")
    grown = collections.Counter(dict(last["types"]))
    grown.subtract(dict(first["types"]))
    most = [f"{name} {n:+,}" for name, n in grown.most_common(5) if n > 0]
    half = len(rows) // 2
    print(
        f"summary: {rounds} rounds x {clients} clients ({args.route}, "
        f"{args.leave:.0%} leave): server RSS {rows[0].rss_kib / 1024:.1f} -> "
        f"{rows[-1].rss_kib / 1024:.1f} MiB, "
        f"{_per_round(rows[: half + 1], 'rss_kib'):+.0f} KiB/round over rounds "
        f"1-{half + 1}, {_per_round(rows[half:], 'rss_kib'):+.0f} KiB/round over "
        f"rounds {half + 1}-{len(rows)}, {trimmed / 1024:.1f} MiB after "
        f"malloc_trim(0); Python's allocated blocks "
        f"{_per_round(rows[half:], 'blocks'):+.0f}/round and collector objects "
        f"{_per_round(rows[half:], 'objects'):+.0f}/round over rounds "
        f"{half + 1}-{len(rows)}" + (f" ({', '.join(most)})" if most else "")
    )
    return rows


if __name__ == "__main__":
    main()
