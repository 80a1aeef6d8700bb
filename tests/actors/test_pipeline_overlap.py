"""The output-stream pipeline in every execution mode: slow async hooks overlap
in actors mode, while one actor's hooks never overlap with its stream hook.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from procession.actors import (
    ExecutionMode,
    ProcessorActor,
    open_output_pipeline,
)
from procession.chunks import (
    text_delta,
)
from procession.processors import (
    HookArgs,
    ProcessOutputStreamArgs,
    register_processors,
)
from tests.actors.pipeline_helpers import (
    each_mode,
    from_list,
    part_text,
    run,
    texts,
)

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
