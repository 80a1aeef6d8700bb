"""The ASGI app driven in-process: routes, bodies, auth, limits, CORS."""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

import pytest
import trio
import trio.testing

from procession import ConfigurationError, ProviderError
from procession.server import Cors, check_bind, create_app, load_target
from procession.testing import Delay, ScriptedModel, text_turn
from tests.server.server_helpers import (
    BlockSecrets,
    make_agent,
    open_exchange,
    request,
    sse_events,
)

JSON = {"content-type": "application/json"}


def _stream_body(**extra: Any) -> dict[str, Any]:
    return {"messages": "Hi", **extra}


# --- the Mastra routes ---------------------------------------------------------


async def test_list_agents_has_client_js_shape_and_processors_by_lane() -> None:
    app = create_app(
        [
            make_agent(["x"], output_processors=[BlockSecrets()]),
            make_agent(["y"], id="other"),
        ]
    )
    exchange = await request(app, "GET", "/api/agents")
    assert exchange.status == 200
    agents = exchange.json()
    assert list(agents) == ["helper", "other"]
    helper = agents["helper"]
    assert helper["id"] == "helper"
    assert helper["name"] == "helper"
    assert helper["instructions"] == "Be brief."
    assert helper["tools"] == {
        "weather": {"id": "weather", "description": "The weather in a city."}
    }
    assert helper["outputProcessors"] == [
        {"id": "block-secrets", "name": "block-secrets"}
    ]
    assert helper["inputProcessors"] == []
    assert (helper["provider"], helper["modelId"]) == ("scripted", "scripted-model")
    one = await request(app, "GET", "/api/agents/other")
    assert one.json()["id"] == "other"


async def test_generate_returns_mastra_full_output() -> None:
    app = create_app([make_agent(["Hi there."])])
    exchange = await request(
        app,
        "POST",
        "/api/agents/helper/generate",
        json_body={"messages": [{"role": "user", "content": "Hi"}], "runId": "r-1"},
    )
    assert exchange.status == 200
    body = exchange.json()
    assert body["runId"] == "r-1"
    assert body["text"] == "Hi there."
    assert body["finishReason"] == "stop"
    assert body["usage"] == {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}
    assert [s["text"] for s in body["steps"]] == ["Hi there."]
    assert "tripwire" not in body
    assert body["response"]["dbMessages"][0]["role"] == "assistant"


async def test_generate_tripwire_is_200_with_the_tripwire() -> None:
    agent = make_agent([text_turn("a secret")], output_processors=[BlockSecrets()])
    exchange = await request(
        create_app([agent]),
        "POST",
        "/api/agents/helper/generate",
        json_body={"messages": "Hi"},
    )
    assert exchange.status == 200
    body = exchange.json()
    assert body["finishReason"] == "other"
    assert body["tripwire"] == {
        "reason": "the answer reveals a secret",
        "retry": False,
        "metadata": {"word": "secret"},
        "processorId": "block-secrets",
    }


async def test_generate_error_is_500_with_the_message_only() -> None:
    agent = make_agent([ProviderError("Overloaded", status_code=529)])
    exchange = await request(
        create_app([agent]),
        "POST",
        "/api/agents/helper/generate",
        json_body={"messages": "Hi"},
    )
    assert exchange.status == 500
    assert exchange.json() == {"error": "Overloaded"}


@pytest.mark.parametrize(
    "messages",
    [
        "Where is Oslo?",
        ["Where is Oslo?"],
        [{"role": "user", "content": "Where is Oslo?"}],
        [{"role": "user", "content": [{"type": "text", "text": "Where is Oslo?"}]}],
        [
            {
                "id": "u1",
                "role": "user",
                "parts": [{"type": "text", "text": "Where is Oslo?"}],
            }
        ],
        [
            {
                "id": "u1",
                "role": "user",
                "createdAt": "2026-01-01T00:00:00.000Z",
                "content": {
                    "format": 2,
                    "parts": [{"type": "text", "text": "Where is Oslo?"}],
                },
            }
        ],
    ],
    ids=["str", "list-of-str", "role-content", "parts-content", "ui", "mastra-db"],
)
async def test_stream_reads_every_message_shape_client_js_sends(messages: Any) -> None:
    model = ScriptedModel(["Norway."])
    app = create_app([make_agent(model)])
    exchange = await request(
        app, "POST", "/api/agents/helper/stream", json_body={"messages": messages}
    )
    assert exchange.status == 200
    assert sse_events(exchange.body)[-1] == "[DONE]"
    prompt = repr(model.calls[0].prompt)
    assert "Where is Oslo?" in prompt


async def test_memory_and_request_context_reach_the_run() -> None:
    seen: dict[str, Any] = {}

    class Spy:
        id = "spy"

        def process_input(self, args: Any) -> Any:
            seen["thread"] = args.message_list.thread_id
            seen["resource"] = args.message_list.resource_id
            seen["tenant"] = args.request_context.get("tenant")
            return None

    app = create_app([make_agent(["ok"], input_processors=[Spy()])])
    exchange = await request(
        app,
        "POST",
        "/api/agents/helper/stream",
        json_body={
            "messages": "Hi",
            "memory": {"thread": {"id": "t-1"}, "resource": "user-7"},
            "requestContext": {"tenant": "acme"},
        },
    )
    assert exchange.status == 200
    assert seen == {"thread": "t-1", "resource": "user-7", "tenant": "acme"}


