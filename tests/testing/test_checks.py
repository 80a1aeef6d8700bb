"""The ready-made checks (split invariance, mode agreement), the fault builders
for scripted turns, and ``collect_stream``: each check passes a good processor
and catches a bad one."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from typing import Any

import pytest
import trio
import trio.testing

from procession import Agent, ConfigurationError, Processor, ProviderError
from procession.chunks import (
    Chunk,
    TextDeltaChunk,
    data,
    step_finish,
    step_start,
    text_delta,
    text_end,
    text_start,
)
from procession.models import ModelRequest
from procession.processors import ProcessOutputStreamArgs, PromptTextPart
from procession.processors import PromptUserMessage as User
from procession.testing import (
    Delay,
    ScriptedModel,
    ScriptError,
    assert_modes_agree,
    assert_split_invariant,
    collect_stream,
    drip,
    fail_at,
    stall,
    text_turn,
)
from procession.testing._checks import _deterministic_splits

# --------------------------------------------------------------------------- #
# Processors under test
# --------------------------------------------------------------------------- #


class PerDeltaFilter(Processor):
    """Looks at one delta at a time: misses a word cut across two deltas."""

    id = "per-delta"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Chunk:
        part = args.part
        if isinstance(part, TextDeltaChunk) and "secret" in part.payload.text:
            args.abort("secret seen")
        return part


class BufferingFilter(Processor):
    """Holds the block's text until ``text-end``: one verdict for any split."""

    id = "buffering"

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        if isinstance(part, TextDeltaChunk):
            args.state["text"] = args.state.get("text", "") + part.payload.text
            await trio.sleep(0.5)  # on trio's clock: costs no real time
            return None
        if part.type == "text-end":
            text = args.state.pop("text", "")
            if "secret" in text:
                args.abort("secret seen")
            return [text_delta(text), part]
        return part


class CapitaliseDeltas(Processor):
    """Rewrites each delta on its own: the client text depends on the split."""

    id = "capitalise"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Chunk:
        part = args.part
        if isinstance(part, TextDeltaChunk):
            return text_delta(part.payload.text.capitalize())
        return part


class SecondRunBlocks(Processor):
    """Keeps state on ``self`` (not ``args.state``): the second run differs."""

    id = "second-run"

    def __init__(self) -> None:
        self.runs = 0

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Chunk:
        if args.part.type == "step-start":
            self.runs += 1
        if self.runs > 1:
            args.abort("not the first run")
        return args.part


# --------------------------------------------------------------------------- #
# assert_split_invariant
# --------------------------------------------------------------------------- #


def test_a_per_delta_filter_is_caught() -> None:
    with pytest.raises(
        AssertionError, match=r"not split-invariant: streamed as \['t', 'he secret"
    ):
        assert_split_invariant([PerDeltaFilter()], "the secret is out")


def test_a_missed_verdict_is_caught_on_an_explicit_split() -> None:
    with pytest.raises(
        AssertionError,
        match=r"(?s)\['the sec', 'ret'\].*verdict completed.*"
        r"verdict tripwire by 'per-delta': 'secret seen'",
    ):
        assert_split_invariant(
            [PerDeltaFilter()], "the secret", splits=[["the sec", "ret"]]
        )


def test_a_split_dependent_rewrite_is_caught() -> None:
    with pytest.raises(
        AssertionError, match=r"client text 'HEllo'\n.*\n  .*client text 'Hello'"
    ):
        assert_split_invariant([CapitaliseDeltas()], "hello", splits=[["h", "ello"]])


def test_a_buffering_filter_passes_for_blocked_and_clean_text() -> None:
    assert_split_invariant([BufferingFilter()], "the secret is out", max_examples=30)
    assert_split_invariant([BufferingFilter()], "nothing to see", max_examples=30)
    assert_split_invariant([BufferingFilter()], "")


def test_a_factory_gives_each_run_fresh_processors() -> None:
    with pytest.raises(AssertionError, match=r"'not the first run'"):
        assert_split_invariant([SecondRunBlocks()], "abc", max_examples=5)
    assert_split_invariant(lambda: [SecondRunBlocks()], "abc", max_examples=5)


