"""The output-stream pipeline, one behaviour at a time, in every execution mode.

The property test (tests/actors/test_pipeline_equivalence.py) checks that the
modes agree with the sequential reference; these tests pin down what the
reference itself promises (SPEC §2.1, 2.2, 2.6, 2.10) plus what only a pipeline
has: cancellation, task cleanup, checkpoints, overlap, serialised actors.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from procession import (
    ConfigurationError,
    ProcessorContractError,
    ProcessorError,
    TripWire,
)
from procession.actors import (
    ExecutionMode,
    OutputPipeline,
    ProcessorActor,
    open_output_pipeline,
)
from procession.actors._markers import Barrier, NewAttempt
from procession.chunks import (
    DataChunk,
    ErrorChunk,
    TextDeltaChunk,
    TripwireChunk,
    data,
    error,
    text_delta,
    to_wire,
)
from procession.processors import (
    AbortSignal,
    HookArgs,
    ProcessorViolation,
    ProcessOutputStreamArgs,
    register_processors,
)

MODES: tuple[ExecutionMode, ...] = ("adaptive", "fused", "actors")
each_mode = pytest.mark.parametrize("mode", MODES)


# --- helpers -------------------------------------------------------------------


async def from_list(items: Iterable[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


async def run(
    processors: list[Any], items: Iterable[Any], mode: ExecutionMode, **options: Any
) -> tuple[list[Any], OutputPipeline]:
    """Read the whole stream; return the chunks and the (closed) pipeline."""
    async with open_output_pipeline(
        processors, from_list(items), run_id="run-1", mode=mode, **options
    ) as stream:
        chunks = [chunk async for chunk in stream]
    return chunks, stream


def texts(chunks: Iterable[Any]) -> list[str]:
    return [c.payload.text if isinstance(c, TextDeltaChunk) else c.type for c in chunks]


def rewritten(chunk: TextDeltaChunk, suffix: str) -> TextDeltaChunk:
    return attrs.evolve(
        chunk, payload=attrs.evolve(chunk.payload, text=chunk.payload.text + suffix)
    )


class Recorder:
    """Passes every chunk on and records what it was shown."""

    def __init__(self, id: str = "recorder", *, data_parts: bool = False) -> None:
        self.id = id
        self.process_data_parts = data_parts
        self.seen: list[Any] = []

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        self.seen.append(args.part)
        return args.part


class Scripted:
    """Calls ``act(args)`` for every chunk (sync or async hook)."""

    def __init__(
        self,
        id: str,
        act: Any,
        *,
        is_async: bool = False,
        on_error: str = "raise",
        on_violation: Any = None,
    ) -> None:
        self.id = id
        self.on_error = on_error
        if on_violation is not None:
            self.on_violation = on_violation
        if is_async:

            async def hook(args: ProcessOutputStreamArgs) -> Any:
                await trio.lowlevel.checkpoint()
                return act(args)

            self.process_output_stream = hook
        else:
            self.process_output_stream = act


def part_text(args: ProcessOutputStreamArgs) -> str:
    part = args.part
    return part.payload.text if isinstance(part, TextDeltaChunk) else part.type


class Driver:
    """Accepts (or refuses) every retry request and error chunk; the source
    reads ``pending`` to know whether to start a new attempt."""

    def __init__(self, accept: bool) -> None:
        self.accept = accept
        self.pending = False
        self.retry_requests: list[TripWire] = []
        self.errors: list[ErrorChunk] = []

    async def on_retry_request(self, tripwire: TripWire) -> bool:
        self.retry_requests.append(tripwire)
        self.pending = self.accept
        return self.accept

    async def on_error_chunk(self, chunk: ErrorChunk) -> bool:
        self.errors.append(chunk)
        self.pending = self.accept
        return self.accept

    def on_attempt(self, marker: Any) -> None:
        pass  # this driver does not track attempts

    def on_terminal(self, outcome: Any) -> None:
        pass  # nor stop a producer of its own


async def attempts(driver: Driver, scripted: list[list[Any]]) -> AsyncIterator[Any]:
    """A driver's source: attempt i yields ``scripted[i]`` in full (the pipeline,
    not the source, must cut a retried attempt), then a barrier; a new attempt
    follows only if the driver accepted a retry or recovered an error."""
    for number, chunks in enumerate(scripted):
        yield NewAttempt(number, discard=number > 0)
        for chunk in chunks:
            yield chunk
        barrier = Barrier()
        yield barrier
        await barrier.wait()
        if not driver.pending:
            return
        driver.pending = False


# --- results: drop, split, rewrite, identity -------------------------------------


@each_mode
async def test_none_drops_the_chunk_for_the_rest_of_the_chain(
    mode: ExecutionMode,
) -> None:
    def drop_b(args: ProcessOutputStreamArgs) -> Any:
        return None if part_text(args) == "b" else args.part

    after = Recorder("after")
    chunks, stream = await run(
        [Scripted("dropper", drop_b), after], map(text_delta, "abc"), mode
    )
    assert texts(chunks) == ["a", "c"]
    assert texts(after.seen) == ["a", "c"]
    assert stream.outcome is not None
    assert stream.outcome.kind == "completed"


@each_mode
async def test_a_list_goes_through_the_rest_of_the_chain_in_order(
    mode: ExecutionMode,
) -> None:
    def split(args: ProcessOutputStreamArgs) -> Any:
        if part_text(args) == "a":
            return [args.part, text_delta("x"), text_delta("y")]
        return args.part

    def mark(args: ProcessOutputStreamArgs) -> Any:
        assert isinstance(args.part, TextDeltaChunk)
        return rewritten(args.part, "!")

    after = Recorder("after")
    chunks, _ = await run(
        [Scripted("splitter", split), Scripted("marker", mark), after],
        map(text_delta, "ab"),
        mode,
    )
    assert texts(chunks) == ["a!", "x!", "y!", "b!"]
    assert texts(after.seen) == ["a!", "x!", "y!", "b!"]


@each_mode
async def test_a_rewritten_chunk_is_what_later_processors_and_the_client_see(
    mode: ExecutionMode,
) -> None:
    def upper(args: ProcessOutputStreamArgs) -> Any:
        assert isinstance(args.part, TextDeltaChunk)
        return text_delta(args.part.payload.text.upper())

    after = Recorder("after")
    chunks, _ = await run(
        [Scripted("upper", upper, is_async=True), after], map(text_delta, "ab"), mode
    )
    assert texts(chunks) == ["A", "B"]
    assert texts(after.seen) == ["A", "B"]


@each_mode
async def test_pass_through_hands_on_the_same_object(mode: ExecutionMode) -> None:
    source = [text_delta("a"), data("tool", {"n": 1}), text_delta("b")]
    first, second = Recorder("first"), Recorder("second", data_parts=True)
    chunks, _ = await run([first, second], source, mode)
    assert len(chunks) == len(source)
    assert all(out is original for out, original in zip(chunks, source, strict=True))
    assert all(
        seen is original for seen, original in zip(second.seen, source, strict=True)
    )


@each_mode
async def test_data_chunks_reach_only_processors_that_opt_in(
    mode: ExecutionMode,
) -> None:
    blind = Recorder("blind")
    sees_data = Recorder("sees-data", data_parts=True)

    def rewrite_text_only(args: ProcessOutputStreamArgs) -> Any:
        # Would break a data chunk (no payload.text): it must never get one.
        assert isinstance(args.part, TextDeltaChunk)
        return rewritten(args.part, "+")

    source = [text_delta("a"), data("tool", {"n": 1}), text_delta("b")]
    chunks, _ = await run(
        [blind, Scripted("text-only", rewrite_text_only), sees_data], source, mode
    )
    assert texts(blind.seen) == ["a", "b"]
    assert texts(sees_data.seen) == ["a+", "data-tool", "b+"]
    assert texts(chunks) == ["a+", "data-tool", "b+"]
    assert chunks[1] is source[1]  # passed unchanged by those that skip it
    assert isinstance(chunks[1], DataChunk)


# --- writer.custom ----------------------------------------------------------------


@each_mode
@pytest.mark.parametrize("awaited", [True, False])
async def test_custom_chunks_precede_the_hooks_result_and_skip_later_processors(
    mode: ExecutionMode, awaited: bool
) -> None:
    class Writer:
        id = "writer"

        async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            assert args.writer is not None
            note = data("note", {"about": part_text(args)})
            if awaited:
                await args.writer.custom(note)
            else:
                args.writer.custom_nowait(to_wire(note))  # a wire dict works too
            return rewritten(args.part, "'")  # type: ignore[arg-type]  # any chunk type is passed on purpose

    after = Recorder("after", data_parts=True)
    chunks, _ = await run([Writer(), after], map(text_delta, "ab"), mode)
    assert texts(chunks) == ["data-note", "a'", "data-note", "b'"]
    assert [c.data for c in chunks if isinstance(c, DataChunk)] == [
        {"about": "a"},
        {"about": "b"},
    ]
    assert texts(after.seen) == ["a'", "b'"]  # custom chunks bypass the rest


# --- stream_parts and the args object -------------------------------------------


@each_mode
async def test_stream_parts_is_one_live_list_with_current_and_dropped_chunks(
    mode: ExecutionMode,
) -> None:
    lists: list[Any] = []
    snapshots: list[list[str]] = []

    def keep_every_other(args: ProcessOutputStreamArgs) -> Any:
        lists.append(args.stream_parts)
        snapshots.append(texts(args.stream_parts))
        assert args.stream_parts[-1] is args.part
        return args.part if len(args.stream_parts) % 2 else None

    source = [
        NewAttempt(0, discard=False),
        text_delta("a"),
        text_delta("b"),
        text_delta("c"),
        NewAttempt(1, discard=True),
        text_delta("d"),
        text_delta("e"),
    ]
    chunks, _ = await run([Scripted("p", keep_every_other)], source, mode)
    # No driver: the first attempt was delivered; discard=True only makes the
    # processors forget it.
    assert texts(chunks) == ["a", "c", "d"]
    assert snapshots == [["a"], ["a", "b"], ["a", "b", "c"], ["d"], ["d", "e"]]
    assert all(parts is lists[0] for parts in lists)  # never a copy
    assert texts(lists[0]) == ["d", "e"]


@each_mode
async def test_one_args_object_per_stage_is_reused_for_every_chunk(
    mode: ExecutionMode,
) -> None:
    """SPEC §2.1 lets the runtime reuse one argument object per stage and only
    change ``part``: building a (frozen, nine-field) object per call costs more
    than the whole per-processor budget (DESIGN.md "Speed": ~0.62 µs against
    ~0.11 µs). Processors may rely on the object only during the call, and this
    test makes sure the cheap path stays the one taken."""
    seen: dict[str, list[Any]] = {"p": [], "q": []}

    def record(name: str) -> Any:
        def hook(args: ProcessOutputStreamArgs) -> Any:
            seen[name].append((args, args.part, args.processor_id))
            return args.part

        return hook

    await run(
        [Scripted("p", record("p")), Scripted("q", record("q"), is_async=True)],
        map(text_delta, "abc"),
        mode,
    )
    for name, calls in seen.items():
        assert len(calls) == 3
        assert all(args is calls[0][0] for args, _, _ in calls)
        assert texts(part for _, part, _ in calls) == ["a", "b", "c"]
        assert {processor_id for _, _, processor_id in calls} == {name}
    assert seen["p"][0][0] is not seen["q"][0][0]


# --- tripwires ------------------------------------------------------------------


class Violations:
    """An async ``on_violation`` that logs into a shared log."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    async def __call__(self, violation: ProcessorViolation) -> None:
        await trio.lowlevel.checkpoint()
        self.log.append(violation)


