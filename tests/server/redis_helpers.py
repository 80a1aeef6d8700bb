"""Helpers for the tests on a real Redis: its URL (skip, or fail under CI,
when none is set), server processes of their own, SSE frames with ids."""

from __future__ import annotations

import functools
import gc
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import Any, Final

import attrs
import h11
import httpx2
import pytest
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

TARGET = pathlib.Path(__file__).with_name("redis_target.py")
_FRAME = re.compile(r"id: (\d+-\d+)\ndata: ([^\n]*)")

COREDIS_LEFTOVERS: Final = (
    "ignore:Unclosed <MemoryObject(Send|Receive)Stream:ResourceWarning"
)
"""What coredis 6.9 leaves behind when a connection fails to connect: the
anyio memory streams it makes in ``Connection.__init__`` and closes only
once connected; their ``__del__`` warns whenever the collector gets to them."""


def _close_memory_streams() -> None:
    # Tracebacks the test's log records still hold (pytest keeps them until
    # the item ends) keep the failed connections alive past any collection
    # here: so the streams are closed, not just collected, and never warn.
    gc.collect()
    for thing in gc.get_objects():
        if isinstance(thing, MemoryObjectSendStream | MemoryObjectReceiveStream):
            thing.close()


def makes_redis_unreachable(
    test: Callable[..., Awaitable[None]],
) -> Callable[..., None]:
    """For a test that makes Redis unreachable: runs it under trio ignoring
    ``COREDIS_LEFTOVERS``, then closes the memory streams coredis left open
    (the trio run is over: every one left belongs to a finished run), so that
    they warn in no other test."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        try:
            trio.run(functools.partial(test, *args, **kwargs))
        finally:
            _close_memory_streams()

    marked: Callable[..., None] = pytest.mark.filterwarnings(COREDIS_LEFTOVERS)(run)
    return marked


def redis_url_or_skip() -> str:
    """``$PROCESSION_TEST_REDIS_URL``; without it the test is skipped (with
    the reason), or fails under CI (``CI=true``), where .ci/run sets it."""
    url = os.environ.get("PROCESSION_TEST_REDIS_URL")
    if url:
        return url
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but PROCESSION_TEST_REDIS_URL is not set (.ci/redis)")
    pytest.skip("no Redis: set PROCESSION_TEST_REDIS_URL (bash .ci/redis -- ...)")


POSTGRES_DSN_VARIABLE = "PROCESSION_TEST_POSTGRES_DSN"


def postgres_dsn_or_skip() -> str:
    """The test PostgreSQL server's DSN (replicas on one database); skips
    (fails under CI) when there is none."""
    dsn = os.environ.get(POSTGRES_DSN_VARIABLE)
    if dsn:
        return dsn
    if os.environ.get("CI") == "true":
        pytest.fail(
            f"CI=true but {POSTGRES_DSN_VARIABLE} is not set (.ci/pg)", pytrace=False
        )
    pytest.skip(
        f"{POSTGRES_DSN_VARIABLE} is not set (bash .ci/pg -- python -m pytest ...)"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def unique_prefix() -> str:
    return f"procession-test-{uuid.uuid4().hex[:12]}:"


class Replica:
    """A ``procession serve`` process serving ``redis_target.py:app``."""

    def __init__(self, process: subprocess.Popen[bytes], base: str) -> None:
        self.process = process
        self.base = base

    def kill(self) -> None:
        """SIGKILL: the process dies with its runs, nothing closed."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)


async def _ready(base: str, process: subprocess.Popen[bytes]) -> None:
    async with httpx2.AsyncClient(timeout=1) as client:
        with trio.fail_after(20):
            while True:
                assert process.poll() is None, "the server process exited"
                try:
                    response = await client.get(f"{base}/api/agents")
                    if response.status_code in (200, 401):  # 401: needs a token
                        return
                except httpx2.TransportError:
                    pass
                await trio.sleep(0.05)