def test_a_split_must_join_back_to_the_text() -> None:
    with pytest.raises(ConfigurationError, match=r"\['ab', 'd'\] does not join back"):
        assert_split_invariant([BufferingFilter()], "abc", splits=[["ab", "d"]])


def test_the_deterministic_splits_are_every_cut_and_per_character() -> None:
    assert _deterministic_splits("abcd") == [
        ["a", "bcd"],
        ["ab", "cd"],
        ["abc", "d"],
        ["a", "b", "c", "d"],
    ]
    assert _deterministic_splits("ab") == [["a", "b"]]
    assert _deterministic_splits("") == []


def test_without_hypothesis_the_deterministic_splits_still_catch_a_bad_filter() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["hypothesis"] = None  # the core install: no testing extra
        from procession.chunks import TextDeltaChunk
        from procession.testing import assert_split_invariant

        class P:
            id = "per-delta"
            def process_output_stream(self, args):
                part = args.part
                if isinstance(part, TextDeltaChunk) and "ab" in part.payload.text:
                    args.abort("ab seen")
                return args.part

        try:
            assert_split_invariant([P()], "xaby")
        except AssertionError as exc:
            print("caught:", str(exc).splitlines()[0])
        print("hypothesis" in sys.modules and sys.modules["hypothesis"] is None)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == [
        "caught: not split-invariant: streamed as ['x', 'aby'] the text gave",
        "True",
    ]


def test_the_checks_refuse_to_run_inside_a_trio_run() -> None:
    async def inside() -> None:
        with pytest.raises(RuntimeError, match=r"call it from a plain 'def test_"):
            assert_split_invariant([BufferingFilter()], "abc")
        with pytest.raises(RuntimeError, match=r"cannot be awaited or called"):
            assert_modes_agree([BufferingFilter()], [text_delta("x")])

    trio.run(inside)


# --------------------------------------------------------------------------- #
# assert_modes_agree
# --------------------------------------------------------------------------- #


class Notes(Processor):
    """Sleeps, writes a custom chunk and splits deltas: mode-independent."""

    id = "notes"

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        await trio.sleep(0.25)
        part = args.part
        if isinstance(part, TextDeltaChunk):
            assert args.writer is not None
            await args.writer.custom(data("seen", {"n": len(args.stream_parts)}))
            return [part, text_delta("|")]
        return part


def block(*pieces: str) -> list[Chunk]:
    return [
        step_start(),
        text_start(),
        *(text_delta(p) for p in pieces),
        text_end(),
        step_finish(),
    ]


def test_mode_independent_chains_agree() -> None:
    assert_modes_agree([Notes(), BufferingFilter()], block("a ", "secret", " b"))
    assert_modes_agree([Notes(), PerDeltaFilter()], block("a", "b", "c"))
    assert_modes_agree([], block("x"))


def test_a_chain_that_reads_a_neighbours_progress_is_caught() -> None:
    # The second processor reports how many chunks the first has seen: in the
    # fused mode (and the reference) always its own count, while with a buffer
    # between actors the first runs ahead.
    seen: list[int] = []

    class Counter(Processor):
        id = "counter"

        async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            seen.append(1)
            await trio.lowlevel.checkpoint()
            return args.part

    class Reporter(Processor):
        id = "reporter"

        async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            await trio.lowlevel.checkpoint()
            if isinstance(args.part, TextDeltaChunk):
                return text_delta(f"{args.part.payload.text}{len(seen)}")
            return args.part

    def chain() -> list[object]:
        seen.clear()
        return [Counter(), Reporter()]

    with pytest.raises(
        AssertionError,
        match=r"mode 'actors' \(link_capacity=4\) disagrees with the sequential "
        r"reference:\n  chunk #\d+: ",
    ):
        assert_modes_agree(chain, block(*"abcdefgh"), link_capacities=(4,))


def test_modes_agree_when_read_under_per_read_deadlines() -> None:
    """The heartbeat pattern: Notes sleeps 0.25 s per chunk, so a 0.1 s
    deadline cuts its hook off; it is run again and nothing is lost."""
    assert_modes_agree(
        [Notes(), BufferingFilter()],
        block("a ", "secret", " b"),
        read_deadlines=[0.1, 0.3, 0.02],
    )


