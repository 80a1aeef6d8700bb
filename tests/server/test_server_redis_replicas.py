"""Two server processes on one Redis, on the real clock: an AI SDK chat
stopped on the replica that does not run it; a follower whose replica dies
stops counting, so an unattended run is still cancelled after its grace.
Skipped (with the reason) without ``PROCESSION_TEST_REDIS_URL``, except under
CI (``.ci/redis`` sets it)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx2
import trio
from redis_helpers import entry_key, open_sse, replicas


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
