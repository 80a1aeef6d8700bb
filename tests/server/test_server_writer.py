"""The path of a chunk from the run to the socket (issue 23): the frames the
per-run encoders write are byte for byte the general encoders'; the chunks
at hand leave together, a lone chunk at once; no task hop per chunk."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from procession import Processor
from procession.actors import ExecutionMode
from procession.chunks import (
    Chunk,
    StartChunk,
    StartPayload,
    StepStartChunk,
    StepStartPayload,
    TextDeltaChunk,
    TextDeltaPayload,
    text_delta,
)
from procession.server import create_app, mastra_frame, ui_chunks, ui_frame
from procession.server._hold import StepText
from procession.server._mastra import MastraFrames
from procession.server._ui_stream import ui_frames
from procession.testing import Delay, PassThrough, SchedulerCounts, ScriptedModel
from procession.testing.strategies import chunks, json_values
from tests.server.server_helpers import (
    BlockSecrets,
    make_agent,
    open_exchange,
    sse_events,
)

_RUN_IDS = st.sampled_from(["run-1", 'run-"q"\n', "rün-ü"]) | st.text(max_size=8)

_DELTAS = st.builds(
    TextDeltaChunk,
    payload=st.builds(
        TextDeltaPayload,
        id=st.text(max_size=6),
        text=st.text(),
        provider_metadata=st.none()
        | st.dictionaries(st.text(max_size=4), json_values()),
        extra=st.just({}) | st.dictionaries(st.text(max_size=4), json_values()),
    ),
    run_id=st.none() | _RUN_IDS,
    from_=st.sampled_from(["AGENT", "USER", None]),
    metadata=st.none() | json_values(),
)


def _outcome(fn: Any, chunk: Chunk) -> Any:
    try:
        return fn(chunk)
    except Exception as exc:  # both ways must fail alike
        return type(exc)


@given(chunk=_DELTAS | chunks(), run_id=_RUN_IDS)
def test_mastra_frames_are_mastra_frame_byte_for_byte(
    chunk: Chunk, run_id: str
) -> None:
    assert _outcome(MastraFrames(run_id), chunk) == _outcome(
        lambda c: mastra_frame(c, run_id), chunk
    )


@given(chunk=_DELTAS | chunks())
def test_ui_frames_are_ui_frame_byte_for_byte(chunk: Chunk) -> None:
    assert _outcome(ui_frames, chunk) == _outcome(
        lambda c: b"".join(ui_frame(u) for u in ui_chunks(c)), chunk
    )


_MAYBE_JSON = st.none() | json_values()
_EXTRA: st.SearchStrategy[dict[str, Any]] = st.just({}) | st.dictionaries(
    st.text(max_size=4), json_values()
)


_ODD_ONE = st.sampled_from(
    [
        None,
        "run_id",
        "from_",
        "metadata",
        "extra",
        "payload.extra",
        "payload.message_id",
        "payload.request",
        "payload.warnings",
        "payload.started_at",
        "payload.input_messages",
    ]
)


@st.composite
def _lifecycle(draw: st.DrawFn) -> tuple[Chunk, str]:
    """A ``start`` or ``step-start`` chunk of the run being framed, as the
    run makes it (the fast path's case) but for at most one field, drawn
    freely (what must send it the general way)."""
    run_id = draw(_RUN_IDS)
    odd = draw(_ODD_ONE)

    def value(name: str, usual: Any, other: st.SearchStrategy[Any]) -> Any:
        return draw(other) if odd == name else usual

    if draw(st.booleans()):
        kind: Any = StartChunk
        payload: Any = StartPayload(
            extra=value("payload.extra", {}, _EXTRA),
        )
    else:
        kind = StepStartChunk
        payload = StepStartPayload(
            message_id=value("payload.message_id", "msg-1", st.none() | st.text()),
            request=value("payload.request", None, _MAYBE_JSON),
            warnings=value("payload.warnings", None, _MAYBE_JSON),
            started_at=value("payload.started_at", None, _MAYBE_JSON),
            input_messages=value("payload.input_messages", None, _MAYBE_JSON),
            extra=value("payload.extra", {}, _EXTRA),
        )
    chunk = kind(
        payload=payload,
        run_id=value("run_id", run_id, st.none() | _RUN_IDS),
        from_=value("from_", "AGENT", st.sampled_from(["USER", None])),
        metadata=value("metadata", None, _MAYBE_JSON),
        extra=value("extra", {}, _EXTRA),
    )
    return chunk, run_id


@given(case=_lifecycle())
def test_lifecycle_frames_are_mastra_frame_byte_for_byte(
    case: tuple[Chunk, str],
) -> None:
    chunk, run_id = case
    assert _outcome(MastraFrames(run_id), chunk) == _outcome(
        lambda c: mastra_frame(c, run_id), chunk
    )


def test_the_fast_path_is_taken_for_the_runs_own_start_and_step_start() -> None:
    frames = MastraFrames("run-1")
    start = StartChunk(run_id="run-1")
    step = StepStartChunk(payload=StepStartPayload(message_id="msg-é"), run_id="run-1")
    assert frames(start) == (
        b'data: {"type":"start","runId":"run-1","from":"AGENT","payload":{}}\n\n'
    )
    assert frames(step) == (
        b'data: {"type":"step-start","runId":"run-1","from":"AGENT",'
        b'"payload":{"messageId":"msg-\xc3\xa9"}}\n\n'
    )


def test_the_fast_path_is_taken_for_a_plain_delta() -> None:
    frames = MastraFrames("run-1")
    delta = text_delta("hé\n", run_id="run-1")
    assert frames(delta) == (
        b'data: {"type":"text-delta","runId":"run-1","from":"AGENT",'
        b'"payload":{"id":"text-1","text":"h\xc3\xa9\\n"}}\n\n'
    )


def _deltas(n: int, pace_s: float = 0.0) -> list[Any]:
    items: list[Any] = []
    for i in range(n):
        if pace_s:
            items.append(Delay(pace_s))
        items.append(TextDeltaChunk(payload=TextDeltaPayload(id="t", text=f"w{i} ")))
    return items


async def _parts(app: Any) -> list[tuple[float, bytes]]:
    """The body parts of one Mastra stream, each with the time it came."""
    parts = []
    async with open_exchange(
        app, "POST", "/api/agents/helper/stream", json_body={"messages": "Hi"}
    ) as exchange:
        while (part := await exchange.next_part()) is not None:
            parts.append((trio.current_time(), part))
    assert sse_events(exchange.body)[-1] == "[DONE]"
    return parts


async def test_chunks_at_hand_leave_in_one_send() -> None:
    model = ScriptedModel([_deltas(200)])
    app = create_app([make_agent(model)], keepalive_s=0)
    parts = await _parts(app)
    deltas = [p.count(b'"text-delta"') for _t, p in parts]
    assert sum(deltas) == 200
    # The adaptive pipeline runs up to 16 chunks at hand per read: they go
    # together, never one send per chunk.
    assert max(deltas) > 1
    assert len(parts) < 200 / 4, deltas


async def test_the_lifecycle_frames_at_hand_leave_together() -> None:
    """``start`` and ``step-start`` are queued by the run at once: one send
    (adaptive mode). ``step-finish`` waits for its settle, where a stream
    processor may still ask for a retry, so ``finish`` cannot join it."""
    model = ScriptedModel([_deltas(1)])
    app = create_app(
        [make_agent(model, output_processors=[PassThrough(i) for i in range(5)])],
        keepalive_s=0,
    )
    parts = await _parts(app)
    types = [sse_events(p) for _t, p in parts]
    assert [[e["type"] for e in events if e != "[DONE]"] for events in types][:2] == [
        ["start", "step-start"],
        ["text-delta"],
    ], types


async def test_a_lone_chunk_goes_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_deltas(5, pace_s=1.0)])
    app = create_app([make_agent(model)], keepalive_s=0)
    start = trio.current_time()
    parts = await _parts(app)
    times = [round(t - start) for t, p in parts if b'"text-delta"' in p]
    # Each delta's send happens when the model made it, alone.
    assert times == [1, 2, 3, 4, 5]
    assert all(p.count(b'"text-delta"') == 1 for _t, p in parts if b"delta" in p)


async def _counted(chunks_n: int) -> SchedulerCounts:
    model = ScriptedModel([_deltas(chunks_n)])
    agent = make_agent(
        model,
        output_processors=[PassThrough(i) for i in range(5)],
        execution_mode="fused",
    )
    app = create_app([agent], keepalive_s=0)
    counter = SchedulerCounts()
    trio.lowlevel.add_instrument(counter)
    try:
        parts = await _parts(app)
    finally:
        trio.lowlevel.remove_instrument(counter)
    assert sum(p.count(b'"text-delta"') for _t, p in parts) == chunks_n
    return counter


async def test_no_task_step_per_chunk_beyond_the_socket() -> None:
    """In fused mode with no chunk at hand ahead, each chunk is one send; a
    chunk costs the app's task one step (resumed after its send) and the
    client's one (taking the part), and no task is spawned per chunk."""
    short, long = await _counted(50), await _counted(250)
    per_chunk = (long.steps - short.steps) / 200
    # Measured: 2.0 (a reader task handing chunks to the writer over a
    # channel made it 4.0).
    assert per_chunk <= 2.1, per_chunk
    assert long.spawned == short.spawned, (short.spawned, long.spawned)


class _Results(Processor):
    """A ``process_output_result`` hook: the run awaits it after ``finish``."""

    id = "results"

    async def process_output_result(self, args: Any) -> None:
        await trio.lowlevel.checkpoint()


async def _last_parts(app: Any) -> list[list[str]]:
    parts = await _parts(app)
    events = [sse_events(p) for _t, p in parts]
    return [[e if e == "[DONE]" else e["type"] for e in part] for part in events][-2:]


@pytest.mark.parametrize("step_text", ["stream", "hold"])
@pytest.mark.parametrize("mode", ["adaptive", "fused"])
async def test_the_end_leaves_with_finish(
    mode: ExecutionMode, step_text: StepText
) -> None:
    """A run with nothing to do after its ``finish`` has ended when the
    writer takes ``finish`` (``AgentStream.end_nowait``): ``[DONE]`` and the
    body's end go in the same send."""
    model = ScriptedModel([_deltas(3)])
    agent = make_agent(
        model,
        output_processors=[PassThrough(i) for i in range(5)],
        execution_mode=mode,
    )
    app = create_app([agent], keepalive_s=0, step_text=step_text)
    last = await _last_parts(app)
    assert last[-1] == ["finish", "[DONE]"], last
    assert "finish" not in last[0], last


async def test_the_end_waits_for_a_result_hook_after_finish() -> None:
    """``finish`` goes out at once; the end only once the run's
    ``process_output_result`` ran (it may await): in the next send."""
    model = ScriptedModel([_deltas(3)])
    agent = make_agent(model, output_processors=[PassThrough(0), _Results()])
    app = create_app([agent], keepalive_s=0)
    assert await _last_parts(app) == [["finish"], ["[DONE]"]]


async def test_the_end_leaves_with_a_tripwire() -> None:
    model = ScriptedModel([["a", "the secret", "b"]])
    agent = make_agent(model, output_processors=[BlockSecrets()])
    app = create_app([agent], keepalive_s=0)
    last = await _last_parts(app)
    assert last[-1] == ["tripwire", "[DONE]"], last


async def test_without_a_stream_processor_step_finish_leaves_with_the_end() -> None:
    """No stream processor can ask for a retry on ``step-finish``: the run
    does not wait for it, and ``step-finish``, ``finish`` and the end go in
    one send."""
    model = ScriptedModel([_deltas(3)])
    app = create_app([make_agent(model)], keepalive_s=0)
    last = await _last_parts(app)
    assert last[-1] == ["step-finish", "finish", "[DONE]"], last
