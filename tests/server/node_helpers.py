"""What the node-driven server tests share: the pinned npm packages (the real
JS clients and playwright-core), the scripts that use them, and running node
against a served app. The ``node_clients`` fixture (conftest.py) installs them
once a session."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import trio

from procession.server import ProcessionApp, serve

CLIENTS = Path(__file__).parent / "clients"
# The pinned versions, one per line (``.ci/run`` installs the same): ai
# 7.0.38 is the release on @ai-sdk/provider-utils 5.0.13, the one
# @mastra/core 1.71.0 depends on; @mastra/client-js 1.47.0 is the newest
# client-js (it pins @mastra/core 1.68); @mastra/mcp 1.18.0 is the newest
# MCPClient for that core (2.0 wants core >= 1.68 with the 2.0 MCP SDK only;
# 1.18 speaks the 2025 protocol and 2026-07-28 on request); playwright-core
# drives Debian's chromium for the page's test (it never downloads a browser).
NPM_PACKAGES = (CLIENTS / "npm-packages.txt").read_text().split()


async def run_node_against(
    app: ProcessionApp, script: Path, *args: str, seconds: float = 90
) -> subprocess.CompletedProcess[bytes]:
    """Serve ``app`` on a free loopback port and run ``node script <url>
    *args`` against it; the server stops once node exits. Fails the test if
    node exits with an error (its stderr in the message)."""
    node = shutil.which("node")
    assert node is not None, "node is not installed"
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(
            lambda task_status: serve(
                app, port=0, shutdown_trigger=stop.wait, task_status=task_status
            )
        )
        try:
            with trio.fail_after(seconds):
                done = await trio.run_process(
                    [node, str(script), urls[0], *args],
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                )
        finally:
            stop.set()
    assert done.returncode == 0, done.stderr.decode()
    return done
