"""CPU per chunk of turning a served chunk into its SSE frame bytes (issue 23:
the JSON encoder against the stdlib's and a faster one), for both protocols
the server speaks: Mastra's (``MastraFrames``, ``mastra_frame``) and the AI
SDK UI message stream (``UiStreamEncoder.frames``, ``ui_frame``).

Encoders, each the library's own code with only its final JSON step
(``procession.server._http.dumps``: one shared stdlib ``JSONEncoder``, then
UTF-8) swapped:

* ``today``: what the server does (the per-run encoder: plain text deltas and
  the run's own start / step-start from prebuilt bytes and
  ``encode_basestring``, every other chunk ``to_wire`` + the stdlib encoder);
* ``stdlib, no fast paths``: the general path alone, for every chunk;
* ``stdlib, encoder made once``: the same C encoder ``JSONEncoder.encode``
  makes on every call, made once (the same bytes by construction);
* ``msgspec`` (the ``fastjson`` extra; ``msgspec.json.Encoder(enc_hook=str)``
  for ``default=str``) and ``orjson`` (``orjson.dumps(value, default=str)``;
  not a dependency: ``pip install --target DIR orjson`` and
  ``PYTHONPATH=DIR`` for a run), each with the fast paths and without.

Before timing, every alternative's bytes are compared with today's on every
chunk of the mixes and on hard cases (non-ASCII, emoji, control characters,
quotes, U+2028, floats, integers beyond 64 bits, NaN, values only
``default=str`` writes): one byte different, or an exception, and it cannot
be adopted (the golden fixtures stay byte-identical).

Mixes: a 200-delta answer as ``benchmarks/_served.py``'s agent streams it
(start, step-start, 200 plain deltas ``"x "``, step-finish with usage,
finish: 204 chunks), and chunks that all take the general path (tool-call
with nested args, tool-result, step-finish with usage, finish, a reasoning
delta and a text delta with provider metadata). Every encoder runs over the
whole mix many times per sample (``time.perf_counter_ns``), the encoders take
turns within a round, rounds interleaved, figures are medians of the rounds.
"share" is the encoder's µs over ~15 µs, the server CPU of one served
unpaced chunk (benchmarks/README.md, the fifth ``server_load.py`` run).
Not part of the test suite; a smoke test runs ``--quick``.

    python benchmarks/frame_encode.py             # 7 rounds, ~35 s
    python benchmarks/frame_encode.py --rounds 3
    python benchmarks/frame_encode.py --quick     # tiny, to check it runs

Found (2026-12-05, msgspec 0.23, orjson 3.13, 7 rounds): neither fast
encoder is byte-identical. msgspec writes exponents without a ``+``
(``1e16`` where the stdlib writes ``1e+16``), ``null`` for NaN and
Infinity, a set as an array and bytes as base64 (5 of 234 cases); orjson
writes ``null`` for NaN and raises on integers beyond 64 bits and on int
dict keys (1 differs, 3 raise). On the 200-delta answer only 2 of 204
chunks reach the JSON step; framing costs 0.48 µs a chunk on average (3% of
a ~15 µs served chunk), and msgspec would save 0.04 µs (0.2%), orjson 0.03
µs. On general-path chunks (9.6 µs each) they save 3.8-3.9 µs. The stdlib's
C encoder made once instead of per call is byte-identical and saves 0.6 µs
of a general-path chunk, nothing measurable on the 200-delta answer. No
faster encoder adopted.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import importlib
import json
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any, Final

import attrs

from procession.chunks import (
    Chunk,
    ReasoningDeltaChunk,
    ReasoningDeltaPayload,
    StartChunk,
    StartPayload,
    TextDeltaChunk,
    TextDeltaPayload,
    Usage,
    finish,
    step_finish,
    step_start,
    text_delta,
    tool_call,
    tool_result,
)
from procession.server import _mastra, _ui_stream
from procession.server._http import dumps as stdlib_dumps
from procession.server._mastra import MastraFrames, mastra_frame
from procession.server._ui_stream import UiStreamEncoder, ui_frame

SERVED_CHUNK_US: Final = 15.1
"""Server CPU of one served unpaced chunk, µs: benchmarks/README.md, the
fifth ``server_load.py`` run (2026-12-05, session 11), (a) adaptive at c=50:
the whole server's CPU per chunk (agent, processors, encoding, sockets)."""