def test_per_read_deadlines_catch_a_slow_dropper_at_the_checkpoint() -> None:
    """A hook that drops chunk 63 slowly outlives two reads; the second runs on
    to the pipeline's every-64 checkpoint (issue 9 §2.1: the 64th item was
    lost there)."""

    class SlowDropper(Processor):
        id = "slow-dropper"

        async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            if len(args.stream_parts) == 63:
                await trio.sleep(2.0)
                return None
            return args.part

    assert_modes_agree(
        [SlowDropper()],
        [text_delta(str(n)) for n in range(100)],
        read_deadlines=[1.0],
    )


def test_per_read_deadlines_show_state_changed_before_an_await() -> None:
    """A hook cut off by a read's deadline is called again with the same chunk:
    a processor that counts in ``state`` before its ``await`` counts twice. The
    check names the way of reading that showed it."""

    class Eager(Processor):
        id = "eager"

        async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            part = args.part
            if not isinstance(part, TextDeltaChunk):
                return part
            args.state["n"] = args.state.get("n", 0) + 1
            await trio.sleep(0.25)
            return text_delta(f"{part.payload.text}{args.state['n']}")

    assert_modes_agree([Eager()], block("a", "b"))  # read plainly, it agrees
    with pytest.raises(
        AssertionError,
        match=r"mode '(adaptive|fused)' read under the deadlines \[0\.1\] "
        r"disagrees with the "
        r"sequential reference:\n  chunk #\d+: ",
    ):
        assert_modes_agree([Eager()], block("a", "b"), read_deadlines=[0.1])


def test_per_read_deadlines_no_hook_can_meet_are_reported() -> None:
    """A hook slower than every deadline plus the grace period never finishes:
    the check says so instead of reading for ever."""

    class Stuck(Processor):
        id = "stuck"

        async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            await trio.sleep(100)
            return args.part

    with pytest.raises(
        AssertionError,
        match=r"mode 'adaptive' read under the deadlines \[0\.01\] stalled: no "
        r"chunk for [\d.]+ s of trio's clock: a hook takes longer than a deadline "
        r"plus the pipeline's grace period \(5 s\)",
    ):
        assert_modes_agree([Stuck()], block("a"), read_deadlines=[0.01])


class Slow(Processor):
    """Sleeps ``seconds`` on trio's clock on every chunk."""

    id = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        await trio.sleep(self.seconds)
        return args.part


def test_a_hook_a_thousand_reads_long_is_no_stall() -> None:
    """A 1 s hook under 1 ms deadlines: in actors mode a thousand empty reads
    per chunk (the check gave up at 1,000 once), well inside the grace."""
    assert_modes_agree([Slow(1.0)], block("a"), read_deadlines=[0.001])


GRACE = 5.0  # the pipeline's, on trio's clock (README "Cancelled reads")


def test_a_hook_just_inside_the_grace_passes_and_just_outside_stalls() -> None:
    """A read cut off while a hook awaits lets it run again for the read's
    deadline plus the grace: a hook just shorter finishes in every mode; one
    just longer is cut off every time in fused and adaptive mode."""
    deadline = 0.01
    assert_modes_agree(
        [Slow(deadline + GRACE - 0.01)], block("a"), read_deadlines=[deadline]
    )
    with pytest.raises(
        AssertionError,
        match=r"mode 'adaptive' read under the deadlines \[0\.01\] stalled: no "
        r"chunk for ",
    ):
        assert_modes_agree(
            [Slow(deadline + GRACE + 0.01)], block("a"), read_deadlines=[deadline]
        )


def test_reads_whose_deadline_has_passed_agree_in_every_mode() -> None:
    """A deadline of 0: every read begins cancelled, and still gets each chunk
    that is ready (tests/actors/test_expired_reads.py has the pipeline's
    side). Once the actors mode never gave such a read a chunk."""
    assert_modes_agree([PerDeltaFilter()], block("a", "b", "c"), read_deadlines=[0])
    assert_modes_agree(
        [Notes(), BufferingFilter()], block("a ", "secret"), read_deadlines=[0, 0.1]
    )


@pytest.mark.parametrize("bad", [-0.5, math.nan, "1", True])
def test_read_deadlines_must_be_seconds(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"is not a number of seconds >= 0"):
        assert_modes_agree([PerDeltaFilter()], block("a"), read_deadlines=[0.1, bad])


