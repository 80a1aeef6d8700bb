"""Runs belong to the resource that started them: with tokens tied to
resources, another resource's request finds nothing under a run id or chat id
(404, 204, ``stopped: false``), live or ended, on every bus (none, in-process,
Redis, and across two Redis replicas); ids are scoped, so two resources may
choose the same one; a client-given id has one shape; ``authenticate=`` lets a
service decide the resource itself (a real JWT library checks real tokens)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import jwt
import pytest
import trio

from procession import ConfigurationError, message_text
from procession.processors import Processor
from procession.server import ProcessionApp, RedisRunBus, create_app
from procession.testing import ScriptedModel
from tests.server.redis_helpers import redis_url_or_skip, unique_prefix
from tests.server.server_helpers import (
    Exchange,
    make_agent,
    open_exchange,
    request,
    sse_events,
)

ADA = {"authorization": "Bearer ada-token"}
BOB = {"authorization": "Bearer bob-token"}
TOKENS = {"ada-token": "ada", "bob-token": "bob"}


class Hold(Processor):
    """Holds every run whose request asked for it (``"hold"`` in the text)
    at its first text delta until ``release`` is set: a run that stays
    live while the test probes it."""

    id = "hold"

    def __init__(self) -> None:
        self.release = trio.Event()

    async def process_output_stream(self, args: Any) -> Any:
        held = args.message_list is not None and any(
            "hold" in message_text(m) for m in args.message_list.get.input.db()
        )
        if args.part.type == "text-delta" and held:
            await self.release.wait()
        return args.part


def _agent(hold: Hold, answers: int = 8) -> Any:
    return make_agent(
        ScriptedModel([f"answer {i}" for i in range(answers)]),
        output_processors=[hold],
    )


@asynccontextmanager
async def _apps(bus: str, hold: Hold, count: int = 1) -> AsyncIterator[list[Any]]:
    """``count`` apps (replicas) of one agent, sharing the bus ``bus``:
    ``none`` (resume off), ``memory`` (in-process) or ``redis``."""
    async with AsyncExitStack() as stack:
        apps = []
        prefix = unique_prefix()
        for _ in range(count):
            if bus == "redis":
                run_bus = RedisRunBus(redis_url_or_skip(), prefix=prefix, lease_s=2.0)
                app = create_app([_agent(hold)], tokens=TOKENS, bus=run_bus)
                await stack.enter_async_context(run_bus.running(app.cancel_here))
            else:
                app = create_app([_agent(hold)], tokens=TOKENS, resume=bus == "memory")
            apps.append(app)
        yield apps


def _types(body: bytes) -> list[str]:
    events = sse_events(re.sub(rb"id: [0-9-]+\n", b"", body))
    return [e if isinstance(e, str) else e["type"] for e in events]


async def _started(exchange: Exchange) -> None:
    """Wait until the run's first frame (its ``start``) arrived."""
    while b"start" not in exchange.body:
        assert await exchange.next_part() is not None


STREAM = "/api/agents/helper/stream"


@pytest.mark.parametrize("bus", ["none", "memory", "redis"])
async def test_another_resource_cannot_read_cancel_or_collide_with_a_live_run(
    bus: str,
) -> None:
    hold = Hold()
    with trio.fail_after(20):
        async with (
            _apps(bus, hold) as [app],
            open_exchange(
                app,
                "POST",
                STREAM,
                json_body={"messages": "hold on", "runId": "r-1"},
                headers=ADA,
            ) as ada_run,
        ):
            await _started(ada_run)
            read = await request(
                app, "GET", "/api/agents/helper/runs/r-1/stream", headers=BOB
            )
            cancel = await request(
                app, "POST", "/api/agents/helper/runs/r-1/cancel", headers=BOB
            )
            # Bob chooses the same id: his own run, which ends on its own.
            own = await request(
                app,
                "POST",
                STREAM,
                json_body={"messages": "quick", "runId": "r-1"},
                headers=BOB,
            )
            bob_cancels_his_ended_run = await request(
                app, "POST", "/api/agents/helper/runs/r-1/cancel", headers=BOB
            )
            assert not ada_run.done  # untouched by all of bob's requests
            mine = await request(
                app, "POST", "/api/agents/helper/runs/r-1/cancel", headers=ADA
            )
            await ada_run.read_all()
            if bus == "redis":
                # Ended, ada's run is still readable (the Redis bus keeps an
                # ended run's frames for keep_s) by ada, never by bob.
                replay = await request(
                    app, "GET", "/api/agents/helper/runs/r-1/stream", headers=ADA
                )
                ended = await request(
                    app, "GET", "/api/agents/helper/runs/r-1/stream", headers=BOB
                )
    assert read.status == 404
    assert cancel.status == 404
    assert cancel.json() == {"error": "no run 'r-1' is running"}
    assert own.status == 200
    assert _types(own.body)[-2:] == ["finish", "[DONE]"]
    assert bob_cancels_his_ended_run.status == 404
    assert mine.status == 200
    assert _types(ada_run.body)[-2:] == ["abort", "[DONE]"]
    if bus == "redis":
        assert replay.status == 200
        assert _types(replay.body)[-2:] == ["abort", "[DONE]"]
        # Bob's run ended too: what he reads is his own, replayed.
        assert ended.status == 200
        assert "answer" in ended.body.decode()
        assert _types(ended.body)[-2:] == ["finish", "[DONE]"]
        assert ended.body != replay.body


