"""SPEC §2 rule 10: sequential equivalence at agent level. The same scenario
run fused and as actors gives identical chunks and results."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from _helpers import MODES, StreamGuard, Upper, echo, run_stream, wire

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


def equivalence_scenario(name: str) -> tuple[ScriptedModel, dict[str, Any]]:
    log: list[Any] = []
    processors = [Upper(), DropWord(), Stamp()]
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


@pytest.mark.parametrize(
    "scenario", ["tools", "tripwire", "retry", "error", "step-abort"]
)
async def test_rule10_fused_and_actors_runs_give_identical_chunks(
    scenario: str, autojump_clock: trio.testing.MockClock
) -> None:
    outcomes = []
    for mode in MODES:
        model, options = equivalence_scenario(scenario)
        log = options.pop("log")
        agent = Agent(id="a", model=model, execution_mode=mode, **options)
        chunks, result = await run_stream(agent, run_id="same-run")
        expected = {"tripwire": "tripwire", "step-abort": "tripwire"}
        assert assert_run_shape(chunks) == expected.get(
            scenario, "error" if scenario == "error" else "finish"
        )
        outcomes.append(
            (
                wire(chunks),
                result.text,
                result.finish_reason,
                result.tripwire,
                [c.data for c in result.custom_chunks],
                log,
                len(model.calls),
            )
        )
    fused, actors = outcomes
    assert fused == actors
    assert fused[0]  # something was streamed
    if scenario == "tripwire":
        assert fused[0][-1]["type"] == "tripwire"
        assert fused[5] == [("violation", "leak", True)]
    if scenario == "tools":
        assert fused[1] == "LET ME CHECKIT IS FINE"
        assert any(c["type"] == "data-count" for c in fused[0])