RUN_ID: Final = "run-" + "0123456789abcdef" * 2  # a served run id's length
MESSAGE_ID: Final = "msg-" + "fedcba9876543210" * 2
TODAY: Final = "today"
STDLIB_GENERAL: Final = "stdlib, no fast paths"
STDLIB_ONCE: Final = "stdlib, encoder made once"
ALTERNATIVES: Final = (STDLIB_ONCE, "msgspec", "orjson")

Dumps = Callable[[Any], bytes]
Encode = Callable[[Chunk], bytes]


@attrs.frozen
class Row:
    encoder: str  # "today", "stdlib, no fast paths", "msgspec", ...
    mix: str  # "<protocol> <mix>": "mastra 200-delta", "ui general-path", ...
    us_per_chunk: float  # median over the rounds
    identical: bool  # the encoder's bytes are today's on every checked case
    note: str


@attrs.frozen
class Encoder:
    name: str
    dumps: Dumps  # the JSON step, in place of ``_http.dumps``
    fast_paths: bool  # the per-run encoder (True) or the general path only


@attrs.frozen
class Identity:
    """One alternative's bytes against today's, for one protocol."""

    checked: int
    differ: int
    raise_: int
    first: str  # the first difference, in words ("" if none)

    @property
    def identical(self) -> bool:
        return self.differ == 0 and self.raise_ == 0


# --------------------------------------------------------------------------- #
# The JSON steps
# --------------------------------------------------------------------------- #


def _stdlib_once_dumps() -> Dumps | None:
    """``_http.dumps`` without its per-call set-up: ``JSONEncoder.encode``
    makes a new C encoder (``json.encoder.c_make_encoder``, an undocumented
    name; None without the ``_json`` module) on every call; this one is made
    once, with the same arguments, so the bytes are the same by construction.
    Its circular-reference markers are cleared after a failure (the C code
    leaves them behind)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    markers: dict[int, Any] = {}
    encode = make(
        markers, str, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )

    def dumps(value: Any) -> bytes:
        try:
            return "".join(encode(value, 0)).encode()
        except BaseException:
            markers.clear()
            raise

    return dumps


def _msgspec_dumps() -> Dumps | None:
    try:
        msgspec = importlib.import_module("msgspec")
    except ImportError:
        return None
    encode: Dumps = msgspec.json.Encoder(enc_hook=str).encode
    return encode


def _orjson_dumps() -> Dumps | None:
    try:
        orjson: ModuleType = importlib.import_module("orjson")
    except ImportError:
        return None
    raw: Callable[..., bytes] = orjson.dumps

    def dumps(value: Any) -> bytes:
        return raw(value, default=str)

    return dumps


@contextlib.contextmanager
def _json_step(dumps: Dumps) -> Iterator[None]:
    """The server's encoders with ``dumps`` as their JSON step (the
    benchmark's switch; put back after)."""
    namespaces = (vars(_mastra), vars(_ui_stream))  # their ``dumps`` globals
    saved = [namespace["dumps"] for namespace in namespaces]
    for namespace in namespaces:
        namespace["dumps"] = dumps
    try:
        yield
    finally:
        for namespace, value in zip(namespaces, saved, strict=True):
            namespace["dumps"] = value


# --------------------------------------------------------------------------- #
# The per-chunk encoders of each protocol
# --------------------------------------------------------------------------- #


def _mastra_encoder(fast_paths: bool) -> Encode:
    if fast_paths:
        return MastraFrames(RUN_ID)

    def general(chunk: Chunk) -> bytes:
        return mastra_frame(chunk, RUN_ID)

    return general


def _ui_encoder(fast_paths: bool) -> Encode:
    encoder = UiStreamEncoder()
    if fast_paths:
        return encoder.frames

    def general(chunk: Chunk) -> bytes:
        return b"".join([ui_frame(c) for c in encoder(chunk)])

    return general


PROTOCOLS: Final[dict[str, Callable[[bool], Encode]]] = {
    "mastra": _mastra_encoder,
    "ui": _ui_encoder,
}


# --------------------------------------------------------------------------- #
# The chunks
# --------------------------------------------------------------------------- #


