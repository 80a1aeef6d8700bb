"""What the node-driven server tests share (each such module wraps
``node_clients_dir`` in a fixture; a conftest.py here would clash with
tests/conftest.py for mypy): the pinned npm packages (the real JS clients
and playwright-core) and the scripts that use them, installed once."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
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


def _package_name(spec: str) -> str:
    return spec.rsplit("@", 1)[0] if spec.rfind("@") > 0 else spec


_INSTALLED: list[Path] = []


def node_clients_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the packages' node_modules and the client scripts
    beside it: ``$PROCESSION_NODE_CLIENTS`` when set (what it lacks is
    installed there), else a temporary directory, once per session."""
    if _INSTALLED:
        return _INSTALLED[0]
    given = os.environ.get("PROCESSION_NODE_CLIENTS")
    where = Path(given) if given else tmp_path_factory.mktemp("npm-clients")
    missing = [
        spec
        for spec in NPM_PACKAGES
        if not (where / "node_modules" / _package_name(spec)).exists()
    ]
    if missing:
        subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(where),
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                *missing,
            ],
            check=True,
            timeout=600,
        )
    for script in CLIENTS.glob("*.mjs"):
        shutil.copy(script, where / script.name)
    _INSTALLED.append(where)
    return where


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
