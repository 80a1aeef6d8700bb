"""Time ``SSEDecoder`` on one large event (issue 9, §2.6): a single ``data:``
line of 20 MB and of 50 MB, fed in 64 KiB pieces (what a socket hands over).
Linear decoding takes about 2.5x as long for 50 MB as for 20 MB; the quadratic
decoder it replaced took 0.22 s and 9.2 s (40x). Also shown: the bytes the
decoder examined per byte fed (at most 2). Not part of the test suite; a smoke
test runs ``--quick``.

    python benchmarks/sse_decode.py          # 20 MB and 50 MB
    python benchmarks/sse_decode.py --quick  # 200 kB and 500 kB, to check it runs
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import attrs

from procession.providers._sse import SSEDecoder

PIECE = 65_536


@attrs.frozen
class Row:
    size: int
    seconds: float
    examined_per_byte: float


def measure(size: int) -> Row:
    """Decode one event of ``size`` data bytes; check it came out whole."""
    body = b"data: " + b"x" * size + b"\n\n"
    decoder = SSEDecoder(max_event_bytes=len(body))
    start = time.perf_counter()
    events = []
    for offset in range(0, len(body), PIECE):
        events.extend(decoder.feed(body[offset : offset + PIECE]))
    seconds = time.perf_counter() - start
    if [len(e.data) for e in events] != [size]:
        raise AssertionError(f"decoded {events!r:.80}, not one event of {size}")
    return Row(size, seconds, decoder.bytes_examined / len(body))


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    small, large = (200_000, 500_000) if args.quick else (20_000_000, 50_000_000)
    rows = [measure(small), measure(large)]
    print(f"{'event bytes':>12}{'seconds':>10}{'examined/byte':>15}")
    for r in rows:
        print(f"{r.size:>12,}{r.seconds:>10.3f}{r.examined_per_byte:>15.2f}")
    ratio = rows[1].seconds / rows[0].seconds
    print(f"ratio {ratio:.1f}x for {large / small:.1f}x the bytes (linear: about 2.5x)")
    return rows


if __name__ == "__main__":
    main()
