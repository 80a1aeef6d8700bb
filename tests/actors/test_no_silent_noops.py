"""The pipeline's side of issue 9 §2.2 and §3: nothing forged, nothing silent.

* ``writer.custom`` of anything but a ``data-*`` chunk fails the hook (under
  its ``on_error`` policy) instead of forging the run's own chunks;
* a processor that dropped every chunk of a step (a hook that forgot its
  ``return``) is named once per run on the ``procession`` logger;
* ``on_error="pass"`` logs the first failure with its traceback and only a
  count of the rest.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest

from procession import ProcessorContractError
from procession.actors import ExecutionMode, OutputPipeline, open_output_pipeline
from procession.chunks import (
    FinishChunk,
    StepFinishChunk,
    TextDeltaChunk,
    finish,
    step_finish,
    step_start,
    text_delta,
)
from procession.processors import ProcessOutputStreamArgs

MODES: tuple[ExecutionMode, ...] = ("adaptive", "fused", "actors")
each_mode = pytest.mark.parametrize("mode", MODES)

DROPPED_ALL = "dropped every chunk"


async def from_list(items: Iterable[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


async def run(
    processors: list[Any], items: Iterable[Any], mode: ExecutionMode
) -> tuple[list[Any], OutputPipeline]:
    async with open_output_pipeline(
        processors, from_list(items), run_id="run-1", mode=mode
    ) as stream:
        chunks = [chunk async for chunk in stream]
    return chunks, stream


def kinds(chunks: Iterable[Any]) -> list[str]:
    return [c.payload.text if isinstance(c, TextDeltaChunk) else c.type for c in chunks]


def warnings_of(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "procession"
        and r.levelno == logging.WARNING
        and text in r.getMessage()
    ]


# --- writer.custom forges nothing (§2.2) -------------------------------------------


class Forwarder:
    """Forwards what it believes is a tool's JSON event as custom output on
    chunk "b"."""

    def __init__(self, on_error: str = "raise") -> None:
        self.id = "forwarder"
        self.on_error = on_error

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        if isinstance(part, TextDeltaChunk) and part.payload.text == "b":
            assert args.writer is not None
            args.writer.custom_nowait(
                {"type": "tripwire", "payload": {"reason": "forged", "retry": False}}
            )
        return part


@each_mode
async def test_a_forged_tripwire_fails_the_processor_instead(
    mode: ExecutionMode,
) -> None:
    """The run ends with the processor's contract error (no tripwire, and
    nothing after the error chunk), naming the processor and the type."""
    chunks, stream = await run([Forwarder()], map(text_delta, ["a", "b", "c"]), mode)
    assert kinds(chunks) == ["a", "error"]
    assert stream.outcome is not None
    assert stream.outcome.kind == "error"
    assert stream.outcome.tripwire is None
    error = stream.outcome.error
    assert isinstance(error, ProcessorContractError)
    assert error.processor_id == "forwarder"
    assert "writer.custom accepts only 'data-*' chunks, got a 'tripwire'" in str(error)


@each_mode
async def test_a_forged_tripwire_under_pass_is_dropped_and_the_run_goes_on(
    mode: ExecutionMode, caplog: pytest.LogCaptureFixture
) -> None:
    chunks, stream = await run(
        [Forwarder(on_error="pass")], map(text_delta, ["a", "b", "c"]), mode
    )
    assert kinds(chunks) == ["a", "b", "c"]
    assert stream.outcome is not None
    assert stream.outcome.kind == "completed"
    assert warnings_of(caplog, "processor 'forwarder' failed in process_output_stream")


# --- a hook that forgot its return (§3) ----------------------------------------------


class Dropper:
    """Returns None (drops) for the chunks ``drops`` selects; passes the rest."""

    def __init__(self, id: str, drops: Any) -> None:
        self.id = id
        self.drops = drops

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        if self.drops(args.part):
            return None
        return args.part


def forgetful(id: str = "forgetful") -> Dropper:
    return Dropper(id, lambda part: True)


TWO_STEPS = [
    step_start(),
    text_delta("a"),
    step_finish(),
    step_start(),
    text_delta("b"),
    step_finish(),
    finish(),
]


@each_mode
async def test_a_processor_that_drops_every_chunk_of_a_step_is_named_once(
    mode: ExecutionMode, caplog: pytest.LogCaptureFixture
) -> None:
    """Two steps, every chunk dropped: one warning for the run, naming the
    processor and the likely cause."""
    chunks, _ = await run([forgetful()], TWO_STEPS, mode)
    assert chunks == []
    warned = warnings_of(caplog, DROPPED_ALL)
    assert len(warned) == 1
    assert "processor 'forgetful' dropped every chunk of a step" in warned[0]
    assert "forget to return args.part" in warned[0]


@each_mode
async def test_a_step_dropped_whole_after_a_good_one_is_named(
    mode: ExecutionMode, caplog: pytest.LogCaptureFixture
) -> None:
    """The first step passes; the second is dropped whole (step-start to
    step-finish): that is a step with every chunk dropped."""
    first = TWO_STEPS[:3]
    later = Dropper("later", lambda part: not any(part is c for c in first))
    chunks, _ = await run([later], TWO_STEPS, mode)
    assert kinds(chunks) == ["step-start", "a", "step-finish"]
    assert len(warnings_of(caplog, "processor 'later' dropped every chunk")) == 1


@each_mode
@pytest.mark.parametrize(
    "drops",
    [
        pytest.param(lambda p: isinstance(p, TextDeltaChunk), id="text only"),
        pytest.param(lambda p: isinstance(p, StepFinishChunk), id="step-finish only"),
        pytest.param(lambda p: isinstance(p, FinishChunk), id="the finish only"),
    ],
)
async def test_dropping_some_chunks_is_not_warned_about(
    mode: ExecutionMode, drops: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Dropping is legal (the seed): only a processor that dropped a whole
    step is named. Hiding the run's closing finish is not a step."""
    await run([Dropper("picky", drops)], TWO_STEPS, mode)
    assert warnings_of(caplog, DROPPED_ALL) == []


