"""``procession serve``: refuses what it must, and serves the demo's agent."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import httpx2
import pytest

from procession._cli import main


def test_serve_refuses_a_public_address_without_a_token(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PROCESSION_SERVER_TOKENS", raising=False)
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "refusing to serve '0.0.0.0'" in capsys.readouterr().err


def test_serve_refuses_a_bad_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "no_such_module_xyz:agent"]) == 2
    assert "cannot import 'no_such_module_xyz'" in capsys.readouterr().err


def test_serve_with_no_target_serves_the_demo_agent() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "procession", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("procession serve: support-agent on http://127.0.0.1:")
        base = line.split(" on ")[1].split()[0]
        with httpx2.Client(timeout=10) as client:
            agents = client.get(f"{base}/api/agents").json()
            assert [p["id"] for p in agents["support-agent"]["outputProcessors"]] == [
                "pii-detector",
                "regex-filter",
                "quality-check",
                "tool-result-scanner",
            ]
            # Twice: the served demo model answers any number of chats.
            # Its memory (in-process SQLite) needs the thread and resource.
            for chat in range(2):
                answer = client.post(
                    f"{base}/api/agents/support-agent/generate",
                    json={
                        "messages": "Where is my order A-1042?",
                        "memory": {"thread": f"t-{chat}", "resource": "ada"},
                    },
                ).json()
                assert answer["text"].startswith("Good news: order A-1042 has shipped")
                assert "[EMAIL]" in answer["text"]
            with client.stream(
                "POST",
                f"{base}/api/chat",
                json={
                    "messages": [{"role": "user", "content": "Reset the router?"}],
                    "memory": {"thread": "t-chat", "resource": "ada"},
                },
            ) as response:
                lines = [x for x in response.iter_lines() if x.startswith("data: ")]
            events = [x[6:] for x in lines]
            assert events[-1] == "[DONE]"
            assert json.loads(events[-2]) == {"type": "finish", "finishReason": "other"}
            assert json.loads(events[-3])["type"] == "data-tripwire"
    finally:
        server.send_signal(signal.SIGINT)
        _out, err = server.communicate(timeout=10)
    assert server.returncode == 0, err