# --- bad requests ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "field", "words"),
    [
        (b"{not json", 400, None, "not valid JSON"),
        (b"[1, 2]", 400, None, "must be a JSON object"),
        (b"{}", 400, "messages", "'messages' is required"),
        (b'{"messages": []}', 400, "messages", "non-empty list"),
        (
            b'{"messages": ["hi", {"role": "robot", "content": "x"}]}',
            400,
            "messages[1]",
            "role 'robot'",
        ),
        (
            b'{"messages": "hi", "memory": {"resource": 7}}',
            400,
            "memory.resource",
            "non-empty string",
        ),
        (b'{"messages": "hi", "maxSteps": "many"}', 400, "maxSteps", "integer"),
        (
            b'{"messages": "hi", "requestContext": [1]}',
            400,
            "requestContext",
            "JSON object",
        ),
        (b'{"messages": "hi", "runId": ""}', 400, "runId", "non-empty string"),
    ],
)
async def test_bad_bodies_are_typed_400s_naming_the_field(
    body: bytes, status: int, field: str | None, words: str
) -> None:
    model = ScriptedModel(["never"])
    app = create_app([make_agent(model)])
    exchange = await request(
        app, "POST", "/api/agents/helper/stream", body=body, headers=JSON
    )
    assert exchange.status == status
    answer = exchange.json()
    assert words in answer["error"]
    assert answer.get("field") == field
    assert model.calls == []


async def test_chat_body_trigger_is_checked() -> None:
    app = create_app([make_agent(["x"])])
    exchange = await request(
        app, "POST", "/api/chat", json_body={"messages": "hi", "trigger": "undo"}
    )
    assert exchange.status == 400
    assert exchange.json()["field"] == "trigger"


async def test_unknown_agent_route_and_method() -> None:
    app = create_app([make_agent(["x"])])
    missing = await request(app, "POST", "/api/agents/nobody/stream", json_body={})
    assert missing.status == 404
    assert missing.json() == {"error": "no agent 'nobody'"}
    nowhere = await request(app, "GET", "/api/nowhere")
    assert nowhere.status == 404
    wrong = await request(app, "GET", "/api/agents/helper/stream")
    assert wrong.status == 405
    assert wrong.headers["allow"] == "POST"


async def test_chat_needs_one_agent_or_an_agent_id() -> None:
    app = create_app([make_agent(["x"]), make_agent(["y"], id="other")])
    exchange = await request(app, "POST", "/api/chat", json_body={"messages": "hi"})
    assert exchange.status == 404
    assert "/api/agents/{agentId}/chat" in exchange.json()["error"]


async def test_chat_resume_is_204_when_nothing_runs() -> None:
    app = create_app([make_agent(["x"])])
    exchange = await request(app, "GET", "/api/chat/chat-1/stream")
    assert exchange.status == 204
    assert exchange.body == b""


# --- auth ------------------------------------------------------------------------


async def test_bearer_tokens_are_required_when_configured() -> None:
    app = create_app([make_agent(["ok", "ok"])], tokens=["tok-a", "tok-b"])
    assert "tok-a" not in repr(app)
    bare = await request(app, "GET", "/api/agents")
    assert bare.status == 401
    assert bare.headers["www-authenticate"].startswith("Bearer")
    assert bare.json() == {"error": "missing or invalid bearer token"}
    wrong = await request(
        app, "GET", "/api/agents", headers={"authorization": "Bearer tok-c"}
    )
    assert wrong.status == 401
    basic = await request(
        app, "GET", "/api/agents", headers={"authorization": "Basic tok-a"}
    )
    assert basic.status == 401
    for token in ("tok-a", "tok-b"):
        ok = await request(
            app,
            "POST",
            "/api/agents/helper/stream",
            json_body=_stream_body(),
            headers={"authorization": f"Bearer {token}"},
        )
        assert ok.status == 200


async def test_tokens_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PROCESSION_SERVER_TOKENS", " env-1 , ,env-2")
    app = create_app([make_agent(["x"])])
    assert app.auth_required
    assert (await request(app, "GET", "/api/agents")).status == 401
    ok = await request(
        app, "GET", "/api/agents", headers={"authorization": "Bearer env-2"}
    )
    assert ok.status == 200
    monkeypatch.setenv("PROCESSION_SERVER_TOKENS", "")
    assert not create_app([make_agent(["x"])]).auth_required


def test_a_bare_string_of_tokens_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="not one string"):
        create_app([make_agent(["x"])], tokens="tok-a")


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::", "example.com"])
def test_no_token_means_loopback_only(host: str) -> None:
    with pytest.raises(ConfigurationError, match="refusing to serve"):
        check_bind(host, has_tokens=False, insecure=False)
    check_bind(host, has_tokens=True, insecure=False)
    check_bind(host, has_tokens=False, insecure=True)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_binds_without_a_token(host: str) -> None:
    check_bind(host, has_tokens=False, insecure=False)


