"""The output-stream pipeline in every execution mode: bad input (a source that
yields what is not a chunk, bad arguments) is a configuration error, and the
source's and the user's own exceptions come out unwrapped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from procession import (
    ConfigurationError,
)
from procession.actors import (
    ExecutionMode,
    open_output_pipeline,
)
from procession.chunks import (
    text_delta,
    to_wire,
)
from tests.actors.pipeline_helpers import (
    Recorder,
    each_mode,
    from_list,
    run,
    texts,
)

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
