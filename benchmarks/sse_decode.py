"""Time ``SSEDecoder`` on one large event (issue 9, §2.6): a single ``data:``
line of 20 MB and of 50 MB, fed in 64 KiB pieces (what a socket hands over),
against a baseline in the same run: the whole body split into lines and decoded
at once (the least work any decoder does). Linear decoding keeps the ratio to
the baseline flat as the event grows, and 50 MB takes about 2.5x as long as
20 MB; the quadratic decoder it replaced took 0.22 s and 9.2 s (40x; run it
beside the new one with ``--with-old``). Also shown: the bytes the decoder
examined per byte fed (at most 2). Not part of the test suite; a smoke test
runs ``--quick``.

    python benchmarks/sse_decode.py             # 20 MB and 50 MB
    python benchmarks/sse_decode.py --with-old  # and the old decoder (~10 s)
    python benchmarks/sse_decode.py --quick     # 200 kB and 500 kB, to check it runs
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import attrs

from procession.providers._sse import SSEDecoder

PIECE = 65_536


@attrs.frozen
class Row:
    decoder: str  # "baseline", "SSEDecoder" or "old"
    size: int
    seconds: float
    examined_per_byte: float | None  # SSEDecoder's own count


def _body(size: int) -> bytes:
    return b"data: " + b"x" * size + b"\n\n"


def _pieces(body: bytes) -> list[bytes]:
    return [body[i : i + PIECE] for i in range(0, len(body), PIECE)]


def _check(data: list[str], size: int) -> None:
    if [len(d) for d in data] != [size]:
        raise AssertionError(f"decoded {len(data)} events, not one of {size} bytes")


def baseline(size: int) -> Row:
    """The whole body, split into lines and decoded in one go."""
    body = _body(size)
    start = time.perf_counter()
    lines = [line.decode() for line in body.splitlines()]
    data = [line.removeprefix("data: ") for line in lines if line]
    seconds = time.perf_counter() - start
    _check(data, size)
    return Row("baseline", size, seconds, None)


def current(size: int) -> Row:
    """``SSEDecoder`` fed 64 KiB pieces."""
    pieces = _pieces(_body(size))
    decoder = SSEDecoder(max_event_bytes=2 * size)
    start = time.perf_counter()
    events = [event for piece in pieces for event in decoder.feed(piece)]
    seconds = time.perf_counter() - start
    _check([e.data for e in events], size)
    return Row("SSEDecoder", size, seconds, decoder.bytes_examined / (size + 8))


def old(size: int) -> Row:
    """The decoder before issue 9: ``buffer += piece``, then a scan from the
    start of the buffer on every piece (its core, for comparison)."""
    pieces = _pieces(_body(size))
    start = time.perf_counter()
    buffer = b""
    data: list[str] = []
    out: list[str] = []
    for piece in pieces:
        buffer += piece
        while (end := buffer.find(b"\n")) >= 0:
            raw, buffer = buffer[:end], buffer[end + 1 :]
            line = raw.removesuffix(b"\r").decode("utf-8", errors="replace")
            if not line:
                out.append("\n".join(data))
                data = []
            else:
                data.append(line.removeprefix("data: "))
    seconds = time.perf_counter() - start
    _check(out, size)
    return Row("old", size, seconds, None)


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--with-old", action="store_true")
    args = parser.parse_args(argv)
    sizes = (200_000, 500_000) if args.quick else (20_000_000, 50_000_000)
    runs: list[Callable[[int], Row]] = [baseline, current]
    if args.with_old:
        runs.append(old)
    rows = [run(size) for size in sizes for run in runs]
    base = {r.size: r.seconds for r in rows if r.decoder == "baseline"}
    print(
        f"{'decoder':<12}{'event bytes':>13}{'seconds':>10}{'vs baseline':>13}"
        f"{'examined/byte':>15}"
    )
    for r in rows:
        examined = "" if r.examined_per_byte is None else f"{r.examined_per_byte:.2f}"
        print(
            f"{r.decoder:<12}{r.size:>13,}{r.seconds:>10.3f}"
            f"{r.seconds / base[r.size]:>12.1f}x{examined:>15}"
        )
    for name in ("SSEDecoder", "old"):
        timed = [r for r in rows if r.decoder == name]
        if len(timed) == 2:
            growth = timed[1].seconds / timed[0].seconds
            print(
                f"{name}: {growth:.1f}x the time for {sizes[1] / sizes[0]:.1f}x "
                f"the bytes (linear: about 2.5x)"
            )
    return rows


if __name__ == "__main__":
    main()
