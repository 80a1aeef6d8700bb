"""``HoldBackWindow``: matches across chunk boundaries, the least text held,
ids and order kept, nothing held ever released after a tripwire."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from procession import ConfigurationError
from procession import chunks as c
from procession.processors import HoldBackWindow, Processor, ProcessOutputStreamArgs
from procession.testing.strategies import text_splits
from tests.processors.builtin.builtin_helpers import (
    assert_text_blocks_valid,
    client_text,
    run_chunks,
    run_pieces,
)

WORD = "secret"


def _hold(text: str) -> int:
    """The longest tail of ``text`` that is a proper prefix of WORD (WORD has no
    border, so ``str.replace`` on the text before it is cut-safe)."""
    return next((k for k in range(len(WORD) - 1, 0, -1) if text.endswith(WORD[:k])), 0)


class Hider(Processor):
    id = "hider"

    def __init__(self) -> None:
        self.window = HoldBackWindow.from_hold(
            lambda text: text.replace(WORD, "[x]"), _hold
        )

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        return self.window.process(args)


class Blocker(Processor):
    """Trips on WORD, releasing everything before it (a scanner of its own)."""

    id = "blocker"

    def __init__(self) -> None:
        self.window = HoldBackWindow(self.scan)

    def scan(
        self,
        args: ProcessOutputStreamArgs,
        text: str,
        start: int,
        final: bool,
        memo: dict[str, Any],
    ) -> tuple[str, int]:
        if WORD in text[start:]:
            args.abort(f"said {WORD}")
        end = len(text) if final else len(text) - _hold(text[start:])
        return text[start:end], end

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        return self.window.process(args)


class TripOn(Processor):
    """Trips at the n-th chunk it sees."""

    id = "trip-on"

    def __init__(self, n: int) -> None:
        self.n = n

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        if len(args.stream_parts) == self.n:
            args.abort("enough")
        return args.part


texts = st.lists(st.sampled_from(["secret", "sec", "s", "e", "cret", " ", "x"])).map(
    "".join
)


@given(st.data())
def test_every_split_gives_the_unsplit_output(data: st.DataObject) -> None:
    text = data.draw(texts)
    pieces = data.draw(text_splits(text))
    run = run_pieces([Hider()], pieces)
    assert run.outcome.kind == "completed"
    assert client_text(run.chunks) == text.replace(WORD, "[x]")
    assert_text_blocks_valid(run.chunks)


def test_only_the_tail_that_could_still_match_is_held() -> None:
    run = run_pieces([Hider()], ["the se", "cret is ", "out, sec", "ond"])
    deltas = [x.payload.text for x in run.chunks if isinstance(x, c.TextDeltaChunk)]
    assert deltas == ["the ", "[x] is ", "out, ", "second"]


def test_a_flush_comes_before_the_text_end_of_its_block_with_its_id() -> None:
    items = [
        c.text_start(id="a"),
        c.text_start(id="b"),
        c.text_delta("xx se", id="a"),
        c.text_delta("yy s", id="b"),
        c.text_end(id="b"),
        c.text_delta("cret", id="a"),
        c.text_end(id="a"),
    ]
    run = run_chunks([Hider()], items)
    shown = [
        (x.type, x.payload.id, getattr(x.payload, "text", None)) for x in run.chunks
    ]
    assert shown == [
        ("text-start", "a", None),
        ("text-start", "b", None),
        ("text-delta", "a", "xx "),
        ("text-delta", "b", "yy "),
        ("text-delta", "b", "s"),
        ("text-end", "b", None),
        ("text-delta", "a", "[x]"),
        ("text-end", "a", None),
    ]


def test_another_chunk_flushes_the_held_text_first() -> None:
    call = c.tool_call("call-1", "search", {})
    items = [c.step_start(), c.text_start(), c.text_delta("ask se"), call]
    items.append(c.step_finish())
    run = run_chunks([Hider()], items)
    kinds = [(x.type, getattr(x.payload, "text", None)) for x in run.chunks]
    assert kinds == [
        ("step-start", None),
        ("text-start", None),
        ("text-delta", "ask "),
        ("text-delta", "se"),
        ("tool-call", None),
        ("step-finish", None),
    ]


def test_step_finish_flushes_a_block_without_text_end() -> None:
    items = [c.text_start(), c.text_delta("a se"), c.step_finish(), c.finish()]
    run = run_chunks([Hider()], items)
    assert client_text(run.chunks) == "a se"
    assert [x.type for x in run.chunks][-3:] == ["text-delta", "step-finish", "finish"]


def test_the_scanners_tripwire_releases_nothing_held() -> None:
    run = run_pieces([Blocker()], ["card se", "cr", "et!"])
    assert run.outcome.kind == "tripwire"
    assert run.outcome.tripwire is not None
    assert run.outcome.tripwire.reason == "said secret"
    assert client_text(run.chunks) == "card "


def test_an_error_drops_the_held_text() -> None:
    items = [c.text_start(), c.text_delta("a se"), c.error("boom"), c.finish()]
    run = run_chunks([Hider()], items)
    assert client_text(run.chunks) == "a "
    assert "error" in [x.type for x in run.chunks]


def test_a_downstream_tripwire_ends_the_stream_before_any_flush() -> None:
    # The hider holds "se"; the next chunk is text-end, and the processor after
    # it trips on the flushed delta.
    run = run_pieces([Hider(), TripOn(2)], ["ok se"])
    assert run.outcome.kind == "tripwire"
    assert "se" not in client_text(run.chunks)


def _args(
    part: Any, state: dict[str, Any], retry_count: int
) -> ProcessOutputStreamArgs:
    return ProcessOutputStreamArgs(
        processor_id="hider",
        state=state,
        part=part,
        stream_parts=[part],
        retry_count=retry_count,
    )


def test_a_retried_attempt_never_sees_the_held_tail_of_the_last() -> None:
    window = Hider().window
    state: dict[str, Any] = {}
    assert window.process(_args(c.text_delta("a se"), state, 0)) == c.text_delta("a ")
    # The step was retried (the runtime raised retry_count): "se" is gone.
    assert window.process(_args(c.text_end(), state, 1)) == c.text_end()


@pytest.mark.parametrize(
    "chunk", [c.step_start(), c.abort(), c.tripwire("stop"), c.error("x")]
)
def test_chunks_that_end_an_attempt_drop_the_held_tail(chunk: Any) -> None:
    window = Hider().window
    state: dict[str, Any] = {}
    window.process(_args(c.text_delta("a se"), state, 0))
    assert window.process(_args(chunk, state, 0)) == chunk
    assert window.flush(_args(c.text_end(), state, 0)) == []


def test_flush_settles_what_is_held() -> None:
    window = Hider().window
    state: dict[str, Any] = {}
    window.process(_args(c.text_delta("a se"), state, 0))
    assert window.flush(_args(c.finish(), state, 0)) == [c.text_delta("se")]


def test_a_scanner_that_settles_too_little_at_the_end_is_refused() -> None:
    window = HoldBackWindow(lambda args, text, start, final, memo: ("", start))
    state: dict[str, Any] = {}
    window.process(_args(c.text_delta("abc"), state, 0))
    with pytest.raises(ConfigurationError, match=r"end == 3 when final"):
        window.process(_args(c.text_end(), state, 0))


def test_a_negative_lookbehind_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="lookbehind must be 0 or more"):
        HoldBackWindow(
            lambda args, text, start, final, memo: ("", start), lookbehind=-1
        )


class LateBlocker(Blocker):
    """Releases the clean text before WORD, then trips at the next chunk."""

    id = "late-blocker"

    def scan(
        self,
        args: ProcessOutputStreamArgs,
        text: str,
        start: int,
        final: bool,
        memo: dict[str, Any],
    ) -> tuple[str, int]:
        at = text.find(WORD, start)
        if at >= 0:
            self.window.trip_after(args, f"said {WORD}", {"at": "late"})
            return text[start:at], len(text)
        end = len(text) if final else len(text) - _hold(text[start:])
        return text[start:end], end


@given(st.data())
def test_trip_after_shows_the_clean_text_for_every_split(data: st.DataObject) -> None:
    text = "card se" + data.draw(texts) + "secret tail"
    pieces = data.draw(text_splits(text))
    run = run_pieces([LateBlocker()], pieces)
    assert run.outcome.tripwire is not None
    assert run.outcome.tripwire.reason == "said secret"
    assert client_text(run.chunks) == text[: text.find(WORD)]
    # The chunk that carried the trip never reaches the client.
    assert [x.type for x in run.chunks][-2:] == ["text-delta", "tripwire"]