@pytest.mark.parametrize("bus", ["none", "memory", "redis"])
async def test_another_resource_cannot_resume_or_stop_a_chat(bus: str) -> None:
    hold = Hold()
    held = {"id": "c-1", "messages": [{"role": "user", "content": "hold on"}]}
    quick = {"id": "c-1", "messages": [{"role": "user", "content": "quick"}]}
    with trio.fail_after(20):
        async with (
            _apps(bus, hold) as [app],
            open_exchange(app, "POST", "/api/chat", json_body=held, headers=ADA) as ada,
        ):
            await _started(ada)
            resumed = await request(app, "GET", "/api/chat/c-1/stream", headers=BOB)
            stop = await request(
                app, "POST", "/api/chat/c-1/stop", json_body={}, headers=BOB
            )
            own = await request(app, "POST", "/api/chat", json_body=quick, headers=BOB)
            assert not ada.done
            ada_stop = await request(
                app, "POST", "/api/chat/c-1/stop", json_body={}, headers=ADA
            )
            await ada.read_all()
    assert resumed.status == 204
    assert resumed.body == b""
    assert stop.status == 200
    assert stop.json() == {"success": True, "stopped": False}
    assert own.status == 200
    assert "answer" in own.body.decode()
    assert ada_stop.json() == {"success": True, "stopped": True}
    assert _types(ada.body)[-1] == "[DONE]"
    assert "abort" in _types(ada.body)


async def test_across_replicas_the_owner_travels_with_the_run() -> None:
    """Ada's run executes on replica A; on replica B (one Redis) bob can
    neither read nor cancel it, ada can do both."""
    hold = Hold()
    with trio.fail_after(20):
        async with (
            _apps("redis", hold, count=2) as [a, b],
            open_exchange(
                a,
                "POST",
                STREAM,
                json_body={"messages": "hold on", "runId": "r-x"},
                headers=ADA,
            ) as ada_run,
        ):
            await _started(ada_run)
            path = "/api/agents/helper/runs/r-x"
            bob_read = await request(b, "GET", f"{path}/stream", headers=BOB)
            bob_cancel = await request(b, "POST", f"{path}/cancel", headers=BOB)
            assert not ada_run.done
            async with open_exchange(b, "GET", f"{path}/stream", headers=ADA) as fol:
                ada_cancel = await request(b, "POST", f"{path}/cancel", headers=ADA)
                await fol.read_all()
            await ada_run.read_all()
    assert (bob_read.status, bob_cancel.status) == (404, 404)
    assert fol.status == 200
    assert ada_cancel.status == 200
    assert _types(fol.body)[-2:] == ["abort", "[DONE]"]
    assert _types(ada_run.body)[-2:] == ["abort", "[DONE]"]


async def test_without_resources_runs_are_shared_but_never_with_a_resource() -> None:
    """Tokens not tied to a resource act for any resource: their runs belong
    to none, so a resource's token does not reach them, and vice versa."""
    hold = Hold()
    app = create_app(
        [_agent(hold)], tokens={"ops-token": None, "ada-token": "ada"}, resume=True
    )
    ops = {"authorization": "Bearer ops-token"}
    with trio.fail_after(10):
        async with open_exchange(
            app,
            "POST",
            STREAM,
            json_body={"messages": "hold on", "runId": "r-ops"},
            headers=ops,
        ) as run:
            await _started(run)
            ada_cancel = await request(
                app, "POST", "/api/agents/helper/runs/r-ops/cancel", headers=ADA
            )
            ops_cancel = await request(
                app, "POST", "/api/agents/helper/runs/r-ops/cancel", headers=ops
            )
            await run.read_all()
    assert ada_cancel.status == 404
    assert ops_cancel.status == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": "hi", "runId": "r" * 129}, "runId"),
        ({"messages": "hi", "runId": "a/b"}, "runId"),
        ({"messages": "hi", "runId": "run:*:x"}, "runId"),
        ({"messages": "hi", "runId": "ü"}, "runId"),
    ],
)
async def test_a_client_given_run_id_has_one_shape(
    body: dict[str, Any], field: str
) -> None:
    app = create_app([make_agent(["never"])])
    answer = await request(app, "POST", STREAM, json_body=body)
    assert answer.status == 400
    assert answer.json()["field"] == field
    assert "1 to 128 characters of A-Z a-z 0-9 _ . -" in answer.json()["error"]
    chat = await request(
        app,
        "POST",
        "/api/chat",
        json_body={"id": body["runId"], "messages": [{"role": "user", "content": "x"}]},
    )
    assert chat.status == 400
    assert chat.json()["field"] == "id"


