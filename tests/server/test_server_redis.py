"""Several server processes on one Redis (``RedisRunBus``), on the real clock:
resume and cancel on another replica, a replica killed mid-run, Redis
restarted mid-run. Skipped (with the reason) without
``PROCESSION_TEST_REDIS_URL``, except under CI (``.ci/redis`` sets it)."""

from __future__ import annotations

import gc
import pathlib
import re
import signal
import tempfile
import uuid
import warnings
from typing import Any

import httpx2
import pytest
import trio

from procession import ConfigurationError
from procession._cli import main
from procession.chunks import TextDeltaChunk, TextDeltaPayload
from procession.server import (
    BUS_ERROR_NAME,
    GAP_ERROR_NAME,
    RUN_LOST_ERROR_NAME,
    RedisRunBus,
    RunBusError,
    create_app,
    serve,
)
from procession.testing import ScriptedModel
from tests.server.redis_helpers import (
    PrivateRedis,
    entry_key,
    free_port,
    makes_redis_unreachable,
    open_sse,
    redis_binary,
    replicas,
    text_of,
    unique_prefix,
)
from tests.server.redis_target import slow_turn
from tests.server.server_helpers import make_agent, open_exchange, request, sse_events

WORDS = "".join(f"w{i} " for i in range(40))


def _check_once_in_order(frames: list[tuple[str, Any]]) -> None:
    ids = [entry_id for entry_id, _ in frames]
    assert len(set(ids)) == len(ids), ids
    assert sorted(ids, key=entry_key) == ids


def _types(frames: list[tuple[str, Any]]) -> list[str]:
    return [d if isinstance(d, str) else d["type"] for _, d in frames]


async def test_a_stream_dropped_on_one_replica_resumes_on_the_other() -> None:
    async with (
        replicas(2, words="40", every_s="0.02") as (a, b),
        httpx2.AsyncClient(timeout=10) as client,
    ):
        run_id = f"r-{uuid.uuid4().hex}"
        body = {"messages": "Hi", "runId": run_id}
        first: list[tuple[str, Any]] = []
        async with open_sse(
            "POST", f"{a.base}/api/agents/helper/stream", json=body
        ) as response:
            assert response.status == 200
            await response.read(first, until=6)
        # The connection is gone; the run goes on, and runs nowhere else.
        busy = await client.post(f"{b.base}/api/agents/helper/stream", json=body)
        assert busy.status_code == 409
        rest: list[tuple[str, Any]] = []
        async with open_sse(
            "GET",
            f"{b.base}/api/agents/helper/runs/{run_id}/stream",
            headers={"last-event-id": first[-1][0]},
        ) as response:
            assert response.status == 200
            await response.read(rest)
    _check_once_in_order(first + rest)
    assert text_of(first + rest) == WORDS
    assert _types(first + rest)[0] == "start"
    assert _types(rest)[-2:] == ["finish", "[DONE]"]


async def test_a_chat_dropped_on_one_replica_resumes_on_the_other() -> None:
    async with (
        replicas(2, words="40", every_s="0.02") as (a, b),
        httpx2.AsyncClient(timeout=10) as client,
    ):
        chat = {"id": "c-1", "messages": [{"role": "user", "content": "Hi"}]}
        first: list[tuple[str, Any]] = []
        async with open_sse("POST", f"{a.base}/api/chat", json=chat) as response:
            await response.read(first, until=6)
        rest: list[tuple[str, Any]] = []
        async with open_sse(
            "GET",
            f"{b.base}/api/chat/c-1/stream",
            headers={"last-event-id": first[-1][0]},
        ) as response:
            assert response.status == 200
            await response.read(rest)
        nothing = await client.get(f"{b.base}/api/chat/c-2/stream")
    assert nothing.status_code == 204
    _check_once_in_order(first + rest)
    deltas = "".join(
        d["delta"] for _, d in first + rest if isinstance(d, dict) and "delta" in d
    )
    assert deltas == WORDS
    assert _types(rest)[-1] == "[DONE]"


