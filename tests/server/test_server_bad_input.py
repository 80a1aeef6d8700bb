"""Bad input gets a clear 4xx that names the field, and every 5xx is a JSON
body with an incident id that the log line carries too: a memory agent
called without its thread or resource, strings that are not text, bodies
nested too deep, bodies that are not JSON; an access line per request that
never shows a token; one-line CLI failures; a Hypothesis run that throws
generated bodies, headers and ids at every route."""

from __future__ import annotations

import json
import logging
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from procession import ConfigurationError
from procession.memory import Memory, SqliteStorage
from procession.server import create_app
from procession.testing import ScriptedModel
from tests.server.server_helpers import make_agent, request

# SQLite works in a thread: the real clock.
pytestmark = pytest.mark.procession_real_clock

ROUTES = {
    "stream": "/api/agents/helper/stream",
    "generate": "/api/agents/helper/generate",
    "chat": "/api/agents/helper/chat",
}


def _memory_app(tmp_path: Path, **options: Any) -> Any:
    storage = SqliteStorage(tmp_path / "memory.db")
    model = ScriptedModel([f"Answer {i}." for i in range(20)])
    return create_app([make_agent(model, memory=Memory(storage=storage))], **options)


def _body(route: str, memory: dict[str, Any] | None, text: str = "Hi") -> Any:
    extra = {} if memory is None else {"memory": memory}
    if route == "chat":
        message = {
            "id": "m1",
            "role": "user",
            "parts": [{"type": "text", "text": text}],
        }
        return {"id": "chat-1", "messages": [message], **extra}
    return {"messages": text, **extra}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(
    "memory", [None, {"thread": "t-1"}, {"resource": "ada"}, {}], ids=str
)
async def test_a_memory_agent_without_its_thread_and_resource_is_a_400(
    tmp_path: Path, route: str, memory: dict[str, Any] | None
) -> None:
    app = _memory_app(tmp_path)
    answer = await request(app, "POST", ROUTES[route], json_body=_body(route, memory))
    assert answer.status == 400
    assert answer.json()["field"] == "memory"
    assert "keeps memory" in answer.json()["error"]
    # ...and with both, the same route answers.
    good = {"thread": "t-1", "resource": "ada"}
    ok = await request(app, "POST", ROUTES[route], json_body=_body(route, good))
    assert ok.status == 200


async def test_a_token_tied_to_a_resource_fills_in_the_resource(
    tmp_path: Path,
) -> None:
    app = _memory_app(tmp_path, tokens={"ada-token": "ada"})
    answer = await request(
        app,
        "POST",
        ROUTES["generate"],
        json_body=_body("generate", {"thread": "t-1"}),
        headers={"authorization": "Bearer ada-token"},
    )
    assert answer.status == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            '{"messages": "Hi", "memory": {"thread": "\\ud800", "resource": "ada"}}',
            "memory.thread",
        ),
        (
            '{"messages": "Hi", "memory": {"thread": "t", "resource": "a\\udfffb"}}',
            "memory.resource",
        ),
        (
            '{"messages": [{"role": "user", "content": "x\\ud83d"}], '
            '"memory": {"thread": "t", "resource": "ada"}}',
            "messages[0].content",
        ),
        (
            '{"messages": "Hi", "requestContext": {"\\udc00": 1}}',
            "a key in requestContext",
        ),
    ],
)
async def test_a_string_that_is_not_text_is_a_400_naming_it(
    tmp_path: Path, body: str, field: str
) -> None:
    app = _memory_app(tmp_path)
    answer = await request(
        app,
        "POST",
        ROUTES["stream"],
        body=body.encode(),
        headers={"content-type": "application/json"},
    )
    assert answer.status == 400
    assert answer.json()["field"] == field
    assert "lone UTF-16 surrogate" in answer.json()["error"]


async def test_a_surrogate_pair_is_text(tmp_path: Path) -> None:
    app = _memory_app(tmp_path)
    body = '{"messages": "\\ud83d\\ude00", "memory": {"thread": "t", "resource": "a"}}'
    answer = await request(
        app,
        "POST",
        ROUTES["generate"],
        body=body.encode(),
        headers={"content-type": "application/json"},
    )
    assert answer.status == 200


def test_the_library_refuses_an_id_that_is_not_text(tmp_path: Path) -> None:
    agent = make_agent(
        ScriptedModel(["x"]), memory=Memory(storage=SqliteStorage(tmp_path / "m.db"))
    )
    with pytest.raises(ConfigurationError, match=r"memory\['thread'\].*not valid text"):
        agent.stream("Hi", memory={"thread": "\ud800", "resource": "ada"})
    with pytest.raises(ConfigurationError, match=r"resource_id=.*not valid text"):
        agent.stream("Hi", thread_id="t", resource_id="\udfff")