@each_mode
@pytest.mark.parametrize("is_async", [False, True])
async def test_abort_ends_the_stream_with_one_tripwire_chunk(
    mode: ExecutionMode, is_async: bool
) -> None:
    log: list[Any] = []

    def guard(args: ProcessOutputStreamArgs) -> Any:
        if part_text(args) == "b":
            args.abort("no b", metadata={"at": "b"})
        return args.part

    after = Recorder("after")
    processors = [
        Recorder("before"),
        Scripted("guard", guard, is_async=is_async, on_violation=Violations(log)),
        after,
    ]
    async with open_output_pipeline(
        processors, from_list(map(text_delta, "abcd")), run_id="run-1", mode=mode
    ) as stream:
        async for chunk in stream:
            log.append(chunk)
    assert texts(log[:1]) == ["a"]
    assert log[1] == ProcessorViolation(
        processor_id="guard", message="no b", detail={"at": "b"}, blocking=True
    )
    assert len(log) == 3
    assert isinstance(log[2], TripwireChunk)
    assert to_wire(log[2]) == {
        "type": "tripwire",
        "runId": "run-1",
        "from": "AGENT",
        "payload": {
            "reason": "no b",
            "retry": False,
            "metadata": {"at": "b"},
            "processorId": "guard",
        },
    }
    assert texts(after.seen) == ["a"]
    assert stream.outcome is not None
    assert stream.outcome.kind == "tripwire"
    assert stream.outcome.tripwire is not None
    assert stream.outcome.tripwire.processor_id == "guard"


