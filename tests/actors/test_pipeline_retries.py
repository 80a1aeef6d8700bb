"""The output-stream pipeline in every execution mode: retry requests and error
chunks, with and without a driver that accepts them (SPEC §2.6).
"""

from __future__ import annotations

from typing import Any

from procession.actors import (
    ExecutionMode,
    open_output_pipeline,
)
from procession.chunks import (
    error,
    text_delta,
)
from procession.processors import (
    ProcessOutputStreamArgs,
)
from tests.actors.pipeline_helpers import (
    Driver,
    Recorder,
    Scripted,
    attempts,
    each_mode,
    part_text,
    run,
    texts,
)

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