# --------------------------------------------------------------------------- #
# Fault builders
# --------------------------------------------------------------------------- #


def request() -> ModelRequest:
    return ModelRequest(prompt=[User([PromptTextPart("hi")])])


async def read(model: ScriptedModel) -> tuple[list[str], list[float], Exception | None]:
    """Chunk texts (or types), their arrival times, and the error that ended it."""
    kinds: list[str] = []
    times: list[float] = []
    try:
        async with model.stream(request()) as response:
            async for chunk in response:
                kinds.append(
                    chunk.payload.text
                    if isinstance(chunk, TextDeltaChunk)
                    else chunk.type
                )
                times.append(trio.current_time())
    except ProviderError as exc:
        return kinds, times, exc
    return kinds, times, None


async def test_fail_at_raises_instead_of_chunk_k(
    autojump_clock: trio.testing.MockClock,
) -> None:
    error = ProviderError("connection reset", is_retryable=True)
    model = ScriptedModel([fail_at(text_turn("one two three"), 2, error)])
    kinds, _, raised = await read(model)
    assert kinds == ["text-start", "one"]
    assert raised is error
    first = ScriptedModel([fail_at(text_turn("one"), 0, error)])
    assert (await read(first))[0] == []


def test_fail_at_drops_the_finish_and_counts_only_chunks() -> None:
    from procession.models import ModelFinish

    turn = [Delay(1), *text_turn("a b"), ModelFinish(finish_reason="length")]
    error = ValueError("x")
    # 4 chunks (start, "a", " b", end): k=4 fails after all of them.
    assert fail_at(turn, 4, error) == [*turn[:-1], error]
    assert fail_at(turn, 1, error) == [*turn[:2], error]
    with pytest.raises(ValueError, match=r"k=5 but the turn streams only 4 chunks"):
        fail_at(turn, 5, error)
    with pytest.raises(ScriptError, match=r"write \*text_turn\('hi'\)"):
        fail_at(["hi"], 0, error)
    with pytest.raises(TypeError, match=r"error must be an exception instance"):
        fail_at(turn, 0, "boom")  # type: ignore[arg-type]  # the bad value under test


async def test_stall_goes_quiet_before_chunk_k(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([stall(text_turn("one two"), 2)])
    got: list[str] = []
    with trio.move_on_after(30) as scope:
        async with model.stream(request()) as response:
            async for chunk in response:
                got.append(chunk.type)
    assert scope.cancelled_caught
    assert got == ["text-start", "text-delta"]
    assert trio.current_time() == pytest.approx(30)
    patient = ScriptedModel([stall(text_turn("one"), 3, seconds=5)])
    kinds, times, _ = await read(patient)
    assert kinds == ["text-start", "one", "text-end"]
    # k = the chunk count: the stall comes after the last chunk, before the end.
    assert trio.current_time() - times[-1] == pytest.approx(5)


async def test_drip_spaces_every_chunk(autojump_clock: trio.testing.MockClock) -> None:
    model = ScriptedModel([drip(text_turn("a b c"), 0.5)])
    start = trio.current_time()
    kinds, times, _ = await read(model)
    assert kinds == ["text-start", "a", " b", " c", "text-end"]
    assert [t - start for t in times] == pytest.approx([0.5, 1.0, 1.5, 2.0, 2.5])


# --------------------------------------------------------------------------- #
# collect_stream
# --------------------------------------------------------------------------- #


async def test_collect_stream_keeps_the_chunks_and_the_result() -> None:
    agent = Agent(id="a", model=ScriptedModel(["Hello there"]))
    run = await collect_stream(agent, "hi", output_processors=[CapitaliseDeltas()])
    assert run.text == "Hello there"
    assert run.types[0] == "start"
    assert run.types[-1] == "finish"
    assert "text-delta" in run.types
    assert run.result.text == "Hello there"
    assert run.result.finish_reason == "stop"
    blocked = await collect_stream(
        Agent(id="b", model=ScriptedModel(["a secret"])),
        "hi",
        output_processors=[BufferingFilter()],
    )
    assert blocked.result.finish_reason == "other"
    assert blocked.types[-1] == "tripwire"
    assert blocked.text == ""