@each_mode
async def test_a_bare_stream_dropped_whole_is_named_at_its_end(
    mode: ExecutionMode, caplog: pytest.LogCaptureFixture
) -> None:
    """A stream without steps (the bare pipeline) is checked when it ends; only
    the processor that dropped everything is named."""
    chunks, _ = await run(
        [Dropper("passes", lambda p: False), forgetful()],
        map(text_delta, "abc"),
        mode,
    )
    assert chunks == []
    warned = warnings_of(caplog, DROPPED_ALL)
    assert len(warned) == 1
    assert "processor 'forgetful' dropped every chunk it was shown" in warned[0]


# --- on_error="pass" logs one traceback (§3) -----------------------------------------


class Broken:
    id = "broken"
    on_error = "pass"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        raise ValueError(f"broken on {len(args.stream_parts)}")


@each_mode
async def test_pass_logs_the_first_failure_with_its_traceback_then_a_count(
    mode: ExecutionMode, caplog: pytest.LogCaptureFixture
) -> None:
    """Seven failing chunks: one traceback (the first failure's), then one
    line with the count of the other six when the stream ends."""
    chunks, _ = await run([Broken()], map(text_delta, "abcdefg"), mode)
    assert kinds(chunks) == list("abcdefg")  # passed on unchanged
    records = [r for r in caplog.records if r.name == "procession"]
    with_traceback = [r for r in records if r.exc_info]
    assert len(with_traceback) == 1
    assert "ValueError('broken on 1')" in with_traceback[0].getMessage()
    counted = warnings_of(caplog, "6 more times")
    assert len(counted) == 1
    assert (
        "processor 'broken' failed in process_output_stream 6 more times"
        in (counted[0])
    )
    assert len(records) == 2


@each_mode
async def test_a_single_pass_failure_is_logged_once_with_no_count(
    mode: ExecutionMode, caplog: pytest.LogCaptureFixture
) -> None:
    class Once(Broken):
        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            if len(args.stream_parts) == 2:
                raise ValueError("once")
            return args.part

    await run([Once()], map(text_delta, "abc"), mode)
    records = [r for r in caplog.records if r.name == "procession"]
    assert len(records) == 1
    assert records[0].exc_info
    assert warnings_of(caplog, "more times") == []
