"""Pipelined publishes on the Redis bus: a run's frames that are ready
together go to Redis in one call, in order, each once, each frame's SSE
``id:`` its own stream entry's id. Skipped (with the reason) without
``PROCESSION_TEST_REDIS_URL``, except under CI (``.ci/redis`` sets it)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from procession.chunks import TextDeltaChunk, TextDeltaPayload
from procession.server import InProcessRunBus, RedisRunBus, create_app
from procession.testing import ScriptedModel
from tests.server.redis_helpers import entry_key, unique_prefix
from tests.server.server_helpers import make_agent, request

_FRAME = re.compile(rb"id: (\d+-\d+)\ndata: ([^\n]*)\n\n")
WORDS = 400


def _ids_and_data(body: bytes) -> list[tuple[str, bytes]]:
    found = [(i.decode(), data) for i, data in _FRAME.findall(body)]
    assert len(found) == body.count(b"data: "), body
    return found


@pytest.mark.parametrize("batch_frames", [1, 64])
async def test_frames_ready_together_go_to_redis_in_one_call(
    batch_frames: int, redis_url: str
) -> None:
    prefix = unique_prefix()
    bus = RedisRunBus(redis_url, prefix=prefix, batch_frames=batch_frames)
    deltas = [
        TextDeltaChunk(payload=TextDeltaPayload(id="t", text=f"w{i} "))
        for i in range(WORDS)
    ]
    app = create_app([make_agent(ScriptedModel([deltas]))], bus=bus, keepalive_s=0)
    calls: list[int] = []
    async with bus.running(app.cancel_here):
        publish = bus.scripts["publish"]

        def counted(*, keys: list[str], args: list[Any]) -> Any:
            calls.append(len(args) - 3)  # replica, first number, maxlen
            return publish(keys=keys, args=args)

        bus.scripts["publish"] = counted
        body = {"messages": "Hi", "runId": "r-batch"}
        live = await request(app, "POST", "/api/agents/helper/stream", json_body=body)
        replayed = await request(app, "GET", "/api/agents/helper/runs/r-batch/stream")
        entries = await bus.call(
            lambda c: c.xrange(f"{prefix}run:*:r-batch:frames", "-", "+")
        )
    frames = _ids_and_data(live.body)
    # Each frame once, in order, under its own entry's id.
    assert [e.identifier.decode() for e in entries][:-1] == [i for i, _ in frames]
    assert sorted({i for i, _ in frames}, key=entry_key) == [i for i, _ in frames]
    assert replayed.body == live.body
    words = [d for _, d in frames if b'"text-delta"' in d]
    assert [re.findall(rb'"text":"(w\d+) "', d)[0] for d in words] == [
        f"w{i}".encode() for i in range(WORDS)
    ]
    assert frames[-1][1] == b"[DONE]"
    assert sum(calls) == len(frames)
    if batch_frames == 1:
        assert len(calls) == len(frames)
    else:
        # Hundreds of frames ready at once: a handful of round trips.
        assert max(calls) <= batch_frames
        assert len(calls) < len(frames) / 4, calls


async def test_the_in_process_log_publishes_a_batch_one_by_one() -> None:
    log = InProcessRunBus().open("run:x")
    assert log.batch_frames == 1
    assert await log.publish_many([b"a", b"b"]) == [1, 2]
    assert await log.publish(b"c") == 3