async def test_a_client_given_run_id_of_128_characters_is_taken() -> None:
    run_id = "A-z_0." + "x" * 122
    app = create_app([make_agent(["ok"])])
    answer = await request(
        app, "POST", STREAM, json_body={"messages": "hi", "runId": run_id}
    )
    assert answer.status == 200
    assert all(e["runId"] == run_id for e in sse_events(answer.body)[:-1])


async def test_a_server_made_run_id_is_run_and_128_random_bits() -> None:
    app = create_app([make_agent(["ok", "ok"])])
    ids = []
    for _ in range(2):
        answer = await request(app, "POST", STREAM, json_body={"messages": "hi"})
        ids.append(sse_events(answer.body)[0]["runId"])
    assert all(re.fullmatch(r"run-[0-9a-f]{32}", i) for i in ids), ids
    assert ids[0] != ids[1]


# --- authenticate= -------------------------------------------------------------

KEY = "a-signing-key-of-at-least-32-bytes-for-hs256"


def _jwt(subject: str, *, key: str = KEY, **claims: Any) -> dict[str, str]:
    token = jwt.encode({"sub": subject, **claims}, key, algorithm="HS256")
    return {"authorization": f"Bearer {token}"}


async def _from_jwt(headers: dict[str, str]) -> str | None:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    await trio.lowlevel.checkpoint()  # a real hook may look a session up
    try:
        claims = jwt.decode(token, KEY, algorithms=["HS256"])
    except jwt.InvalidTokenError:
        return None
    subject = claims.get("sub")
    return subject if isinstance(subject, str) else None


async def test_authenticate_decides_the_resource_from_a_real_jwt(
    tmp_path: Any,
) -> None:
    hold = Hold()
    app = create_app([_agent(hold)], authenticate=_from_jwt, resume=True)
    assert app.auth_required
    with trio.fail_after(10):
        missing = await request(app, "GET", "/api/agents")
        forged = await request(
            app, "GET", "/api/agents", headers=_jwt("ada", key="x" * 40)
        )
        expired = await request(app, "GET", "/api/agents", headers=_jwt("ada", exp=1))
        listed = await request(app, "GET", "/api/agents", headers=_jwt("ada"))
        async with open_exchange(
            app,
            "POST",
            STREAM,
            json_body={"messages": "hold on", "runId": "r-j"},
            headers=_jwt("ada"),
        ) as run:
            await _started(run)
            bob = await request(
                app, "POST", "/api/agents/helper/runs/r-j/cancel", headers=_jwt("bob")
            )
            other = await request(
                app,
                "POST",
                STREAM,
                json_body={
                    "messages": "x",
                    "memory": {"thread": "t", "resource": "bob"},
                },
                headers=_jwt("ada"),
            )
            ada = await request(
                app, "POST", "/api/agents/helper/runs/r-j/cancel", headers=_jwt("ada")
            )
            await run.read_all()
    for refused in (missing, forged, expired):
        assert refused.status == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="procession"'
    assert listed.status == 200
    assert bob.status == 404
    assert other.status == 403
    assert other.json()["field"] == "memory.resource"
    assert ada.status == 200


async def test_authenticate_gets_the_headers_and_may_be_sync() -> None:
    seen: list[dict[str, str]] = []

    def hook(headers: dict[str, str]) -> str | None:
        seen.append(dict(headers))
        return "ada" if headers.get("x-session") == "s-1" else None

    app = create_app([make_agent(["ok"])], authenticate=hook)
    ok = await request(app, "GET", "/api/agents", headers={"X-Session": "s-1"})
    refused = await request(app, "GET", "/api/agents", headers={"X-Session": "s-2"})
    assert (ok.status, refused.status) == (200, 401)
    assert seen[0]["x-session"] == "s-1"
    assert seen[0]["host"] == "test"


async def test_a_failing_authenticate_is_a_logged_500_never_a_pass(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(headers: dict[str, str]) -> str | None:
        raise RuntimeError("the session store is down")

    def wrong(headers: dict[str, str]) -> Any:
        return 42

    for hook in (broken, wrong):
        caplog.clear()
        app = create_app([make_agent(["ok"])], authenticate=hook)
        answer = await request(app, "GET", "/api/agents")
        assert answer.status == 500
        body = answer.json()
        assert body["error"] == "internal error"
        assert re.fullmatch(r"[0-9a-f]{16}", body["incident"])
        [record] = [r for r in caplog.records if r.name == "procession.server"]
        assert body["incident"] in record.getMessage()
        assert record.exc_info is not None


def test_authenticate_and_tokens_are_one_or_the_other() -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        create_app([make_agent(["x"])], tokens=["t"], authenticate=_from_jwt)
    with pytest.raises(ConfigurationError, match="authenticate must be a callable"):
        create_app([make_agent(["x"])], authenticate="ada")  # type: ignore[arg-type]
    app: ProcessionApp = create_app([make_agent(["x"])], authenticate=_from_jwt)
    assert "auth=on" in repr(app)