@pytest.mark.parametrize("depth", [65, 1000, 100_000])
async def test_a_body_nested_too_deep_is_a_400_and_the_server_goes_on(
    depth: int,
) -> None:
    app = create_app([make_agent(["ok"])])
    body = b'{"messages": "Hi", "x": ' + b"[" * depth + b"]" * depth + b"}"
    answer = await request(
        app,
        "POST",
        ROUTES["stream"],
        body=body,
        headers={"content-type": "application/json"},
    )
    assert answer.status == 400
    assert "more than 64 levels deep" in answer.json()["error"]
    after = await request(app, "POST", ROUTES["generate"], json_body={"messages": "Hi"})
    assert after.json()["text"] == "ok"


async def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    app = create_app([make_agent(["ok"])])
    text = '[{"' * 200 + '\\"' + "]}" * 200
    answer = await request(
        app, "POST", ROUTES["generate"], json_body={"messages": text}
    )
    assert answer.status == 200


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded"]
)
async def test_a_body_that_does_not_say_it_is_json_is_a_415(
    content_type: str | None,
) -> None:
    app = create_app([make_agent(["ok"])])
    headers = {} if content_type is None else {"content-type": content_type}
    answer = await request(
        app, "POST", ROUTES["stream"], body=b'{"messages": "Hi"}', headers=headers
    )
    assert answer.status == 415
    assert answer.json()["field"] == "content-type"


async def test_json_with_parameters_or_a_json_suffix_is_json() -> None:
    app = create_app([make_agent(["ok", "ok"])])
    for kind in ("application/json; charset=utf-8", "application/vnd.api+json"):
        answer = await request(
            app,
            "POST",
            ROUTES["generate"],
            body=b'{"messages": "Hi"}',
            headers={"content-type": kind},
        )
        assert answer.status == 200, kind


async def test_one_access_line_per_request_and_never_a_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = "an-access-token-of-ada"
    app = create_app([make_agent(["ok"])], tokens={token: "ada"})
    auth = {"authorization": f"Bearer {token}"}
    with caplog.at_level(logging.INFO, logger="procession.access"):
        await request(
            app,
            "POST",
            ROUTES["stream"],
            json_body={"messages": "Hi", "runId": "r-logged"},
            headers=auth,
        )
        await request(app, "GET", "/api/agents", headers={"authorization": "Bearer x"})
        await request(app, "GET", "/nowhere", headers=auth)
        await request(
            app, "POST", "/api/agents/helper/runs/bad%0Aline/cancel", headers=auth
        )
    lines = [r.getMessage() for r in caplog.records if r.name == "procession.access"]
    assert len(lines) == 4
    assert re.fullmatch(
        r"POST /api/agents/\{agentId\}/stream 200 [0-9.]+ms run=r-logged", lines[0]
    )
    assert re.fullmatch(r"GET /api/agents 401 [0-9.]+ms run=-", lines[1])
    assert re.fullmatch(r"GET \(no route\) 404 [0-9.]+ms run=-", lines[2])
    assert lines[3].endswith("run=(invalid)")
    assert token not in caplog.text


def test_the_cli_says_a_port_in_use_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "procession", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"procession serve: cannot listen on 127.0.0.1:{port}: Address already in use"
    )
    assert "Traceback" not in done.stderr