@each_mode
async def test_a_tripwire_raised_directly_is_attributed_to_its_processor(
    mode: ExecutionMode,
) -> None:
    def raise_it(args: ProcessOutputStreamArgs) -> Any:
        raise TripWire("raw tripwire")

    chunks, stream = await run(
        [Recorder("first"), Scripted("raw", raise_it)], [text_delta("a")], mode
    )
    assert len(chunks) == 1
    assert isinstance(chunks[0], TripwireChunk)
    assert chunks[0].payload.processor_id == "raw"
    assert chunks[0].payload.reason == "raw tripwire"
    assert stream.outcome is not None
    assert stream.outcome.kind == "tripwire"


@each_mode
async def test_a_tripwire_from_a_hooks_own_nursery_is_honoured(
    mode: ExecutionMode,
) -> None:
    class Nursery:
        id = "nursery"

        async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            async def check() -> None:
                await trio.lowlevel.checkpoint()
                args.abort("found in a child task")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(check)
                nursery.start_soon(trio.sleep_forever)
            return args.part

    chunks, stream = await run(
        [Nursery()], [text_delta("a"), text_delta("b")], mode, driver=None
    )
    assert len(chunks) == 1
    assert isinstance(chunks[0], TripwireChunk)
    assert chunks[0].payload.reason == "found in a child task"
    assert chunks[0].payload.processor_id == "nursery"
    assert stream.outcome is not None
    assert stream.outcome.kind == "tripwire"


