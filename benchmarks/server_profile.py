"""Where a served chunk's CPU goes: ``procession serve``'s app, profiled
(cProfile) in this process while ``wrk`` loads it from another, the time
split by package (the engine and the server's edge, hypercorn, h11, trio,
the rest). Loopback only, bounded in time.

    python benchmarks/server_profile.py                # 200-delta answers
    python benchmarks/server_profile.py --floor        # the bare hypercorn app
    python benchmarks/server_profile.py --chunks 1     # one-chunk answers

Prints µs per chunk (per request with ``--chunks 1``) for each part; the
profiler's own overhead inflates every figure alike, so read the shares.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._floors import hypercorn_app
from benchmarks.server_load import _LUA, PATH, _body, _free_port

PARTS = (
    ("procession/server", "server edge (procession.server)"),
    ("procession/", "engine (runtime, pipeline, processors, chunks)"),
    ("hypercorn/", "hypercorn"),
    ("h11/", "h11"),
    ("trio/", "trio (scheduler, sockets)"),
)


def _part(filename: str) -> str:
    for needle, name in PARTS:
        if needle in filename:
            return name
    if filename.startswith(("~", "<")):
        return "builtins (socket send/recv, json, ...)"
    return "other"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--floor", action="store_true")
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    port = _free_port()
    from hypercorn.config import Config
    from hypercorn.trio import serve

    if args.floor:
        app = hypercorn_app(1)
    else:
        from benchmarks._served import app
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.errorlog = None
    config.backlog = 4096
    done = trio.Event()
    completed: list[int] = []

    def load() -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
            script.write(_LUA % _body(args.chunks).decode())
        out = subprocess.run(
            [
                "wrk",
                "-t1",
                f"-c{args.connections}",
                f"-d{args.seconds:g}s",
                "-s",
                script.name,
                f"http://127.0.0.1:{port}{PATH}",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        os.unlink(script.name)
        completed.append(int(out.split(" requests in")[0].split()[-1]))

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: serve(
                    app, config, shutdown_trigger=done.wait, task_status=task_status
                )
            )
            await trio.to_thread.run_sync(load)
            done.set()

    profiler = cProfile.Profile()
    profiler.enable()
    trio.run(run)
    profiler.disable()
    stats = pstats.Stats(profiler)
    split: dict[str, float] = defaultdict(float)
    # (pstats keeps its table in an attribute typeshed does not declare)
    for (filename, _line, _name), row in stats.stats.items():  # type: ignore[attr-defined]
        split[_part(filename)] += row[2]  # tottime
    units = completed[0] * (args.chunks if args.chunks > 1 else 1)
    unit = "chunk" if args.chunks > 1 else "request"
    total = sum(split.values())
    what = "bare hypercorn app (one send per frame)" if args.floor else "procession"
    print(f"{what}: {completed[0]} requests x {args.chunks} chunks, profiled")
    for name, seconds in sorted(split.items(), key=lambda kv: -kv[1]):
        print(
            f"  {name:<48}{seconds / units * 1e6:8.1f} µs/{unit}{seconds / total:7.0%}"
        )
    print(f"  {'total':<48}{total / units * 1e6:8.1f} µs/{unit}")


if __name__ == "__main__":
    main()