async def test_a_cancel_on_another_replica_reaches_the_run() -> None:
    async with (
        replicas(2, words="400", every_s="0.02") as (a, b),
        httpx2.AsyncClient(timeout=10) as client,
    ):
        run_id = f"r-{uuid.uuid4().hex}"
        frames: list[tuple[str, Any]] = []
        async with open_sse(
            "POST",
            f"{a.base}/api/agents/helper/stream",
            json={"messages": "Hi", "runId": run_id},
        ) as response:
            await response.read(frames, until=4)
            sent = trio.current_time()
            cancelled = await client.post(
                f"{b.base}/api/agents/helper/runs/{run_id}/cancel"
            )
            await response.read(frames)
            latency = trio.current_time() - sent
        unknown = await client.post(f"{b.base}/api/agents/helper/runs/nope/cancel")
    assert cancelled.status_code == 200
    assert cancelled.json() == {"message": "Run cancelled", "runId": run_id}
    assert unknown.status_code == 404
    assert _types(frames)[-2:] == ["abort", "[DONE]"]
    assert len(text_of(frames).split()) < 100
    print(f"cancel on the other replica to the stream's end: {latency * 1000:.0f} ms")
    assert latency < 1.0


async def test_a_replica_that_dies_mid_run_fails_its_runs_when_the_lease_expires() -> (
    None
):
    lease_s = 1.0
    async with (
        replicas(2, words="400", every_s="0.02", lease_s=str(lease_s)) as (a, b),
        httpx2.AsyncClient(timeout=10) as client,
    ):
        run_id = f"r-{uuid.uuid4().hex}"
        frames: list[tuple[str, Any]] = []
        async with open_sse(
            "POST",
            f"{a.base}/api/agents/helper/stream",
            json={"messages": "Hi", "runId": run_id},
        ) as response:
            await response.read(frames, until=3)
        async with open_sse(
            "GET",
            f"{b.base}/api/agents/helper/runs/{run_id}/stream",
            headers={"last-event-id": frames[-1][0]},
        ) as response:
            await response.read(frames, until=8)
            a.kill()
            killed = trio.current_time()
            await response.read(frames)
            waited = trio.current_time() - killed
        again = await client.post(
            f"{b.base}/api/agents/helper/stream",
            json={"messages": "Hi", "runId": run_id},
        )
    _check_once_in_order(frames)
    assert _types(frames)[-4:] == ["error", "step-finish", "finish", "[DONE]"]
    error = frames[-4][1]["payload"]["error"]
    assert error["name"] == RUN_LOST_ERROR_NAME
    assert frames[-2][1]["payload"]["stepResult"]["reason"] == "error"
    words = text_of(frames).split()
    assert words == [f"w{i}" for i in range(len(words))]
    print(f"replica killed to the follower's error: {waited * 1000:.0f} ms")
    assert waited <= lease_s + 1.0
    # The lost run's key is free again: a new run takes it (on B, once).
    assert again.status_code == 200


@pytest.mark.usefixtures("redis_url")
@makes_redis_unreachable
async def test_redis_restarted_mid_run_loses_nothing_then_fails_clearly() -> None:
    with tempfile.TemporaryDirectory() as root:
        redis = PrivateRedis(redis_binary(), free_port(), root)
        try:
            await _restart_then_lose(redis)
        finally:
            await redis.kill()