def answer_mix() -> list[Chunk]:
    """A 200-delta answer as ``_served.py``'s agent streams it (checked
    against its frames): start, step-start, 200 plain deltas, step-finish
    with usage and the message id, finish with usage."""
    usage = Usage(input_tokens=1, output_tokens=200, total_tokens=201)
    done = step_finish("stop", usage=usage, run_id=RUN_ID)
    return [
        StartChunk(payload=StartPayload(), run_id=RUN_ID),
        step_start(message_id=MESSAGE_ID, run_id=RUN_ID),
        *(text_delta("x ", id="t", run_id=RUN_ID) for _ in range(200)),
        attrs.evolve(done, payload=attrs.evolve(done.payload, message_id=MESSAGE_ID)),
        finish("stop", usage=usage, run_id=RUN_ID),
    ]


def general_mix() -> list[Chunk]:
    """Chunks that all take the general path: tool call and result, a
    step-finish and a finish with usage, deltas with provider metadata."""
    args = {
        "city": "Oslo",
        "days": 3,
        "units": {"temperature": "celsius", "wind": "m/s"},
        "fields": ["sky", "wind", "rain"],
        "window": {"from": "2026-12-05", "hours": [6, 12, 18], "detailed": True},
    }
    result = {
        "city": "Oslo",
        "forecast": [
            {"day": d, "sky": "cloudy", "celsius": -2.5 + d, "wind": 4.1, "rain": None}
            for d in range(3)
        ],
        "source": "met.no",
    }
    usage = Usage(input_tokens=1_203, output_tokens=87, total_tokens=1_290)
    return [
        tool_call("call-1", "weather", args, run_id=RUN_ID),
        tool_result("call-1", "weather", result, args=args, run_id=RUN_ID),
        step_finish("tool-calls", usage=usage, is_continued=True, run_id=RUN_ID),
        finish("stop", usage=usage, run_id=RUN_ID),
        ReasoningDeltaChunk(
            payload=ReasoningDeltaPayload(
                id="reasoning-1",
                text="The user wants the weather",
                provider_metadata={"anthropic": {"signature": "sig-" + "ab" * 24}},
            ),
            run_id=RUN_ID,
        ),
        _metadata_delta("Oslo will be cloudy,"),
    ]


def _metadata_delta(text: str) -> TextDeltaChunk:
    return TextDeltaChunk(
        payload=TextDeltaPayload(
            id="text-1", text=text, provider_metadata={"openai": {"itemId": "msg_1"}}
        ),
        run_id=RUN_ID,
    )


class _Unknown:
    """A value JSON cannot hold: ``default=str`` writes its ``str``."""

    def __str__(self) -> str:
        return "<unknown 42>"


@dataclasses.dataclass
class _Point:
    x: float
    y: float


HARD_STRINGS: Final = {
    "non-ASCII": "héllo ñ ü 日本語 Ελληνικά",
    "emoji": "😀 👍🏽 👨‍👩‍👧",
    "control chars": "\x00\x01\x08\t\n\x0b\x0c\r\x1f\x7f",
    "quote, backslash": 'say "hi" \\ C:\\path /slash',
    "U+2028/U+2029": "line\u2028para\u2029end",
}
HARD_VALUES: Final[dict[str, Any]] = {
    "0.1": 0.1,
    "1e16": 1e16,
    "5e-324": 5e-324,
    "1.5e300, -0.0": [1.5e300, -0.0],
    "NaN, Infinity": [float("nan"), float("inf"), float("-inf")],
    "2**64 + 1": 2**64 + 1,
    "-(2**63) - 1": -(2**63) - 1,
    "nested args": {"a": [{"b": {"c": [1, 2.5, None, True, "é"]}}], "d": {}},
    "int keys": {1: "one", 2: "two"},
    "unknown object": _Unknown(),
    "dataclass": _Point(1.0, 2.0),
    "set": {3},
    "bytes": b"\x00ab",
    "datetime": datetime.datetime(2026, 12, 5, 9, 30, tzinfo=datetime.UTC),
}


def hard_cases() -> dict[str, Chunk]:
    """The cases where encoders part ways, each in a chunk: a string as a
    plain delta (the fast path) and with metadata (the JSON step); a value
    as a tool call's args."""
    cases: dict[str, Chunk] = {}
    for name, text in HARD_STRINGS.items():
        cases[f"plain delta, {name}"] = text_delta(text, id="t", run_id=RUN_ID)
        cases[f"delta with metadata, {name}"] = _metadata_delta(text)
    for name, value in HARD_VALUES.items():
        cases[f"tool args, {name}"] = tool_call("c", "t", {"v": value}, run_id=RUN_ID)
    return cases


