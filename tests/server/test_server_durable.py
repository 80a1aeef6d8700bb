"""``create_app(durable=...)`` refuses, at start, agents whose durable runs
would have nowhere to live (no storage, or an in-memory SQLite database): a
durable run never silently runs as a plain one. A durable run outlives its
bus: Redis restarted mid-run loses its follower nothing, and Redis gone for
good ends the follower's stream with the typed error while the run, kept in
storage, ends and saves its turn. Across processes:
``test_server_durable_replicas.py``."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest
import trio

from procession import Agent, ConfigurationError
from procession._cli import main
from procession.memory import Memory, SqliteStorage
from procession.runtime import Durable
from procession.server import (
    BUS_ERROR_NAME,
    RedisRunBus,
    create_app,
    load_target,
    serve,
)
from procession.testing import ScriptedModel
from tests.server.redis_helpers import (
    PrivateRedis,
    free_port,
    makes_redis_unreachable,
    open_sse,
    redis_binary,
    text_of,
    unique_prefix,
)
from tests.server.redis_target import slow_turn
from tests.server.server_helpers import make_agent


def test_a_durable_app_needs_storage_other_processes_read(tmp_path: object) -> None:
    bare = Agent(id="bare", model=ScriptedModel(["hi"]))
    with pytest.raises(ConfigurationError, match=r"agent 'bare' runs durable runs"):
        create_app([bare], durable=True)
    in_memory = Agent(
        id="mem",
        model=ScriptedModel(["hi"]),
        memory=Memory(storage=SqliteStorage(":memory:")),
    )
    with pytest.raises(ConfigurationError, match=r"agent 'mem' .* in-memory SQLite"):
        create_app([in_memory], durable=Durable(lease_s=2))
    # An agent durable by itself is held to the same rule by any app.
    own = Agent(id="own", model=ScriptedModel(["hi"]), durable=True)
    with pytest.raises(ConfigurationError, match=r"agent 'own' runs durable runs"):
        create_app([own])
    with pytest.raises(ConfigurationError, match=r"durable must be True, False"):
        create_app([bare], durable="yes")  # type: ignore[arg-type]
    # Not durable: nothing asked of the storage.
    assert create_app([bare]).durable is None


@pytest.mark.usefixtures("redis_url")
@makes_redis_unreachable
async def test_a_durable_run_outlives_a_redis_restart_and_a_lost_redis() -> None:
    with tempfile.TemporaryDirectory() as root:
        redis = PrivateRedis(redis_binary(), free_port(), root)
        try:
            await _outlive_the_bus(redis, root)
        finally:
            await redis.kill()


async def _outlive_the_bus(redis: PrivateRedis, root: str) -> None:
    bus = RedisRunBus(redis.url, lease_s=1.0, prefix=unique_prefix())
    storage = SqliteStorage(os.path.join(root, "runs.db"))
    agent = make_agent(
        ScriptedModel([slow_turn(60, 0.02)] * 2), memory=Memory(storage=storage)
    )
    app = create_app([agent], bus=bus, keepalive_s=0, durable=Durable(lease_s=1.0))
    await redis.start()
    restarted: list[tuple[str, Any]] = []
    lost: list[tuple[str, Any]] = []
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(
            lambda task_status: serve(
                app, port=0, shutdown_trigger=stop.wait, task_status=task_status
            )
        )
        url = f"{urls[0]}/api/agents/helper/stream"

        def body(n: int) -> dict[str, Any]:
            memory = {"thread": f"t-{n}", "resource": "ada"}
            return {"messages": "Hi", "memory": memory, "runId": f"r-{n}"}

        async with open_sse("POST", url, json=body(1)) as response:
            await response.read(restarted, until=10)
            await redis.kill()  # everything Redis held is gone
            await trio.sleep(0.3)
            await redis.start()
            await response.read(restarted)
        async with open_sse("POST", url, json=body(2)) as response:
            await response.read(lost, until=10)
            await redis.kill()  # and now for good
            await response.read(lost)
        with trio.fail_after(20):
            while True:
                record = await storage.get_run("r-2")
                assert record is not None
                if record.status == "ended":
                    break
                await trio.sleep(0.05)
        stop.set()
    saved = await storage.list_messages("t-2", "ada")
    await storage.aclose()
    answer = "".join(f"w{i} " for i in range(60))
    # A restart: every frame the bus acknowledged reached the follower.
    assert text_of(restarted) == answer
    assert restarted[-1][1] == "[DONE]"
    # Redis gone for good: the follower is told, and the run, kept in storage,
    # still ends and saves its turn (a plain run would have been cancelled).
    assert lost[-1][1]["payload"]["error"]["name"] == BUS_ERROR_NAME
    assert [m.role for m in saved] == ["user", "assistant"]
    assert answer.strip() in str(saved[-1].content)


def test_procession_serve_durable_serves_agents_and_refuses_what_it_cannot(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    module = tmp_path / "durable_agents.py"
    module.write_text(
        "from procession import Agent\n"
        "from procession.memory import Memory, SqliteStorage\n"
        "from procession.server import create_app\n"
        "from procession.testing import ScriptedModel\n"
        f"kept = Agent(id='kept', model=ScriptedModel(['hi']), "
        f"memory=Memory(storage=SqliteStorage({str(db)!r})))\n"
        "lost = Agent(id='lost', model=ScriptedModel(['hi']), "
        "memory=Memory(storage=SqliteStorage(':memory:')))\n"
        "app = create_app([kept])\n"
    )
    served = load_target(f"{module}:kept", durable=True)
    assert served.durable == Durable()
    assert main(["serve", "--durable"]) == 2
    assert "--durable needs agents whose storage" in capsys.readouterr().err
    assert main(["serve", f"{module}:lost", "--durable"]) == 2
    assert "agent 'lost' runs durable runs" in capsys.readouterr().err
    assert main(["serve", f"{module}:app", "--durable"]) == 2
    assert "make it durable in create_app(durable=True)" in capsys.readouterr().err


@pytest.mark.procession_real_clock
async def test_a_durable_run_is_not_cancelled_when_its_clients_have_gone(
    tmp_path: Any,
) -> None:
    """``resume_grace_s`` cancels a run nobody follows; a durable run goes on
    to its end (another replica would, had this one died)."""
    storage = SqliteStorage(str(tmp_path / "runs.db"))
    agent = make_agent(
        ScriptedModel([slow_turn(30, 0.02)]), memory=Memory(storage=storage)
    )
    app = create_app(
        [agent], resume=True, resume_grace_s=0.05, keepalive_s=0, durable=True
    )
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(
            lambda task_status: serve(
                app, port=0, shutdown_trigger=stop.wait, task_status=task_status
            )
        )
        body = {
            "messages": "Hi",
            "memory": {"thread": "t-1", "resource": "ada"},
            "runId": "r-gone",
        }
        async with open_sse(
            "POST", f"{urls[0]}/api/agents/helper/stream", json=body
        ) as response:
            assert response.status == 200  # and the client leaves at once
        # The client has gone; the grace passes many times over.
        with trio.fail_after(20):
            while True:
                record = await storage.get_run("r-gone")
                assert record is not None
                if record.status == "ended":
                    break
                await trio.sleep(0.05)
        stop.set()
    saved = await storage.list_messages("t-1", "ada")
    await storage.aclose()
    assert [m.role for m in saved] == ["user", "assistant"]
    assert "w29" in str(saved[-1].content)