# --- limits ------------------------------------------------------------------------


async def test_body_over_the_limit_is_413() -> None:
    model = ScriptedModel(["never"])
    app = create_app([make_agent(model)], max_body_bytes=100)
    big = json.dumps({"messages": "x" * 200}).encode()
    declared = await request(
        app, "POST", "/api/agents/helper/stream", body=big, headers=JSON
    )
    assert declared.status == 413
    assert "100 bytes" in declared.json()["error"]
    # No content-length (chunked): refused while reading.
    chunked = await request(
        app, "POST", "/api/agents/helper/stream", body=big, body_parts=4, headers=JSON
    )
    assert chunked.status == 413
    assert model.calls == []


async def test_concurrent_runs_beyond_the_limit_are_503_with_retry_after(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slow = ScriptedModel([[Delay(60), "late"], "quick"])
    app = create_app([make_agent(slow)], max_concurrent_runs=1)
    async with open_exchange(
        app, "POST", "/api/agents/helper/stream", json_body=_stream_body()
    ) as first:
        assert first.status == 200
        busy = await request(
            app, "POST", "/api/agents/helper/generate", json_body=_stream_body()
        )
        assert busy.status == 503
        assert busy.headers["retry-after"] == "1"
        await first.read_all()
    again = await request(
        app, "POST", "/api/agents/helper/generate", json_body=_stream_body()
    )
    assert again.status == 200
    assert again.json()["text"] == "quick"


async def test_a_run_id_already_running_is_409(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app = create_app([make_agent([[Delay(60), "late"]])])
    async with open_exchange(
        app, "POST", "/api/agents/helper/stream", json_body=_stream_body(runId="r")
    ):
        clash = await request(
            app, "POST", "/api/agents/helper/stream", json_body=_stream_body(runId="r")
        )
        assert clash.status == 409
        assert clash.json()["field"] == "runId"


# --- CORS --------------------------------------------------------------------------


async def test_cors_is_off_by_default() -> None:
    app = create_app([make_agent(["x"])])
    exchange = await request(
        app, "GET", "/api/agents", headers={"origin": "https://app.example"}
    )
    assert "access-control-allow-origin" not in exchange.headers
    preflight = await request(app, "OPTIONS", "/api/agents")
    assert preflight.status == 405


async def test_cors_allows_the_configured_origins() -> None:
    app = create_app(
        [make_agent(["x"])], cors=Cors(allow_origins=["https://app.example"])
    )
    allowed = await request(
        app, "GET", "/api/agents", headers={"origin": "https://app.example"}
    )
    assert allowed.headers["access-control-allow-origin"] == "https://app.example"
    other = await request(
        app, "GET", "/api/agents", headers={"origin": "https://evil.example"}
    )
    assert "access-control-allow-origin" not in other.headers
    preflight = await request(
        app,
        "OPTIONS",
        "/api/agents/helper/stream",
        headers={"origin": "https://app.example"},
    )
    assert preflight.status == 204
    assert "authorization" in preflight.headers["access-control-allow-headers"]


# --- loading what `procession serve` names -------------------------------------


def test_load_target_accepts_an_agent_a_list_or_an_app(tmp_path: Any) -> None:
    source = tmp_path / "served.py"
    source.write_text(
        "from procession import Agent\n"
        "from procession.server import create_app\n"
        "from procession.testing import ScriptedModel\n"
        "agent = Agent(id='a', model=ScriptedModel(['x']))\n"
        "agents = [agent, Agent(id='b', model=ScriptedModel(['y']))]\n"
        "app = create_app([agent])\n"
        "number = 3\n"
    )
    assert list(load_target(f"{source}:agent").agents) == ["a"]
    assert list(load_target(f"{source}:agents").agents) == ["a", "b"]
    assert list(load_target(f"{source}:app").agents) == ["a"]
    with pytest.raises(ConfigurationError, match="expected an Agent"):
        load_target(f"{source}:number")
    with pytest.raises(ConfigurationError, match="no attribute 'missing'"):
        load_target(f"{source}:missing")
    with pytest.raises(ConfigurationError, match="module:attr"):
        load_target("nothing-here")
    with pytest.raises(ConfigurationError, match="cannot import"):
        load_target("no_such_module_xyz:agent")


def test_create_app_checks_its_arguments() -> None:
    with pytest.raises(ConfigurationError, match="at least one agent"):
        create_app([])
    with pytest.raises(ConfigurationError, match="max_body_bytes"):
        create_app([make_agent(["x"])], max_body_bytes=0)
    with pytest.raises(ConfigurationError, match="two agents have the id"):
        create_app([make_agent(["x"]), make_agent(["y"])])
    with pytest.raises(ConfigurationError, match="keepalive_s"):
        create_app([make_agent(["x"])], keepalive_s=-1)


async def test_lifespan_is_answered() -> None:
    app = create_app([make_agent(["x"])])
    inbox = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return inbox.pop(0)

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    await app({"type": "lifespan"}, receive, send)
    assert [m["type"] for m in sent] == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    await trio.lowlevel.checkpoint()
