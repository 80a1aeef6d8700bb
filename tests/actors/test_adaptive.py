"""The adaptive execution mode: fused until a hook parks, then a boundary."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from procession import Agent, ConfigurationError
from procession.actors import ExecutionMode, open_output_pipeline
from procession.actors import _watch as watch_module
from procession.chunks import DataChunk, TextDeltaChunk, data, text_delta
from procession.processors import ProcessOutputStreamArgs
from procession.testing import ScriptedModel


async def numbered(count: int) -> AsyncIterator[Any]:
    for n in range(count):
        yield text_delta(str(n))


async def letters(text: str) -> AsyncIterator[Any]:
    for letter in text:
        yield text_delta(letter)


class Where:
    """Records the task each call of its hook runs in; waits as told first."""

    def __init__(
        self, id: str, wait: str = "none", *, boundary: bool | None = None
    ) -> None:
        self.id = id
        self.wait = wait
        self.tasks: list[trio.lowlevel.Task] = []
        if boundary is not None:
            self.stream_boundary = boundary

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        self.tasks.append(trio.lowlevel.current_task())
        if self.wait == "park":
            await trio.sleep(0.001)
        elif self.wait == "checkpoint":
            await trio.lowlevel.checkpoint()
        return args.part


async def read(processors: list[Any], count: int = 10, **options: Any) -> list[str]:
    async with open_output_pipeline(
        processors, numbered(count), mode="adaptive", **options
    ) as stream:
        return [c.payload.text async for c in stream if isinstance(c, TextDeltaChunk)]


async def test_a_hook_that_parks_gets_a_task_of_its_own_from_its_next_chunk(
    autojump_clock: trio.testing.MockClock,
) -> None:
    me = trio.lowlevel.current_task()
    parker = Where("parker", "park")
    assert await read([parker]) == [str(n) for n in range(10)]
    # Call 1 is driven (on probation) and seen to park: it finishes inline.
    assert parker.tasks[:1] == [me]
    assert all(task is not me for task in parker.tasks[1:])
    assert len(set(parker.tasks[1:])) == 1


class Late(Where):
    """Parks on its 70th call only: after its probation (64 calls)."""

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        self.tasks.append(trio.lowlevel.current_task())
        if len(self.tasks) in (70, 80):
            await trio.sleep(0.001)
        return args.part


async def test_a_hook_that_parks_only_after_its_probation_is_found_on_its_second_park(
    autojump_clock: trio.testing.MockClock,
) -> None:
    me = trio.lowlevel.current_task()
    late = Late("late")
    assert len(await read([late], 100)) == 100
    # Call 70 only yields as far as the counter can tell; call 80 is driven.
    assert late.tasks[:80] == [me] * 80
    assert me not in late.tasks[80:]


@pytest.mark.parametrize("wait", ["none", "checkpoint"])
async def test_a_hook_that_never_parks_stays_inline(
    wait: str, autojump_clock: trio.testing.MockClock
) -> None:
    me = trio.lowlevel.current_task()
    hook = Where("inline", wait)
    assert len(await read([hook], 50)) == 50
    assert hook.tasks == [me] * 50


async def test_a_processor_may_ask_for_a_boundary_or_refuse_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    me = trio.lowlevel.current_task()
    refused = Where("refused", "park", boundary=False)
    assert len(await read([refused])) == 10
    assert refused.tasks == [me] * 10  # parks on every chunk, stays inline
    asked = Where("asked", boundary=True)
    refused = Where("refused", "park", boundary=False)
    assert len(await read([asked, refused])) == 10
    assert me not in asked.tasks  # from its first chunk
    assert refused.tasks == asked.tasks  # never a boundary of its own


async def test_stages_after_a_boundary_move_with_it_and_before_it_stay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    me = trio.lowlevel.current_task()
    first, parker, last = Where("first"), Where("parker", "park"), Where("last")
    assert len(await read([first, parker, last], 20)) == 20
    # After the split the feeder task runs "first"; the parker's task "last".
    assert first.tasks[:1] == [me]
    assert me not in first.tasks[2:]
    assert set(last.tasks[2:]) == set(parker.tasks[2:])
    assert set(first.tasks[2:]).isdisjoint(parker.tasks[2:])


async def test_a_stalled_consumer_bounds_what_a_split_pipeline_reads_ahead(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_output_pipeline(
        [Where("a", boundary=True), Where("b", boundary=True)],
        numbered(5_000),
        mode="adaptive",
    ) as stream:
        async for _chunk in stream:
            await trio.sleep(1000)  # everything else runs until it blocks
            break
        stats = stream.statistics()
    assert stats.mode == "adaptive"
    assert stats.peak_in_flight <= stats.bound < 5_000
    assert stats.pulled <= stats.bound


class EveryFiftieth:
    """Waits 1 ms on every 50th chunk it is shown (issue 10's I/O row)."""

    def __init__(self, id: str, *, boundary: bool | None = None) -> None:
        self.id = id
        if boundary is not None:
            self.stream_boundary = boundary

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        if len(args.stream_parts) % 50 == 0:
            await trio.sleep(0.001)
        return args.part


async def test_slow_processors_overlap_through_agent_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Five processors each wait 1 ms (trio's clock) on every 50th chunk of a
    # 2,000-chunk answer: 200 ms one after another; overlapped, about 40 ms.
    words = [text_delta(f"w{n} ") for n in range(2_000)]
    texts = {}
    elapsed = {}
    for mode in ("fused", "adaptive"):
        agent = Agent(
            id="a",
            model=ScriptedModel([words]),
            output_processors=[EveryFiftieth(f"p{k}") for k in range(5)],
            execution_mode=mode,
        )
        start = trio.current_time()
        async with agent.stream("go") as stream:
            result = await stream.result()
        elapsed[mode] = trio.current_time() - start
        texts[mode] = result.text
    assert (
        texts["adaptive"] == texts["fused"] == "".join(f"w{n} " for n in range(2_000))
    )
    assert elapsed["fused"] == pytest.approx(0.2, rel=0.05)
    assert elapsed["adaptive"] <= 0.3 * elapsed["fused"]


@pytest.mark.parametrize(
    ("boundary", "waits"),
    [
        # Each stage's first park (all on chunk 50) runs inline, one after
        # another, before the split (5 waits); then the pipeline fills again
        # (4 waits until the last stage parks on chunk 100) and the last stage
        # waits 39 more times, the others' waits beside its own.
        (None, 5 + 4 + 39),
        # Split from the start: chunk 50 through the five waits, then 39 more.
        (True, 5 + 39),
    ],
)
async def test_a_split_run_of_slow_processors_lasts_its_chain_of_waits(
    boundary: bool | None, waits: int, autojump_clock: trio.testing.MockClock
) -> None:
    # On trio's clock only the waits take time: the run lasts as long as the
    # longest chain of waits one after another (see benchmarks/io_overlap.py
    # --trace for the real clock, where each of these waits costs ~1.1 ms).
    words = [text_delta(f"w{n} ") for n in range(2_000)]
    agent = Agent(
        id="a",
        model=ScriptedModel([words]),
        output_processors=[EveryFiftieth(f"p{k}", boundary=boundary) for k in range(5)],
    )
    start = trio.current_time()
    async with agent.stream("go") as stream:
        result = await stream.result()
    assert trio.current_time() - start == pytest.approx(waits * 0.001)
    assert result.text == "".join(f"w{n} " for n in range(2_000))


class Edits:
    """Splits "b" in two, drops "d", writes a note on "c", aborts on "f";
    records the task it ran in. A boundary from the start."""

    stream_boundary = True

    def __init__(self, id: str) -> None:
        self.id = id
        self.tasks: list[trio.lowlevel.Task] = []

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        self.tasks.append(trio.lowlevel.current_task())
        part = args.part
        assert isinstance(part, TextDeltaChunk)
        text = part.payload.text
        if text == "b":
            return [
                part,
                attrs.evolve(part, payload=attrs.evolve(part.payload, text="b2")),
            ]
        if text == "c":
            assert args.writer is not None
            args.writer.custom_nowait(data("note", {"on": text}))
        if text == "d":
            return None
        if text == "f":
            args.abort("no f")
        return part


@pytest.mark.parametrize("mode", ["fused", "adaptive"])
async def test_a_segment_passes_lists_drops_notes_and_aborts_on_in_order(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    me = trio.lowlevel.current_task()
    first, second = Edits("first"), Edits("second")
    seen = []
    async with open_output_pipeline(
        [first, second], letters("abcdefg"), mode=mode
    ) as stream:
        async for chunk in stream:
            if isinstance(chunk, TextDeltaChunk):
                seen.append(chunk.payload.text)
            elif isinstance(chunk, DataChunk):
                seen.append(f"{chunk.type}:{chunk.data['on']}")
            else:
                seen.append(chunk.type)
    # "second" splits "b" and "b2" is not "b": one note per processor on "c".
    expected = ["a", "b", "b2", "b2", "data-note:c", "data-note:c", "c", "e"]
    assert seen == [*expected, "tripwire"]
    assert stream.outcome is not None
    assert stream.outcome.kind == "tripwire"
    assert (me in first.tasks + second.tasks) is (mode == "fused")


async def test_where_trio_counts_no_schedule_points_every_call_is_driven(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch_module, "_has_schedule_points", lambda: False)
    me = trio.lowlevel.current_task()
    late = Late("late")
    assert len(await read([late], 100)) == 100
    # Driven for ever, so found on its first park, even after the probation.
    assert late.tasks[:70] == [me] * 70
    assert me not in late.tasks[70:]


async def test_where_the_park_trap_is_unknown_every_yield_counts(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch_module, "_PARK_TRAP", None)
    me = trio.lowlevel.current_task()
    hook = Where("checkpointer", "checkpoint")
    assert len(await read([hook])) == 10
    assert hook.tasks[:1] == [me]
    assert me not in hook.tasks[1:]


def test_a_stream_boundary_that_is_not_a_bool_is_refused() -> None:
    async def main() -> None:
        async with open_output_pipeline(
            [Where("odd", boundary="yes")],  # type: ignore[arg-type]  # on purpose
            numbered(1),
        ):
            pass

    with pytest.raises(ConfigurationError, match="'odd': stream_boundary is 'yes'"):
        trio.run(main)


def test_the_default_mode_is_adaptive() -> None:
    assert Agent(id="a", model=ScriptedModel([])).execution_mode == "adaptive"


class Switch(Where):
    """Quiet until ``park`` is set, then parks on every call."""

    park = False

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        self.tasks.append(trio.lowlevel.current_task())
        if self.park:
            await trio.sleep(0.001)
        return args.part


def deltas(count: int) -> list[Any]:
    return [text_delta(str(n)) for n in range(count)]


async def test_a_hook_quiet_through_its_probation_is_counted_from_a_later_runs_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    me = trio.lowlevel.current_task()
    hook = Switch("switch")
    agent = Agent(
        id="a",
        model=ScriptedModel([deltas(70), deltas(10), deltas(10)]),
        output_processors=[hook],
        execution_mode="adaptive",
    )
    await agent.generate("quiet")  # 70 deltas and the lifecycle chunks, inline
    assert hook.tasks == [me] * len(hook.tasks)
    assert len(hook.tasks) > watch_module.PROBATION
    hook.tasks.clear()
    hook.park = True
    await agent.generate("parks")
    # Its probation was served in the run before: the first call is only
    # counted (it parks inline, seen as a yield), the second driven and seen
    # to park; from the third on it has a task of its own.
    assert hook.tasks[:2] == [me, me]
    assert me not in hook.tasks[2:]
    hook.tasks.clear()
    await agent.generate("parks again")
    # The park started its probation over: found on its first park again.
    assert hook.tasks[:1] == [me]
    assert me not in hook.tasks[1:]
