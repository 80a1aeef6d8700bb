"""``assert_run_shape`` accepts every well-formed ending and names the chunk out
of place in a malformed one."""

from __future__ import annotations

from typing import Any

import pytest

from procession.chunks import (
    AbortChunk,
    DataChunk,
    ErrorChunk,
    ErrorPayload,
    FinishChunk,
    FinishPayload,
    StartChunk,
    StepFinishChunk,
    StepFinishPayload,
    StepResultInfo,
    StepRetryChunk,
    StepRetryPayload,
    StepStartChunk,
    TextDeltaChunk,
    TextDeltaPayload,
    TripwireChunk,
    TripwirePayload,
)
from procession.testing import assert_run_shape


def start() -> StartChunk:
    return StartChunk()


def step() -> StepStartChunk:
    return StepStartChunk()


def delta() -> TextDeltaChunk:
    return TextDeltaChunk(payload=TextDeltaPayload(id="t", text="x"))


def step_finish(reason: str = "stop") -> StepFinishChunk:
    return StepFinishChunk(
        payload=StepFinishPayload(step_result=StepResultInfo(reason=reason))
    )


def finish(reason: str = "stop") -> FinishChunk:
    return FinishChunk(payload=FinishPayload(step_result=StepResultInfo(reason=reason)))


def error() -> ErrorChunk:
    return ErrorChunk(payload=ErrorPayload(error={"message": "boom"}))


def retry() -> StepRetryChunk:
    return StepRetryChunk(
        payload=StepRetryPayload(step_number=0, reason="r", retry_count=1)
    )


GOOD: list[tuple[list[Any], str]] = [
    ([start(), step(), delta(), step_finish(), finish()], "finish"),
    ([start(), step(), delta(), retry(), step(), step_finish(), finish()], "finish"),
    (
        [start(), step(), error(), step_finish("error"), finish("error")],
        "error",
    ),
    (
        [start(), step(), error(), DataChunk(type="data-a"), finish("error")],
        "error",
    ),
    ([error(), finish("error")], "error"),
    ([start(), step(), step_finish(), finish(), error()], "error"),
    (
        [start(), step(), delta(), TripwireChunk(payload=TripwirePayload(reason="r"))],
        "tripwire",
    ),
    ([start(), step(), delta(), AbortChunk()], "abort"),
]


@pytest.mark.parametrize(("chunks", "end"), GOOD)
def test_well_formed_runs_pass_and_say_how_they_ended(
    chunks: list[Any], end: str
) -> None:
    assert assert_run_shape(chunks) == end


BAD: list[tuple[list[Any], str]] = [
    ([], "got none"),
    ([start(), step(), delta(), step_finish()], "ends with finish"),
    ([start(), step(), step_finish(), finish(), finish()], "terminal chunk before"),
    ([start(), step(), step(), step_finish(), finish()], "while the step"),
    ([start(), step_finish(), finish()], "without a step-start"),
    ([start(), step(), delta(), finish()], "never finished"),
    ([start(), start(), step(), step_finish(), finish()], "start is the first"),
    ([start(), step(), error()], "followed by finish|custom chunks"),
    ([start(), step(), error(), finish("stop")], "reason 'error'"),
    (
        [start(), step(), error(), finish("error"), step_finish("error")],
        "after an error",
    ),
    ([start(), error(), step(), error(), finish("error")], "a second error"),
]


@pytest.mark.parametrize(("chunks", "problem"), BAD)
def test_malformed_runs_fail_naming_the_problem(
    chunks: list[Any], problem: str
) -> None:
    with pytest.raises(AssertionError, match=problem):
        assert_run_shape(chunks)