def test_the_cli_says_a_missing_extra_in_one_line() -> None:
    script = (
        "import sys; sys.modules['hypercorn'] = None; "
        "from procession._cli import main; sys.exit(main(['serve', '--port', '0']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("procession serve: serving needs the server extra")
    assert 'pip install "procession[server]"' in line


# --- Hypothesis: anything at any route -------------------------------------

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
_text = st.text(max_size=12)
# Near-valid values: what a client almost sends.
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", "x"])},
    optional={
        "content": _text | _json,
        "parts": st.lists(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["text", "file", "x"])},
                optional={"text": _text | _json},
            ),
            max_size=2,
        ),
        "id": _text,
    },
)
_fields = {
    "messages": _text | st.lists(_message | _text, max_size=3) | _json,
    "memory": st.fixed_dictionaries(
        {},
        optional={"thread": _text | _json, "resource": _text | _json},
    )
    | _json,
    "runId": _text | _json,
    "id": _text | _json,
    "requestContext": _json,
    "maxSteps": st.integers(-2, 5) | _json,
    "activeTools": st.lists(_text, max_size=2) | _json,
    "trigger": st.sampled_from(["submit-message", "regenerate-message"]) | _json,
    "modelSettings": _json,
}
_near_valid = st.fixed_dictionaries({}, optional=_fields).map(
    lambda v: json.dumps(v).encode()
)
_bodies = st.one_of(
    st.binary(max_size=200),
    _json.map(lambda v: json.dumps(v).encode()),
    _near_valid,
    _near_valid,
    _near_valid,
)
_ids = st.text(
    # The ASGI path is decoded: any text but the separators of a URL.
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="/?#"),
    min_size=1,
    max_size=40,
)
_routes = st.sampled_from(
    [
        ("POST", "/api/agents/helper/stream"),
        ("POST", "/api/agents/helper/generate"),
        ("POST", "/api/agents/helper/chat"),
        ("POST", "/api/chat"),
        ("POST", "/api/agents/{id}/runs/{id}/cancel"),
        ("GET", "/api/agents/helper/runs/{id}/stream"),
        ("GET", "/api/chat/{id}/stream"),
        ("POST", "/api/chat/{id}/stop"),
        ("GET", "/api/memory/threads"),
        ("GET", "/api/memory/threads/{id}"),
        ("GET", "/api/memory/threads/{id}/messages"),
        ("GET", "/api/agents"),
        ("GET", "/api/agents/{id}"),
        ("GET", "/{id}"),
    ]
)
_headers = st.dictionaries(
    st.sampled_from(
        ["content-type", "authorization", "last-event-id", "origin", "x-anything"]
    ),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
    max_size=3,
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    route=_routes,
    other_method=st.sampled_from([None, None, None, "GET", "POST", "PUT"]),
    ident=_ids,
    body=_bodies,
    headers=_headers,
    json_type=st.sampled_from([True, True, True, False]),
)
@example(
    route=("POST", "/api/agents/helper/stream"),
    other_method=None,
    ident="x",
    body=b'{"messages": "Hi", "memory": {"thread": "t"}}',
    headers={},
    json_type=True,
)
@example(
    route=("POST", "/api/chat"),
    other_method=None,
    ident="x",
    body=b'{"id": "c", "messages": "x", "memory": {"thread": "\\ud800"}}',
    headers={},
    json_type=True,
)
def test_no_malformed_request_is_a_500_or_an_empty_answer(
    tmp_path: Path,
    route: tuple[str, str],
    other_method: str | None,
    ident: str,
    body: bytes,
    headers: dict[str, str],
    json_type: bool,
) -> None:
    import trio

    storage = SqliteStorage(tmp_path / "fuzz.db")
    app = create_app(
        [make_agent(ScriptedModel(["ok"] * 3), memory=Memory(storage=storage))],
        resume=True,
    )
    method, path = route
    method = other_method or method
    if json_type:
        headers = {**headers, "content-type": "application/json"}
    target = path.replace("{id}", ident)

    async def main() -> None:
        with trio.fail_after(30):
            answer = await request(app, method, target, body=body, headers=headers)
            assert answer.status < 500, (answer.status, answer.body[:300])
            if answer.status != 204:
                assert answer.body, answer.status
            if (
                answer.status >= 400
                and answer.headers.get("content-type") == "application/json"
            ):
                assert answer.json()["error"]
            after = await request(app, "GET", "/api/agents")
            assert after.status == 200

    trio.run(main)


@pytest.mark.parametrize("route", ["stream", "generate"])
async def test_memory_for_an_agent_without_memory_is_said_not_ignored_silently(
    route: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app([make_agent(["ok"])])
    memory = {"thread": "t-1", "resource": "ada"}
    answer = await request(
        app, "POST", ROUTES[route], json_body={"messages": "Hi", "memory": memory}
    )
    assert answer.status == 200
    assert answer.headers["x-procession-memory"] == (
        "agent 'helper' keeps no memory; the body's memory was ignored"
    )
    assert "keeps no memory" in caplog.text
    info = await request(app, "GET", "/api/agents/helper")
    assert info.json()["memory"] is False


def test_the_default_served_agent_keeps_the_readme_curls_memory() -> None:
    """The README's curl (memory on) against the default `procession serve`:
    the second turn is answered from the thread the first one saved."""
    import httpx2

    server = subprocess.Popen(
        [sys.executable, "-m", "procession", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        base = server.stdout.readline().split(" on ")[1].split()[0]
        memory = {"thread": "t-1", "resource": "ada"}
        with httpx2.Client(base_url=base, timeout=30) as client:
            info = client.get("/api/agents/support-agent").json()
            client.post(
                "/api/agents/support-agent/generate",
                json={"messages": "Where is my order A-1042?", "memory": memory},
            ).raise_for_status()
            threads = client.get(
                "/api/memory/threads", params={"resourceId": "ada"}
            ).json()
            saved = client.get(
                "/api/memory/threads/t-1/messages", params={"resourceId": "ada"}
            ).json()
    finally:
        server.terminate()
        server.wait(timeout=30)
        if server.stdout is not None:
            server.stdout.close()
    assert info["memory"] is True
    assert [t["id"] for t in threads["threads"]] == ["t-1"]
    assert saved["total"] >= 2
