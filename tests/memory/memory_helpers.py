"""Helpers of the memory tests: the PostgreSQL test server and the storage
makers of each backend (the fixtures are in conftest.py).

Every storage test runs on SQLite (a file and ``":memory:"``) and on PostgreSQL.

PostgreSQL comes from ``PROCESSION_TEST_POSTGRES_DSN`` (``.ci/run`` starts a
private server with ``.ci/pg``; by hand: ``bash .ci/pg -- python -m pytest
tests/memory``). Without it the PostgreSQL cases are skipped with that reason,
except under CI (``CI=true``), where a missing DSN fails them. Each
PostgreSQL test gets its own schema, dropped afterwards. The tests of an
outage start a server of their own (``PrivatePostgres``: initdb and pg_ctl,
skipped without them, failed under CI), since they stop it.

These tests use worker threads and sockets, so they run on trio's real clock
(the ``procession_real_clock`` mark): a virtual clock would jump past every
deadline while a worker thread is busy.
"""

from __future__ import annotations

import os
import pathlib
import secrets
import shutil
import socket
import subprocess
from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio

from procession.memory import MemoryStorage

DSN_VARIABLE = "PROCESSION_TEST_POSTGRES_DSN"
BACKENDS = ["sqlite-file", "sqlite-memory", "postgres"]


def postgres_dsn_or_skip() -> str:
    """The test server's DSN; skips (fails under CI) when there is none."""
    dsn = os.environ.get(DSN_VARIABLE)
    if dsn:
        return dsn
    if os.environ.get("CI") == "true":
        pytest.fail(
            f"CI=true but {DSN_VARIABLE} is not set: .ci/run starts PostgreSQL "
            f"with .ci/pg before the tests",
            pytrace=False,
        )
    pytest.skip(
        f"{DSN_VARIABLE} is not set; run `bash .ci/pg -- python -m pytest "
        f"tests/memory` to start a private PostgreSQL server for these tests"
    )


def admin_connection() -> Any:
    """A second, plain psycopg connection to the test server (autocommit)."""
    import psycopg

    return psycopg.connect(postgres_dsn_or_skip(), autocommit=True)


@attrs.define
class Backend:
    """How a test makes storages of one backend, all on the same database."""

    name: str
    make: Callable[..., MemoryStorage]
    slow_statement: str
    """A statement that runs for many seconds unless it is cancelled."""
    opened: list[MemoryStorage] = attrs.Factory(list)

    def __call__(self, **options: Any) -> MemoryStorage:
        storage = self.make(**options)
        self.opened.append(storage)
        return storage


# Counts to ten billion: minutes of work unless interrupted.
SQLITE_SLOW = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
    "WHERE x < 10000000000) SELECT count(*) FROM c"
)


# --- a PostgreSQL server of a test's own, stopped and started at will ------------


def postgres_bindir() -> pathlib.Path:
    """Where ``initdb`` and ``pg_ctl`` are, found as ``.ci/pg`` finds them
    (``pg_config --bindir``, Debian's /usr/lib/postgresql/<v>/bin, PATH).
    Without them the test is skipped with that reason, or fails under CI
    (``CI=true``), where .ci/run installs them."""
    candidates: list[pathlib.Path] = []
    if pg_config := shutil.which("pg_config"):
        found = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=False
        )
        candidates.append(pathlib.Path(found.stdout.strip()))
    candidates += sorted(
        pathlib.Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    if initdb := shutil.which("initdb"):
        candidates.append(pathlib.Path(initdb).parent)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    if os.environ.get("CI") == "true":
        pytest.fail(
            "CI=true but there are no PostgreSQL server binaries (initdb, "
            "pg_ctl): .ci/run installs them in its apt phase",
            pytrace=False,
        )
    pytest.skip(
        "no PostgreSQL server binaries (initdb, pg_ctl) to start and stop a "
        "server of the test's own: apt-get install postgresql"
    )


@attrs.define
class PrivatePostgres:
    """A PostgreSQL server of the test's own, in ``root``, on a fixed
    loopback port, stopped (``-m immediate``: as if it crashed) and started
    again at will. initdb and pg_ctl refuse to run as root: then they run as
    the ``postgres`` user, as ``.ci/pg`` does."""

    bindir: pathlib.Path
    root: pathlib.Path
    port: int
    password: str

    @property
    def dsn(self) -> str:
        return f"postgresql://procession:{self.password}@127.0.0.1:{self.port}/postgres"

    @classmethod
    def create(cls, root: pathlib.Path) -> PrivatePostgres:
        """initdb a cluster in ``root`` (not started)."""
        root.chmod(0o755)
        server = cls(postgres_bindir(), root, _free_port(), secrets.token_hex(16))
        pwfile = root / "pwfile"
        pwfile.write_text(server.password)
        if os.geteuid() == 0:
            shutil.chown(root, "postgres")
            shutil.chown(pwfile, "postgres")
        server._run_sync(
            "initdb", "-D", str(root / "data"), "-U", "procession",
            f"--pwfile={pwfile}", "--auth=scram-sha-256", "-E", "UTF8", "--no-sync",
        )  # fmt: skip
        pwfile.unlink()
        return server

    def _command(self, program: str, *args: str) -> list[str]:
        command = [str(self.bindir / program), *args]
        return (
            ["runuser", "-u", "postgres", "--", *command]
            if os.geteuid() == 0
            else command
        )

    def _run_sync(self, program: str, *args: str) -> None:
        done = subprocess.run(
            self._command(program, *args), capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed: {done.stdout}{done.stderr}")

    def _start_args(self) -> list[str]:
        options = f"-h 127.0.0.1 -p {self.port} -k {self.root} -c fsync=off"
        return ["-D", str(self.root / "data"), "-l", str(self.root / "server.log"),
                "-w", "-o", options, "start"]  # fmt: skip

    def _stop_args(self) -> list[str]:
        return ["-D", str(self.root / "data"), "-m", "immediate", "-w", "stop"]

    def start_sync(self) -> None:
        self._run_sync("pg_ctl", *self._start_args())

    def stop_sync(self) -> None:
        """Stop it if it runs (for teardown)."""
        subprocess.run(
            self._command("pg_ctl", *self._stop_args()),
            capture_output=True,
            check=False,
        )

    async def start(self) -> None:
        await trio.run_process(
            self._command("pg_ctl", *self._start_args()),
            capture_stdout=True,
            capture_stderr=True,
        )

    async def stop(self) -> None:
        """Stop it at once, as if it crashed: its connections are cut."""
        await trio.run_process(
            self._command("pg_ctl", *self._stop_args()),
            capture_stdout=True,
            capture_stderr=True,
        )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