# --------------------------------------------------------------------------- #
# Byte identity
# --------------------------------------------------------------------------- #


def _outcome(encoder: Encoder, make: Callable[[bool], Encode], chunk: Chunk) -> Any:
    """The frame bytes, or the exception's words."""
    with _json_step(encoder.dumps):
        encode = make(encoder.fast_paths)
        try:
            return encode(chunk)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"


def _where(case: str, want: Any, got: Any) -> str:
    if isinstance(want, str):
        if isinstance(got, str):
            return f"{case}: today raises {want}, this raises {got}"
        return f"{case}: today raises {want}, this does not"
    if isinstance(got, str):
        return f"{case}: raises {got}"
    at = next(
        (i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
        min(len(want), len(got)),
    )
    lo = max(0, at - 12)
    return f"{case}: today {want[lo : at + 12]!r}, this {got[lo : at + 12]!r}"


def check_identity(
    encoders: Sequence[Encoder],
    make: Callable[[bool], Encode],
    cases: dict[str, Chunk],
) -> dict[str, Identity]:
    """Each encoder's outcome on every case against today's bytes."""
    today = Encoder(TODAY, stdlib_dumps, fast_paths=True)
    want = {case: _outcome(today, make, chunk) for case, chunk in cases.items()}
    out = {}
    for encoder in encoders:
        differ = raise_ = 0
        first = ""
        for case, chunk in cases.items():
            got = _outcome(encoder, make, chunk)
            if got == want[case]:
                continue
            if isinstance(got, str):
                raise_ += 1
            else:
                differ += 1
            first = first or _where(case, want[case], got)
        out[encoder.name] = Identity(len(cases), differ, raise_, first)
    return out


# --------------------------------------------------------------------------- #
# Timing
# --------------------------------------------------------------------------- #


def _sample(
    encoder: Encoder, make: Callable[[bool], Encode], mix: list[Chunk], passes: int
) -> float:
    """µs per chunk of ``passes`` passes over ``mix`` (one encoder per
    sample, as one per run)."""
    with _json_step(encoder.dumps):
        encode = make(encoder.fast_paths)
        for chunk in mix:  # warm up
            encode(chunk)
        start = time.perf_counter_ns()
        for _ in range(passes):
            for chunk in mix:
                encode(chunk)
        elapsed = time.perf_counter_ns() - start
    return elapsed / (passes * len(mix)) / 1_000


def _time(
    encoders: Sequence[Encoder],
    mixes: dict[str, tuple[Callable[[bool], Encode], list[Chunk]]],
    rounds: int,
    chunks_per_sample: int,
) -> dict[tuple[str, str], float]:
    """Median µs per chunk by (encoder, mix): in each round every mix, the
    encoders taking turns in an order that rotates round by round."""
    samples: dict[tuple[str, str], list[float]] = {}
    for round_ in range(rounds):
        for mix_name, (make, mix) in mixes.items():
            passes = max(1, chunks_per_sample // len(mix))
            shift = round_ % len(encoders)
            for encoder in [*encoders[shift:], *encoders[:shift]]:
                us = _sample(encoder, make, mix, passes)
                samples.setdefault((encoder.name, mix_name), []).append(us)
    return {key: statistics.median(values) for key, values in samples.items()}


# --------------------------------------------------------------------------- #
# The run
# --------------------------------------------------------------------------- #


def _encoders() -> tuple[list[Encoder], list[str]]:
    """Today's, the general path, and each alternative installed (both ways);
    the words for those skipped."""
    encoders = [
        Encoder(TODAY, stdlib_dumps, fast_paths=True),
        Encoder(STDLIB_GENERAL, stdlib_dumps, fast_paths=False),
    ]
    skipped = []
    once = _stdlib_once_dumps()
    if once is None:
        skipped.append(f"{STDLIB_ONCE}: skipped (no json.encoder.c_make_encoder)")
    else:
        encoders.append(Encoder(STDLIB_ONCE, once, fast_paths=True))
    for name, found in (("msgspec", _msgspec_dumps()), ("orjson", _orjson_dumps())):
        if found is None:
            skipped.append(f"{name}: skipped (not installed)")
            continue
        encoders.append(Encoder(name, found, fast_paths=True))
        encoders.append(Encoder(f"{name}, no fast paths", found, fast_paths=False))
    return encoders, skipped


def _note(encoder: Encoder, identity: Identity) -> str:
    if encoder.name == TODAY:
        return "the server today"
    if identity.identical:
        return "byte-identical"
    return "not byte-identical: cannot be adopted"


def _print(
    rows: Sequence[Row],
    identities: dict[str, dict[str, Identity]],
    skipped: Sequence[str],
    rounds: int,
    chunks_per_sample: int,
) -> None:
    print(
        f"µs per chunk to turn a served chunk into its SSE frame, {rounds} "
        f"interleaved round(s) of ~{chunks_per_sample:,} chunks per sample "
        f"(medians); share: of a ~{SERVED_CHUNK_US} µs served chunk"
    )
    for line in skipped:
        print(line)
    print("byte identity against today (every chunk of the mixes + hard cases):")
    for protocol, by_encoder in identities.items():
        for name, identity in by_encoder.items():
            if name == TODAY:
                continue
            verdict = (
                "identical"
                if identity.identical
                else f"{identity.differ} differ, {identity.raise_} raise"
            )
            print(f"  {protocol:<7}{name:<27}{identity.checked:>4} cases: {verdict}")
            if identity.first:
                print(f"{'':9}first: {identity.first}")
    print(
        f"{'mix':<20}{'encoder':<27}{'µs/chunk':>10}{'vs today':>10}"
        f"{'share':>8}{'saves µs':>10}  {'identical':<10}note"
    )
    today = {r.mix: r.us_per_chunk for r in rows if r.encoder == TODAY}
    for r in rows:
        base = today[r.mix]
        print(
            f"{r.mix:<20}{r.encoder:<27}{r.us_per_chunk:>10.3f}"
            f"{r.us_per_chunk / base:>9.2f}x"
            f"{r.us_per_chunk / SERVED_CHUNK_US:>8.1%}"
            f"{base - r.us_per_chunk:>+10.3f}  {'yes' if r.identical else 'no':<10}"
            f"{r.note}"
        )
    print(_summary(rows, identities))


def _summary(rows: Sequence[Row], identities: dict[str, dict[str, Identity]]) -> str:
    """What each alternative saves on Mastra's stream: of a served chunk on
    the 200-delta answer, and of a general-path chunk; byte-identical or not."""
    by = {(r.encoder, r.mix): r for r in rows}

    def saved(name: str, mix: str) -> float:
        return by[TODAY, mix].us_per_chunk - by[name, mix].us_per_chunk

    parts = []
    for name in ("msgspec", "orjson", STDLIB_ONCE):
        if (name, "mastra 200-delta") not in by:
            continue
        answer = saved(name, "mastra 200-delta")
        identical = all(i[name].identical for i in identities.values())
        parts.append(
            f"adopting {name} would save {answer:.3f} µs of a ~{SERVED_CHUNK_US} µs "
            f"served chunk on the 200-delta mix ({answer / SERVED_CHUNK_US:.1%}) "
            f"and {saved(name, 'mastra general-path'):.2f} µs of a general-path "
            f"chunk; byte-identical: {'yes' if identical else 'no'}"
        )
    return "summary: " + ("; ".join(parts) or "no alternative encoder to measure")


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    rounds, chunks_per_sample = (1, 400) if args.quick else (args.rounds, 40_000)

    encoders, skipped = _encoders()
    answer, general = answer_mix(), general_mix()
    cases = {f"200-delta #{i}": c for i, c in enumerate(answer)}
    cases |= {f"general #{i}": c for i, c in enumerate(general)}
    cases |= hard_cases()
    identities = {
        protocol: check_identity(encoders, make, cases)
        for protocol, make in PROTOCOLS.items()
    }
    mixes = {
        f"{protocol} {name}": (make, mix)
        for protocol, make in PROTOCOLS.items()
        for name, mix in (("200-delta", answer), ("general-path", general))
    }
    medians = _time(encoders, mixes, rounds, chunks_per_sample)
    rows = []
    for mix_name in mixes:
        protocol = mix_name.split()[0]
        for encoder in encoders:
            identity = identities[protocol][encoder.name]
            rows.append(
                Row(
                    encoder.name,
                    mix_name,
                    medians[encoder.name, mix_name],
                    identity.identical,
                    _note(encoder, identity),
                )
            )
    _print(rows, identities, skipped, rounds, chunks_per_sample)
    return rows


if __name__ == "__main__":
    main()
