"""What the agent benchmarks share: the execution modes, the scripted turn, a
whole-run drain, interleaved rounds, percentiles, the ``--no-mastra`` switch and
the versions line. Scripts import it as ``benchmarks._common`` (run as
``python benchmarks/<name>.py``, they put the repository root on ``sys.path``
first)."""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar, cast, get_args

import trio

from benchmarks._mastra import Mastra, Skipped, find_mastra
from procession import Agent
from procession.actors import ExecutionMode
from procession.chunks import Chunk, text_delta
from procession.testing import PassThrough

K = TypeVar("K")
T = TypeVar("T")

# Every execution mode the library has, so a new one is measured without edits.
MODES: tuple[ExecutionMode, ...] = get_args(ExecutionMode)


def text_turn(chunks: int) -> list[Chunk]:
    """One scripted model turn: ``chunks`` text deltas ``"x "``."""
    return [text_delta("x ") for _ in range(chunks)]


async def drain(agent: Agent, **options: Any) -> int:
    """Run ``agent.stream("hi", **options)`` to its end; return the chunk count."""
    count = 0
    async with agent.stream("hi", **options) as stream:
        async for _ in stream:
            count += 1
    return count


class _Args:
    part: Any = None


async def awaited_floor(turn: Sequence[Chunk], processors: int) -> float:
    """The floor of an agent run: ``processors`` pass-through hooks awaited in
    one task, a checkpoint per chunk (what reading a model stream costs at
    least). Returns µs per chunk."""
    hooks: list[Callable[[Any], Awaitable[Any]]] = [
        PassThrough(i).process_output_stream for i in range(processors)
    ]
    args = _Args()
    start = time.perf_counter()
    for chunk in turn:
        args.part = chunk
        for hook in hooks:
            args.part = await hook(args)
        await trio.lowlevel.checkpoint()
    return (time.perf_counter() - start) / len(turn) * 1e6


def interleaved(rounds: int, setups: Mapping[K, Callable[[], T]]) -> dict[K, list[T]]:
    """Each set-up's results over ``rounds`` rounds, every round running every
    set-up once in turn, so the drift of a shared machine hits them alike."""
    results: dict[K, list[T]] = {name: [] for name in setups}
    for _ in range(rounds):
        for name, measure in setups.items():
            results[name].append(measure())
    return results


def post_scope(path: str) -> dict[str, Any]:
    """The ASGI scope of a JSON ``POST`` to ``path``, for a benchmark that
    calls an app directly (no socket)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"bench"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 4111),
    }


def body_then(
    body: bytes, wait: Callable[[], Awaitable[object]]
) -> Callable[[], Awaitable[dict[str, Any]]]:
    """An ASGI ``receive`` for one request: its whole ``body`` first, then,
    once ``wait()`` returns, ``http.disconnect``."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await wait()
        return {"type": "http.disconnect"}

    return receive


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile of ``values`` by the nearest-rank rule."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def ratio(value: float | None, base: float | None) -> str:
    """``value / base`` as ``1.23x``, or ``-`` where either is missing."""
    if value is None or base is None or base == 0:
        return "-"
    return f"{value / base:.2f}x"


def parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser with the options every agent benchmark takes:
    ``--quick``, ``--rounds``, ``--modes``, ``--no-mastra``."""
    described = argparse.ArgumentParser(
        description=(doc or "").splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    described.add_argument(
        "--quick", action="store_true", help="tiny sizes: a smoke run, not a result"
    )
    described.add_argument("--rounds", type=int, default=5)
    described.add_argument(
        "--modes",
        default=",".join(MODES),
        help=f"execution modes, comma-separated (default: all, {','.join(MODES)})",
    )
    described.add_argument(
        "--no-mastra", action="store_true", help="do not run the Mastra side"
    )
    return described


def modes(
    parsed: argparse.Namespace, described: argparse.ArgumentParser
) -> list[ExecutionMode]:
    """The ``--modes`` asked for, each checked to be an ``ExecutionMode``."""
    chosen: list[ExecutionMode] = []
    for mode in parsed.modes.split(","):
        if mode not in MODES:
            described.error(f"unknown mode {mode!r}; the modes are {MODES}")
        chosen.append(cast(ExecutionMode, mode))
    return chosen


def mastra(parsed: argparse.Namespace) -> Mastra | None:
    """The Mastra to compare with, or ``None`` after printing why not."""
    if parsed.no_mastra:
        print("mastra: skipped (--no-mastra)")
        return None
    found = find_mastra()
    if isinstance(found, Skipped):
        print(f"mastra: skipped ({found.reason})")
        return None
    return found


def versions(peer: Mastra | None) -> str:
    """One line naming the machine and the versions the figures are from."""
    line = (
        f"python {sys.version.split()[0]}, trio {trio.__version__}, "
        f"{platform.machine()}"
    )
    return line if peer is None else f"{line}; {peer.describe()}"
