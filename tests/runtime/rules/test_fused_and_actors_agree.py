"""SPEC §2 rule 10: sequential equivalence at agent level. The same scenario
run fused and as actors gives identical chunks and results."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from procession import Agent, Processor, ProviderError
from procession.chunks import TextDeltaChunk, data
from procession.processors import ProcessOutputStreamArgs
from procession.testing import (
    ScriptedModel,
    assert_run_shape,
    fail_at,
    text_turn,
    tool_call_turn,
)
from tests.runtime.rules._helpers import (
    MODES,
    StreamGuard,
    Upper,
    echo,
    run_stream,
    wire,
)

# === 10. Sequential equivalence at agent level ===================================


class Stamp(Processor):
    """Writes a custom data chunk at every text-end: how many deltas it has seen
    in this run (from ``stream_parts``, which excludes discarded attempts; its
    ``state`` may legitimately differ between modes, SPEC §2.10)."""

    id = "stamp"

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        if part.type == "text-end":
            n = sum(isinstance(p, TextDeltaChunk) for p in args.stream_parts)
            assert args.writer is not None
            await args.writer.custom(data("count", {"n": n}))
        return part


class DropWord(Processor):
    id = "drop-word"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        text = part.payload.text if isinstance(part, TextDeltaChunk) else ""
        if text.strip().lower() == "um":
            return None
        return part


class Parker(Processor):
    """Waits a millisecond (trio's clock) on every chunk: its hook parks, so an
    adaptive run puts it behind a boundary of its own."""

    def __init__(self, id: str, boundary: bool | None = None) -> None:
        self.id = id
        self.stream_boundary = boundary

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        await trio.sleep(0.001)
        return args.part


def equivalence_scenario(
    name: str, parked: bool = False
) -> tuple[ScriptedModel, dict[str, Any]]:
    log: list[Any] = []
    processors: list[Any] = [Upper(), DropWord(), Stamp()]
    if parked:
        # Boundaries found by watching (before and after the others) and one
        # asked for: the adaptive run splits, the others run as they do.
        processors = [Parker("park-1"), Upper(), Parker("park-2", True), DropWord()]
        processors += [Stamp(), Parker("park-3")]
    if name == "tools":
        turns: list[Any] = [
            [*text_turn("let me um check"), *tool_call_turn("echo", {"text": "a"})],
            text_turn("it is um fine"),
        ]
    elif name == "tripwire":
        turns = [text_turn("one two um secret three four")]
        processors.append(StreamGuard(log))
    elif name == "error":
        turns = [
            tool_call_turn("echo", {"text": "a"}),
            fail_at(text_turn("it um broke here"), 3, ProviderError("gone")),
        ]
    elif name == "step-abort":
        turns = [text_turn("an um answer")]

        class RejectStep(Processor):
            id = "reject-step"

            def process_output_step(self, args: Any) -> None:
                args.abort("not this one")

        processors.append(RejectStep())
    else:
        turns = [text_turn("a bad um answer"), text_turn("a good um answer")]

        class RejectStream(Processor):
            id = "reject-stream"

            def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
                part = args.part
                if isinstance(part, TextDeltaChunk) and "BAD" in part.payload.text:
                    args.abort("no bad", retry=True)
                return part

        processors.append(RejectStream())
    options = {
        "output_processors": processors,
        "tools": [echo],
        "max_processor_retries": 2,
        "log": log,
    }
    return ScriptedModel(turns), options


@pytest.mark.parametrize("parked", [False, True])
@pytest.mark.parametrize(
    "scenario", ["tools", "tripwire", "retry", "error", "step-abort"]
)
async def test_rule10_fused_and_actors_runs_give_identical_chunks(
    scenario: str, parked: bool, autojump_clock: trio.testing.MockClock
) -> None:
    outcomes = []
    usages: list[dict[str, int]] = []
    for mode in MODES:
        model, options = equivalence_scenario(scenario, parked)
        log = options.pop("log")
        agent = Agent(id="a", model=model, execution_mode=mode, **options)
        chunks, result = await run_stream(agent, run_id="same-run")
        expected = {"tripwire": "tripwire", "step-abort": "tripwire"}
        assert assert_run_shape(chunks) == expected.get(
            scenario, "error" if scenario == "error" else "finish"
        )
        shown = wire(chunks)
        if parked and scenario == "retry":
            # The run's usage counts what was read of the rejected attempt: a
            # split adaptive run may have read the model's response further
            # before the rejection reached the client end (README deviations).
            # It is never less than a fused run's.
            usages.append(shown[-1]["payload"].pop("output")["usage"])
        outcomes.append(
            (
                shown,
                result.text,
                result.finish_reason,
                result.tripwire,
                [c.data for c in result.custom_chunks],
                log,
                len(model.calls),
            )
        )
    fused = outcomes[0]
    for other in outcomes[1:]:
        assert other == fused
    if usages:
        adaptive, *others = usages  # MODES begins with "adaptive"
        assert all(adaptive[k] >= u[k] for u in others for k in u)
    assert fused[0]  # something was streamed
    if scenario == "tripwire":
        assert fused[0][-1]["type"] == "tripwire"
        assert fused[5] == [("violation", "leak", True)]
    if scenario == "tools":
        assert fused[1] == "LET ME CHECKIT IS FINE"
        assert any(c["type"] == "data-count" for c in fused[0])
