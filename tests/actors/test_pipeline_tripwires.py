"""The output-stream pipeline in every execution mode: tripwires, the failure
policies (``on_error``) and reported violations (SPEC §2.2, 2.6).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing

from procession import (
    ProcessorContractError,
    ProcessorError,
    TripWire,
)
from procession.actors import (
    ExecutionMode,
    open_output_pipeline,
)
from procession.chunks import (
    ErrorChunk,
    TripwireChunk,
    text_delta,
    to_wire,
)
from procession.processors import (
    ProcessorViolation,
    ProcessOutputStreamArgs,
)
from tests.actors.pipeline_helpers import (
    Recorder,
    Scripted,
    each_mode,
    from_list,
    part_text,
    run,
    texts,
)

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


def _assert_only_a_tripwire(
    chunks: list[Any], stream: Any, *, by: str, reason: str
) -> None:
    """The stream gave one chunk, the tripwire of processor ``by`` with
    ``reason``, and ended as a tripwire."""
    assert len(chunks) == 1
    assert isinstance(chunks[0], TripwireChunk)
    assert chunks[0].payload.processor_id == by
    assert chunks[0].payload.reason == reason
    assert stream.outcome is not None
    assert stream.outcome.kind == "tripwire"


@each_mode
async def test_a_tripwire_raised_directly_is_attributed_to_its_processor(
    mode: ExecutionMode,
) -> None:
    def raise_it(args: ProcessOutputStreamArgs) -> Any:
        raise TripWire("raw tripwire")

    chunks, stream = await run(
        [Recorder("first"), Scripted("raw", raise_it)], [text_delta("a")], mode
    )
    _assert_only_a_tripwire(chunks, stream, by="raw", reason="raw tripwire")


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
    _assert_only_a_tripwire(
        chunks, stream, by="nursery", reason="found in a child task"
    )


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