async def _restart_then_lose(redis: PrivateRedis) -> None:
    lease_s = 2.0
    bus = RedisRunBus(redis.url, lease_s=lease_s, prefix=unique_prefix())
    turns = [slow_turn(60, 0.02), slow_turn(400, 0.02)]
    app = create_app([make_agent(ScriptedModel(turns))], bus=bus, keepalive_s=0)
    await redis.start()
    frames: list[tuple[str, Any]] = []
    lost: list[tuple[str, Any]] = []
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(
            lambda task_status: serve(
                app, port=0, shutdown_trigger=stop.wait, task_status=task_status
            )
        )
        url = f"{urls[0]}/api/agents/helper/stream"
        async with open_sse("POST", url, json={"messages": "Hi"}) as response:
            await response.read(frames, until=10)
            await redis.kill()  # everything Redis held is gone
            await trio.sleep(0.3)
            await redis.start()
            await response.read(frames)
        async with open_sse("POST", url, json={"messages": "Hi"}) as response:
            await response.read(lost, until=10)
            await redis.kill()  # and now for good
            gone = trio.current_time()
            await response.read(lost)
            failed_after = trio.current_time() - gone
        stop.set()
    _check_once_in_order(frames)
    # Every frame the bus acknowledged reached the follower, once, in order.
    assert text_of(frames) == "".join(f"w{i} " for i in range(60))
    assert _types(frames)[-1] == "[DONE]"
    # Redis gone past the outage budget: one typed error frame, nothing else.
    assert lost[-1][0] == ""  # the error frame is not in the log
    _check_once_in_order(lost[:-1])
    words = text_of(lost).split()
    assert words == [f"w{i}" for i in range(len(words))]
    assert lost[-1][1]["payload"]["error"]["name"] == BUS_ERROR_NAME
    assert failed_after <= lease_s + 1.5


async def test_a_resumer_whose_frames_were_trimmed_gets_a_typed_error(
    redis_url: str,
) -> None:
    bus = RedisRunBus(redis_url, buffer_frames=5, prefix=unique_prefix())
    deltas = [
        TextDeltaChunk(payload=TextDeltaPayload(id="t", text=f"w{i} "))
        for i in range(400)
    ]
    app = create_app([make_agent(ScriptedModel([deltas]))], bus=bus, keepalive_s=0)
    async with bus.running(app.cancel_here):
        async with open_exchange(
            app,
            "POST",
            "/api/agents/helper/stream",
            json_body={"messages": "Hi", "runId": "r-trim"},
        ) as first:
            await first.read_all()
        first_id = first.body.split(b"\n", 1)[0].removeprefix(b"id: ").decode()
        resumed = await request(
            app,
            "GET",
            "/api/agents/helper/runs/r-trim/stream",
            headers={"last-event-id": first_id},
        )
        bad = await request(
            app,
            "GET",
            "/api/agents/helper/runs/r-trim/stream",
            headers={"last-event-id": "12"},
        )
        latest = first.body.rsplit(b"id: ", 1)[1].split(b"\n", 1)[0].decode()
        tail = await request(
            app,
            "GET",
            "/api/agents/helper/runs/r-trim/stream",
            headers={"last-event-id": latest},
        )
    assert resumed.status == 200
    (event,) = sse_events(resumed.body)
    assert event["type"] == "error"
    assert event["payload"]["error"]["name"] == GAP_ERROR_NAME
    assert first_id in event["payload"]["error"]["message"]
    assert bad.status == 400
    assert "stream entry id" in bad.json()["error"]
    # The last frame read: nothing missed, the run ended.
    assert tail.status == 200
    assert sse_events(tail.body) == []


@makes_redis_unreachable
async def test_a_bus_down_at_startup_is_a_clear_error() -> None:
    await _start_on_a_dead_port()
    assert BUS_ERROR_NAME == "RunBusError"


async def _start_on_a_dead_port() -> None:
    bus = RedisRunBus(f"redis://127.0.0.1:{free_port()}/0", lease_s=0.2)
    with pytest.raises(RunBusError, match="unreachable"):
        async with bus.running(_never):
            pass


async def _never(run_id: str) -> bool:
    await trio.lowlevel.checkpoint()
    return False


def test_what_coredis_leaves_of_a_failed_connection_warns_nowhere_else() -> None:
    # The helper, called here rather than collected: its run ignores the
    # warning only in this block; the collection after it runs under the
    # project's "error" filter, where any stream left unclosed would fail
    # this test (an unraisable ResourceWarning).
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", "Unclosed <MemoryObject(Send|Receive)Stream", ResourceWarning
        )
        makes_redis_unreachable(_start_on_a_dead_port)()
    gc.collect()