@each_mode
async def test_cancelled_inside_a_hooks_exception_group_propagates(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    """A deadline that expires while a hook waits in its own nursery gives the
    hook a group of ``Cancelled``; the stage must let it through (not treat it
    as a failure, which with ``on_error="pass"`` would deliver the chunk)."""

    class Nursery:
        id = "nursery"
        on_error = "pass"

        async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            if part_text(args) == "b":
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(trio.sleep_forever)
                    nursery.start_soon(trio.sleep_forever)
            return args.part

    delivered: list[Any] = []
    with trio.move_on_after(10) as scope:
        async with open_output_pipeline(
            [Nursery()], from_list(map(text_delta, "abc")), mode=mode
        ) as stream:
            async for chunk in stream:
                delivered.append(chunk)
    assert scope.cancelled_caught
    assert texts(delivered) == ["a"]
    assert stream.outcome is not None
    assert stream.outcome.kind == "cancelled"


# --- failure policies ---------------------------------------------------------------


def broken_on_b(record: list[BaseException]) -> Any:
    def hook(args: ProcessOutputStreamArgs) -> Any:
        if part_text(args) == "b":
            exc = ValueError("bad b")
            record.append(exc)
            raise exc
        return args.part

    return hook


@each_mode
async def test_on_error_raise_ends_with_an_error_chunk(mode: ExecutionMode) -> None:
    raised: list[BaseException] = []
    after = Recorder("after")
    chunks, stream = await run(
        [Scripted("broken", broken_on_b(raised), on_error="raise"), after],
        map(text_delta, "abc"),
        mode,
    )
    assert texts(chunks) == ["a", "error"]
    final = chunks[-1]
    assert isinstance(final, ErrorChunk)
    assert final.run_id == "run-1"
    failure = final.payload.error
    assert isinstance(failure, ProcessorError)
    assert failure.processor_id == "broken"
    assert failure.__cause__ is raised[0]
    assert texts(after.seen) == ["a"]
    assert stream.outcome is not None
    assert stream.outcome.kind == "error"
    assert stream.outcome.error is failure


@each_mode
async def test_on_error_pass_logs_and_passes_the_chunk_on(
    mode: ExecutionMode, caplog: pytest.LogCaptureFixture
) -> None:
    raised: list[BaseException] = []
    caplog.set_level(logging.WARNING, logger="procession")
    source = [text_delta(t) for t in "abc"]
    chunks, stream = await run(
        [Scripted("lenient", broken_on_b(raised), on_error="pass")], source, mode
    )
    assert chunks == source
    assert chunks[1] is source[1]
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "'lenient'" in record.getMessage()
    assert record.exc_info is not None
    assert record.exc_info[1] is raised[0]
    assert stream.outcome is not None
    assert stream.outcome.kind == "completed"


@each_mode
async def test_on_error_block_ends_with_a_tripwire(mode: ExecutionMode) -> None:
    raised: list[BaseException] = []
    chunks, stream = await run(
        [Scripted("strict", broken_on_b(raised), on_error="block")],
        map(text_delta, "abc"),
        mode,
    )
    assert texts(chunks) == ["a", "tripwire"]
    assert isinstance(chunks[-1], TripwireChunk)
    assert chunks[-1].payload.reason == "strict failed: bad b"
    assert chunks[-1].payload.processor_id == "strict"
    assert chunks[-1].payload.retry is False
    assert stream.outcome is not None
    assert stream.outcome.tripwire is not None
    assert stream.outcome.tripwire.__cause__ is raised[0]


@each_mode
@pytest.mark.parametrize("garbage", [42, "text", [text_delta("ok"), 7]])
@pytest.mark.parametrize("policy", ["raise", "pass", "block"])
async def test_a_hook_returning_garbage_is_a_contract_error_under_its_policy(
    mode: ExecutionMode,
    garbage: Any,
    policy: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="procession")

    def bad(args: ProcessOutputStreamArgs) -> Any:
        return garbage if part_text(args) == "b" else args.part

    chunks, _ = await run(
        [Scripted("sloppy", bad, on_error=policy)], map(text_delta, "abc"), mode
    )
    if policy == "raise":
        assert texts(chunks) == ["a", "error"]
        # One style for every lane: the contract error itself, not wrapped in
        # a ProcessorError that repeats its message (issue 16).
        failure = chunks[-1].payload.error
        assert isinstance(failure, ProcessorContractError)
        assert not isinstance(failure, ProcessorError)
        assert "'sloppy'" in str(failure)
        assert "process_output_stream" in str(failure)
        assert repr(garbage) in str(failure)
    elif policy == "pass":
        assert texts(chunks) == ["a", "b", "c"]
        [record] = caplog.records
        assert record.exc_info is not None
        assert isinstance(record.exc_info[1], ProcessorContractError)
    else:
        assert texts(chunks) == ["a", "tripwire"]
        reason = chunks[-1].payload.reason
        assert reason.startswith("sloppy failed: processor 'sloppy': ")
        assert "expected a chunk, None (drop) or a list of chunks" in reason


# --- violations -------------------------------------------------------------------


@each_mode
async def test_reported_violations_reach_on_violation_in_stream_order(
    mode: ExecutionMode,
) -> None:
    log: list[Any] = []

    def watch(args: ProcessOutputStreamArgs) -> Any:
        if part_text(args) in ("a", "c"):
            args.report_violation(f"saw {part_text(args)}", {"n": len(log)})
        return args.part

    async with open_output_pipeline(
        [Scripted("watch", watch, is_async=True, on_violation=Violations(log))],
        from_list(map(text_delta, "abcd")),
        mode=mode,
    ) as stream:
        async for chunk in stream:
            log.append(chunk)
    assert [
        (x.message, x.blocking) if isinstance(x, ProcessorViolation) else texts([x])[0]
        for x in log
    ] == [("saw a", False), "a", "b", ("saw c", False), "c", "d"]
    assert stream.outcome is not None
    assert stream.outcome.kind == "completed"


@each_mode
async def test_on_violation_errors_are_logged_and_swallowed(
    mode: ExecutionMode, caplog: pytest.LogCaptureFixture
) -> None:
    def on_violation(violation: ProcessorViolation) -> None:
        raise RuntimeError(f"listener broke on {violation.message}")

    def watch(args: ProcessOutputStreamArgs) -> Any:
        if part_text(args) == "a":
            args.report_violation("hm")
        if part_text(args) == "c":
            args.abort("stop")
        return args.part

    chunks, stream = await run(
        [Scripted("watch", watch, on_violation=on_violation)],
        map(text_delta, "abcd"),
        mode,
    )
    assert texts(chunks) == ["a", "b", "tripwire"]
    assert stream.outcome is not None
    assert stream.outcome.kind == "tripwire"
    failures = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [str(r.exc_info[1]) for r in failures if r.exc_info] == [
        "listener broke on hm",
        "listener broke on stop",
    ]
    assert all("'watch'" in r.getMessage() for r in failures)


# --- retries and error chunks ------------------------------------------------------


@each_mode
async def test_a_retry_request_without_a_driver_is_a_tripwire(
    mode: ExecutionMode,
) -> None:
    def again(args: ProcessOutputStreamArgs) -> Any:
        if part_text(args) == "b":
            args.abort("try again", retry=True)
        return args.part

    chunks, stream = await run([Scripted("picky", again)], map(text_delta, "abc"), mode)
    assert texts(chunks) == ["a", "tripwire"]
    assert chunks[-1].payload.retry is True
    assert chunks[-1].payload.processor_id == "picky"
    assert stream.outcome is not None
    assert stream.outcome.kind == "tripwire"


@each_mode
async def test_an_accepted_retry_discards_the_rest_of_the_attempt(
    mode: ExecutionMode,
) -> None:
    seen: list[tuple[str, int, list[str]]] = []

    def picky(args: ProcessOutputStreamArgs) -> Any:
        seen.append((part_text(args), args.retry_count, texts(args.stream_parts)))
        if part_text(args) == "b" and args.retry_count == 0:
            args.abort("try again", retry=True)
        return args.part

    driver = Driver(accept=True)
    after = Recorder("after")
    async with open_output_pipeline(
        [Scripted("picky", picky), after],
        attempts(
            driver,
            [
                [text_delta(t) for t in "abcd"],
                [text_delta(t) for t in "ef"],
            ],
        ),
        mode=mode,
        driver=driver,
    ) as stream:
        chunks = [chunk async for chunk in stream]
    assert texts(chunks) == ["a", "e", "f"]
    assert [t.reason for t in driver.retry_requests] == ["try again"]
    assert texts(after.seen) == ["a", "e", "f"]
    assert seen == [
        ("a", 0, ["a"]),
        ("b", 0, ["a", "b"]),
        ("e", 1, ["e"]),
        ("f", 1, ["e", "f"]),
    ]
    assert stream.outcome is not None
    assert stream.outcome.kind == "completed"


@each_mode
async def test_a_refused_retry_is_a_tripwire(mode: ExecutionMode) -> None:
    def again(args: ProcessOutputStreamArgs) -> Any:
        if part_text(args) == "b":
            args.abort("try again", retry=True)
        return args.part

    driver = Driver(accept=False)
    async with open_output_pipeline(
        [Scripted("picky", again)],
        attempts(driver, [[text_delta(t) for t in "abc"]]),
        mode=mode,
        driver=driver,
    ) as stream:
        chunks = [chunk async for chunk in stream]
    assert texts(chunks) == ["a", "tripwire"]
    assert chunks[-1].payload.retry is True
    assert len(driver.retry_requests) == 1


@each_mode
async def test_a_recovered_error_chunk_never_reaches_processors(
    mode: ExecutionMode,
) -> None:
    failure = error({"message": "overloaded"})
    driver = Driver(accept=True)
    recorder = Recorder("recorder", data_parts=True)
    async with open_output_pipeline(
        [recorder],
        attempts(
            driver, [[text_delta("a"), failure, text_delta("x")], [text_delta("b")]]
        ),
        mode=mode,
        driver=driver,
    ) as stream:
        chunks = [chunk async for chunk in stream]
    assert texts(chunks) == ["a", "b"]
    assert texts(recorder.seen) == ["a", "b"]
    assert driver.errors == [failure]


@each_mode
async def test_an_unrecovered_error_chunk_is_seen_once(mode: ExecutionMode) -> None:
    failure = error({"message": "overloaded"})
    driver = Driver(accept=False)
    recorder = Recorder("recorder")
    async with open_output_pipeline(
        [recorder],
        attempts(driver, [[text_delta("a"), failure]]),
        mode=mode,
        driver=driver,
    ) as stream:
        chunks = [chunk async for chunk in stream]
    assert texts(chunks) == ["a", "error"]
    assert chunks[-1] is failure
    assert texts(recorder.seen) == ["a", "error"]
    assert driver.errors == [failure]


# --- leaving early, cancellation ----------------------------------------------------


@each_mode
@pytest.mark.parametrize("stalls", [False, True])
async def test_leaving_early_closes_the_source_and_every_task(
    mode: ExecutionMode, stalls: bool, autojump_clock: trio.testing.MockClock
) -> None:
    events: list[str] = []
    tasks: set[trio.lowlevel.Task] = set()

    async def source() -> AsyncIterator[Any]:
        tasks.add(trio.lowlevel.current_task())
        try:
            for n in range(1_000_000):
                if stalls and n == 3:
                    await trio.sleep_forever()
                yield text_delta(str(n))
        finally:
            events.append("source closed")

    def hook(args: ProcessOutputStreamArgs) -> Any:
        tasks.add(trio.lowlevel.current_task())
        return args.part

    signal = AbortSignal()
    start = trio.current_time()
    async with open_output_pipeline(
        [Scripted("p", hook), Scripted("q", hook, is_async=True)],
        source(),
        mode=mode,
        abort_signal=signal,
    ) as stream:
        async for _chunk in stream:
            break
        assert events == []
    events.append("block left")
    assert events == ["source closed", "block left"]
    assert trio.current_time() == start  # nothing waited for a grace period
    assert trio.lowlevel.current_task().child_nurseries == []
    me = trio.lowlevel.current_task()
    assert len(tasks - {me}) == (0 if mode != "actors" else 3)
    for task in tasks - {me}:
        assert inspect.getcoroutinestate(task.coro) == inspect.CORO_CLOSED
    assert stream.outcome is not None
    assert stream.outcome.kind == "cancelled"
    assert signal.aborted
    assert signal.reason == "the output stream was closed early"


@each_mode
async def test_reading_to_the_end_does_not_set_the_abort_signal(
    mode: ExecutionMode,
) -> None:
    signal = AbortSignal()
    chunks, stream = await run(
        [Recorder()], map(text_delta, "ab"), mode, abort_signal=signal
    )
    assert texts(chunks) == ["a", "b"]
    assert stream.outcome is not None
    assert stream.outcome.kind == "completed"
    assert not signal.aborted


@each_mode
@pytest.mark.parametrize("checkpoint_every", [1, 16, 64])
async def test_a_source_that_never_blocks_is_cancelled_within_the_budget(
    mode: ExecutionMode,
    checkpoint_every: int,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A backlog (an async generator with no awaits) never reaches a checkpoint
    of its own; the pipeline must take one at least every ``checkpoint_every``
    source items, or a deadline would be ignored until the stream ends."""
    deadline_passes_at = 1000
    produced = 0
    chunk = text_delta("x")

    async def backlog() -> AsyncIterator[Any]:
        nonlocal produced
        for _ in range(300_000):
            produced += 1
            if produced == deadline_passes_at:
                autojump_clock.jump(60)  # the deadline passes while we are busy
            yield chunk

    delivered = 0
    with trio.move_on_after(1) as scope:
        async with open_output_pipeline(
            [Recorder("p"), Scripted("q", lambda args: args.part, is_async=False)],
            backlog(),
            mode=mode,
            checkpoint_every=checkpoint_every,
        ) as stream:
            async for _ in stream:
                delivered += 1
    assert scope.cancelled_caught
    assert deadline_passes_at <= produced <= deadline_passes_at + checkpoint_every
    assert delivered <= produced
    assert stream.outcome is not None
    assert stream.outcome.kind == "cancelled"


# --- actors: overlap and serialisation ----------------------------------------------


@each_mode
async def test_slow_async_hooks_overlap_in_actors_mode_and_once_split(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    """Two stages that each take 1 s (virtual) per chunk, three chunks: one
    after the other that is 6 s; pipelined, the second stage works on chunk i
    while the first works on chunk i+1, so 4 s. Adaptive: the first chunk goes
    through both inline (its hooks are seen to park), the other two pipelined."""

    class Slow:
        def __init__(self, id: str) -> None:
            self.id = id

        async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            await trio.sleep(1)
            return args.part

    start = trio.current_time()
    chunks, _ = await run([Slow("s1"), Slow("s2")], map(text_delta, "abc"), mode)
    assert texts(chunks) == ["a", "b", "c"]
    expected = {"actors": 4.0, "adaptive": 5.0, "fused": 6.0}
    assert trio.current_time() - start == expected[mode]


@each_mode
async def test_an_actors_hooks_never_overlap_with_its_stream_hook(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    class Busy:
        id = "busy"

        def __init__(self) -> None:
            self.running: list[str] = []
            self.log: list[tuple[str, str, float]] = []
            self.most_at_once = 0

        async def _work(self, what: str) -> None:
            self.running.append(what)
            self.most_at_once = max(self.most_at_once, len(self.running))
            self.log.append(("enter", what, trio.current_time()))
            await trio.sleep(1)
            self.log.append(("exit", what, trio.current_time()))
            self.running.remove(what)

        async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            await self._work(f"stream {part_text(args)}")
            return args.part

        async def process_output_step(self, args: HookArgs) -> None:
            await self._work("step")

    busy = Busy()
    [spec] = register_processors(output=[busy]).output
    actor = ProcessorActor(spec)

    async def call_step(delay: float) -> None:
        await trio.sleep(delay)
        await actor.call(
            "process_output_step", HookArgs(processor_id="busy", state=actor.state)
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call_step, 0)
        nursery.start_soon(call_step, 1.5)
        async with open_output_pipeline(
            [actor], from_list(map(text_delta, "abc")), mode=mode
        ) as stream:
            chunks = [chunk async for chunk in stream]
    assert texts(chunks) == ["a", "b", "c"]
    assert busy.most_at_once == 1
    entered = [what for kind, what, _ in busy.log if kind == "enter"]
    assert sorted(entered) == ["step", "step", "stream a", "stream b", "stream c"]
    # Strictly one after another: each exit is followed by the next enter.
    kinds = [kind for kind, _, _ in busy.log]
    assert kinds == ["enter", "exit"] * 5
    # Five one-second hooks, one at a time.
    assert busy.log[-1][2] - busy.log[0][2] == 5.0


# --- bad input ----------------------------------------------------------------------


@each_mode
async def test_a_source_yielding_a_non_chunk_is_a_configuration_error(
    mode: ExecutionMode,
) -> None:
    with pytest.raises(
        ConfigurationError, match=r"the source yielded 42, which is not"
    ):
        await run([Recorder()], [text_delta("a"), 42], mode)


@each_mode
async def test_a_source_yielding_a_dict_is_told_about_from_wire(
    mode: ExecutionMode,
) -> None:
    wire = to_wire(text_delta("a"))
    with pytest.raises(ConfigurationError, match=r"use from_wire for JSON"):
        await run([], [wire], mode)


@each_mode
async def test_the_sources_own_exception_comes_out_unwrapped(
    mode: ExecutionMode,
) -> None:
    class ProviderDied(Exception):
        pass

    async def source() -> AsyncIterator[Any]:
        yield text_delta("a")
        raise ProviderDied("connection reset")

    seen: list[Any] = []

    async def consume() -> None:
        async with open_output_pipeline([Recorder()], source(), mode=mode) as stream:
            async for chunk in stream:
                seen.append(chunk)

    with pytest.raises(ProviderDied, match=r"connection reset") as caught:
        await consume()
    assert texts(seen) == ["a"]
    assert caught.value.__context__ is None  # not the Cancelled that ended the block


@each_mode
async def test_the_users_own_exception_comes_out_unwrapped(
    mode: ExecutionMode,
) -> None:
    """SPEC §2.7: whatever the block raises comes out as raised, never inside an
    ExceptionGroup of the pipeline's making (its tasks' nursery)."""

    class Mine(Exception):
        pass

    async def consume() -> None:
        async with open_output_pipeline(
            [Recorder()], from_list(map(text_delta, "abc")), mode=mode
        ) as stream:
            async for _chunk in stream:
                raise Mine("from the consumer")

    with pytest.raises(Mine, match=r"from the consumer") as caught:
        await consume()
    assert caught.value.__cause__ is None
    assert not isinstance(caught.value.__context__, BaseExceptionGroup)


@each_mode
async def test_the_users_own_exception_group_is_left_as_it_is(
    mode: ExecutionMode,
) -> None:
    mine = ExceptionGroup("mine", [KeyError("k")])

    async def consume() -> None:
        async with open_output_pipeline(
            [Recorder()], from_list(map(text_delta, "abc")), mode=mode
        ):
            raise mine

    with pytest.raises(ExceptionGroup, match=r"^mine") as caught:
        await consume()
    # trio's cancel scopes may rebuild a group on its way out (split); what
    # matters is that it is the user's group, not wrapped in one of ours.
    assert caught.value.message == "mine"
    assert caught.value.exceptions == mine.exceptions


@pytest.mark.parametrize(
    ("options", "match"),
    [
        (
            {"mode": "adaptive-ish"},
            r"mode must be one of 'adaptive', 'fused', 'actors', got",
        ),
        ({"link_capacity": -1}, r"link_capacity must be a non-negative int.*-1"),
        ({"link_capacity": 1.5}, r"link_capacity must be a non-negative int.*1\.5"),
        ({"link_capacity": True}, r"link_capacity must be a non-negative int.*True"),
        ({"link_capacity": "1"}, r"link_capacity must be a non-negative int.*'1'"),
        ({"checkpoint_every": 0}, r"checkpoint_every must be a positive int, got 0"),
        ({"checkpoint_every": 2.0}, r"checkpoint_every must be a positive int.*2\.0"),
        ({"source": [text_delta("a")]}, r"source must be an async iterable"),
        ({"processors": "p"}, r"processors must be a list of output processors"),
    ],
)
async def test_bad_arguments_are_configuration_errors(
    options: dict[str, Any], match: str
) -> None:
    arguments: dict[str, Any] = {
        "processors": [Recorder()],
        "source": from_list([text_delta("a")]),
        **options,
    }
    processors = arguments.pop("processors")
    source = arguments.pop("source")
    with pytest.raises(ConfigurationError, match=match):
        async with open_output_pipeline(processors, source, **arguments):
            pytest.fail(
                "the pipeline opened"
            )  # pragma: no cover - reached only if the check under test is missing
