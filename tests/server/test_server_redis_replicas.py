"""Two server processes on one Redis, on the real clock: an AI SDK chat
stopped on the replica that does not run it; a follower whose replica dies
stops counting, so an unattended run is still cancelled after its grace.
Skipped (with the reason) without ``PROCESSION_TEST_REDIS_URL``, except under
CI (``.ci/redis`` sets it)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx2
import trio

from tests.server.redis_helpers import (
    entry_key,
    open_sse,
    replicas,
    unique_prefix,
)


def _types(frames: list[tuple[str, Any]]) -> list[str]:
    return [d if isinstance(d, str) else d["type"] for _, d in frames]


def _check_once_in_order(frames: list[tuple[str, Any]]) -> None:
    ids = [entry_id for entry_id, _ in frames]
    assert len(set(ids)) == len(ids), ids
    assert sorted(ids, key=entry_key) == ids


async def test_a_chat_stopped_on_another_replica_ends_there() -> None:
    async with (
        replicas(2, words="400", every_s="0.02") as (a, b),
        httpx2.AsyncClient(timeout=10) as client,
    ):
        chat_id = f"c-{uuid.uuid4().hex}"
        chat = {"id": chat_id, "messages": [{"role": "user", "content": "Hi"}]}
        frames: list[tuple[str, Any]] = []
        async with open_sse("POST", f"{a.base}/api/chat", json=chat) as response:
            await response.read(frames, until=4)
            sent = trio.current_time()
            # What the AI SDK's guide has the client send before chat.stop().
            stopped = await client.post(
                f"{b.base}/api/chat/{chat_id}/stop",
                json={"activeStreamId": chat_id},
            )
            await response.read(frames)
            latency = trio.current_time() - sent
        unknown = await client.post(f"{b.base}/api/chat/c-nope/stop")
    assert stopped.status_code == 200
    assert stopped.json() == {"success": True, "stopped": True}
    assert unknown.json() == {"success": True, "stopped": False}
    _check_once_in_order(frames)
    assert _types(frames)[-2:] == ["abort", "[DONE]"]
    deltas = [d for _, d in frames if isinstance(d, dict) and "delta" in d]
    assert len(deltas) < 100
    print(
        f"chat stop on the other replica to the stream's end: {latency * 1000:.0f} ms"
    )
    assert latency < 1.0


async def _ended_frames(url: str, stream: str) -> list[dict[Any, Any]]:
    """The entries of a run's stream, read straight from Redis, once the
    run's end entry is in it (polled)."""
    import coredis

    async with coredis.Redis.from_url(url) as client:
        while True:
            entries = await client.xrange(stream, "-", "+")
            fields = [dict(entry.field_values) for entry in entries]
            if fields and b"end" in fields[-1]:
                return fields
            await trio.sleep(0.05)


async def test_the_clients_of_a_replica_that_died_stop_counting(redis_url: str) -> None:
    lease_s, grace_s = 1.0, 0.5
    prefix = unique_prefix()
    settings = {"lease_s": str(lease_s), "grace_s": str(grace_s)}
    async with replicas(
        2, words="1000", every_s="0.02", redis_prefix=prefix, **settings
    ) as (a, b):
        run_id = f"r-{uuid.uuid4().hex}"
        frames: list[tuple[str, Any]] = []
        async with open_sse(
            "POST",
            f"{a.base}/api/agents/helper/stream",
            json={"messages": "Hi", "runId": run_id},
        ) as response:
            await response.read(frames, until=3)
        # A's client left; B's follower holds the run well past the grace...
        async with open_sse(
            "GET",
            f"{b.base}/api/agents/helper/runs/{run_id}/stream",
            headers={"last-event-id": frames[-1][0]},
        ) as response:
            await response.read(frames, until=3 + int(3 * grace_s / 0.02))
            b.kill()  # ...until B dies, its follower never detached
            killed = trio.current_time()
        with trio.fail_after(lease_s + grace_s + 3):
            ended = await _ended_frames(redis_url, f"{prefix}run:*:{run_id}:frames")
        waited = trio.current_time() - killed
    last = [f[b"f"].removeprefix(b"data: ").strip() for f in ended[-3:-1]]
    assert json.loads(last[0])["type"] == "abort"
    assert last[1] == b"[DONE]"
    assert len(ended) < 500  # of the run's 1,000 words
    _check_once_in_order(frames)
    print(f"follower's replica killed to the run's cancel: {waited * 1000:.0f} ms")
    assert waited <= lease_s + grace_s + 1.0