def test_bus_options_are_checked(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    agent = make_agent(ScriptedModel([]))
    with pytest.raises(ConfigurationError, match="bus must be a RunBus"):
        create_app([agent], bus=42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="redis://"):
        RedisRunBus("http://localhost:6379")
    with pytest.raises(ConfigurationError, match="lease_s"):
        RedisRunBus("redis://localhost:6379", lease_s=0)
    app = create_app([agent], bus="redis://localhost:6379/0")
    assert isinstance(app.bus, RedisRunBus)
    assert app.resume
    target = tmp_path / "served_app.py"
    target.write_text(
        "from procession.runtime import Agent\n"
        "from procession.server import create_app\n"
        "from procession.testing import ScriptedModel\n"
        "app = create_app([Agent(id='a', instructions='.', model=ScriptedModel([]))])\n"
    )
    assert main(["serve", f"{target}:app", "--bus", "redis://x"]) == 2
    assert "give it its bus in create_app" in capsys.readouterr().err


async def test_a_run_longer_than_its_lease_keeps_it_by_renewing(redis_url: str) -> None:
    # Lease 0.3 s, runs of 2 s that are silent 0.5 s at a time: without
    # renewals a follower waiting out a silence would find the lease gone and
    # mark the run lost; renewed (every 0.1 s, the three runs in one call),
    # each ends cleanly.
    bus = RedisRunBus(redis_url, lease_s=0.3, prefix=unique_prefix())
    turns = [slow_turn(4, 0.5) for _ in range(3)]
    app = create_app([make_agent(ScriptedModel(turns))], bus=bus, keepalive_s=0)
    bodies: list[bytes] = []

    async def one(run_id: str) -> None:
        async with open_exchange(
            app,
            "POST",
            "/api/agents/helper/stream",
            json_body={"messages": "Hi", "runId": run_id},
        ) as exchange:
            bodies.append(await exchange.read_all())

    async with bus.running(app.cancel_here), trio.open_nursery() as nursery:
        for i in range(3):
            nursery.start_soon(one, f"r-long-{i}")
    assert len(bodies) == 3
    for body in bodies:
        # Every frame has its id line first: drop it to read the data.
        events = sse_events(re.sub(rb"id: [0-9-]+\n", b"", body))
        assert events[-1] == "[DONE]"
        assert [e["type"] for e in events[-2:-1]] == ["finish"]
        assert "RunLostError" not in body.decode()


@makes_redis_unreachable
async def test_a_request_while_redis_does_not_answer_is_a_503_within_outage_s() -> None:
    """A Redis that stopped answering (SIGSTOP: connections hang, nothing is
    refused) costs a new stream request at most ``outage_s``: a 503 with
    ``Retry-After`` naming the bus, its URL's password redacted."""
    password = f"pw-{uuid.uuid4().hex}"
    with tempfile.TemporaryDirectory() as root:
        redis = PrivateRedis(redis_binary(), free_port(), root, password=password)
        try:
            await redis.start()
            outage_s = 1.0
            bus = RedisRunBus(redis.url, lease_s=5.0, outage_s=outage_s)
            app = create_app([make_agent(["never"])], bus=bus, keepalive_s=0)
            async with bus.running(app.cancel_here):
                assert redis.process is not None
                redis.process.send_signal(signal.SIGSTOP)
                try:
                    asked = trio.current_time()
                    with trio.fail_after(outage_s + 5):
                        answer = await request(
                            app,
                            "POST",
                            "/api/agents/helper/stream",
                            json_body={"messages": "Hi"},
                        )
                    waited = trio.current_time() - asked
                finally:
                    redis.process.send_signal(signal.SIGCONT)
        finally:
            await redis.kill()
    assert answer.status == 503
    assert answer.headers["retry-after"] == "5"
    assert "run bus is unavailable" in answer.json()["error"]
    assert password not in answer.body.decode()
    assert waited <= outage_s + 1.0