@contextmanager
def _spawned(
    env: dict[str, str], target: pathlib.Path
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    command = [sys.executable, "-m", "procession", "serve", f"{target}:app"]
    process = subprocess.Popen(
        [*command, "--port", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
    )
    try:
        yield process, f"http://127.0.0.1:{port}"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def replicas(count: int, **env: str) -> AbstractAsyncContextManager[list[Replica]]:
    """``count`` server processes serving ``redis_target.py`` (``serving``)."""
    return serving(TARGET, count, **env)


@asynccontextmanager
async def serving(
    target: pathlib.Path, count: int, **env: str
) -> AsyncIterator[list[Replica]]:
    """``count`` server processes serving ``target``'s ``app`` on one Redis
    (``redis_url_or_skip()``), one key prefix of their own; ``env`` overrides the
    target's settings (``name=`` is ``$PROCESSION_TEST_NAME``)."""
    settings = {
        "PROCESSION_TEST_REDIS_URL": redis_url_or_skip(),
        "PROCESSION_TEST_REDIS_PREFIX": unique_prefix(),
        **{f"PROCESSION_TEST_{k.upper()}": v for k, v in env.items()},
    }
    with _all_spawned(count, settings, target) as spawned:
        for process, base in spawned:
            await _ready(base, process)
        yield [Replica(process, base) for process, base in spawned]


@contextmanager
def _all_spawned(
    count: int, env: dict[str, str], target: pathlib.Path
) -> Iterator[list[tuple[subprocess.Popen[bytes], str]]]:
    if count == 0:
        yield []
        return
    with (
        _spawned(env, target) as first,
        _all_spawned(count - 1, env, target) as rest,
    ):
        yield [first, *rest]


class FrameReader:
    """A streamed request on a raw socket (h11), so the test decides exactly
    when the client leaves; reads the response's SSE ``(id, data)`` frames
    (every data frame must have an id), a few at a time."""

    def __init__(self, sock: trio.SocketStream) -> None:
        self._sock = sock
        self._conn = h11.Connection(h11.CLIENT)
        self._buffer = ""
        self._ended = False
        self.status = 0
        self.retry_ms: int | None = None
        """The ``retry:`` a response ended with (its run moved), if any."""

    async def _send(self, event: Any) -> None:
        data = self._conn.send(event)
        if data:
            await self._sock.send_all(data)

    async def _next_event(self) -> Any:
        while True:
            event = self._conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            self._conn.receive_data(await self._sock.receive_some(65536))

    async def start(
        self, method: str, url: str, body: Any, headers: dict[str, str]
    ) -> None:
        target = "/" + url.split("/", 3)[3]
        data = json.dumps(body).encode() if body is not None else b""
        fields = [("host", "test"), ("content-length", str(len(data)))]
        fields += [("content-type", "application/json"), *headers.items()]
        await self._send(h11.Request(method=method, target=target, headers=fields))
        await self._send(h11.Data(data=data))
        await self._send(h11.EndOfMessage())
        response = await self._next_event()
        assert isinstance(response, h11.Response), response
        self.status = response.status_code

    async def read(
        self, frames: list[tuple[str, Any]], until: int | None = None
    ) -> None:
        """Append frames to ``frames`` until the body ends, or ``until``
        frames are in it."""
        while until is None or len(frames) < until:
            if "\n\n" not in self._buffer:
                if self._ended:
                    return
                event = await self._next_event()
                if isinstance(event, h11.Data):
                    self._buffer += bytes(event.data).decode()
                elif isinstance(event, h11.EndOfMessage):
                    self._ended = True
                continue
            frame, self._buffer = self._buffer.split("\n\n", 1)
            if not frame.strip() or frame.startswith(":"):
                continue
            if frame.startswith("retry: "):
                # A run that moved to another replica: reconnect.
                self.retry_ms = int(frame.removeprefix("retry: "))
                continue
            match = _FRAME.fullmatch(frame)
            if match is None:
                # Only the typed error that ends a stream the bus could not
                # serve (ReplayGapError, RunBusError) has no id: it is not in
                # the run's log.
                assert frame.startswith("data: "), frame
                frames.append(("", json.loads(frame.removeprefix("data: "))))
                continue
            data = match.group(2)
            frames.append(
                (match.group(1), data if data == "[DONE]" else json.loads(data))
            )


@asynccontextmanager
async def open_sse(
    method: str, url: str, *, json: Any = None, headers: dict[str, str] | None = None
) -> AsyncIterator[FrameReader]:
    """Start a request on a fresh connection; leaving the block drops it."""
    host, port = url.split("/")[2].rsplit(":", 1)
    sock = await trio.open_tcp_stream(host, int(port))
    try:
        reader = FrameReader(sock)
        with trio.fail_after(10):
            await reader.start(method, url, json, headers or {})
        yield reader
    finally:
        await sock.aclose()


def text_of(frames: list[tuple[str, Any]]) -> str:
    return "".join(
        d["payload"]["text"]
        for _, d in frames
        if isinstance(d, dict) and d["type"] == "text-delta"
    )


def entry_key(entry_id: str) -> tuple[int, int]:
    ms, seq = entry_id.split("-")
    return int(ms), int(seq)


def redis_binary() -> str:
    """The redis-server binary (skip without one, or fail under CI)."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but redis-server is not installed (.ci/run)")
        pytest.skip("no redis-server binary to restart (apt-get install redis-server)")
    return binary


@attrs.define
class PrivateRedis:
    """A redis-server of the test's own on a fixed port (no persistence),
    killed and started again at will; with ``password``, clients must give
    it (``requirepass``)."""

    binary: str
    port: int
    root: str
    password: str | None = None
    process: trio.Process | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        command = [self.binary, "--bind", "127.0.0.1", "--port", str(self.port)]
        if self.password:
            command += ["--requirepass", self.password]
        self.process = await trio.lowlevel.open_process(
            [*command, "--save", "", "--appendonly", "no", "--dir", self.root],
            stdout=subprocess.DEVNULL,
        )
        import coredis

        refused = (coredis.exceptions.ConnectionError, OSError)
        try:
            with trio.fail_after(10):
                while True:
                    try:
                        async with coredis.Redis.from_url(self.url) as client:
                            await client.ping()
                            return
                    except refused:
                        pass
                    except BaseExceptionGroup as group:
                        # coredis's client runs a task group: a server not up
                        # yet is a group around the refusal.
                        if group.split(refused)[1] is not None:
                            raise
                    await trio.sleep(0.05)
        except BaseException:
            await self.kill()  # never leave a server behind a failed start
            raise

    async def kill(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            await self.process.wait()
            self.process = None
