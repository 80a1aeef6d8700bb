"""A streamed response's one side task (``watch_client``, issue 23): the
client's disconnect, the keepalives while idle and the graceful shutdown,
waited for at once by one task, on trio's clock."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import pytest
import trio
import trio.testing

from procession.server import KEEPALIVE_FRAME
from procession.server._streaming import BodyWriter, Shutdown, WatchEnd, watch_client


class _Client:
    """The ASGI ``send``/``receive`` of one response: what was sent, when
    (trio's clock); a send blocks while ``reading`` is unset (a client that
    does not read)."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, bytes]] = []
        self.reading = trio.Event()
        self.reading.set()
        self.to_app, self.inbox = trio.open_memory_channel[dict[str, Any]](10)

    async def send(self, message: MutableMapping[str, Any]) -> None:
        await self.reading.wait()
        self.sent.append((trio.current_time(), message["body"]))

    async def receive(self) -> dict[str, Any]:
        return await self.inbox.receive()

    def keepalives(self) -> list[float]:
        return [at for at, body in self.sent if body == KEEPALIVE_FRAME]


async def _until_the_client_leaves(
    client: _Client,
    writer: BodyWriter,
    before: Callable[[], Awaitable[object]],
    *shutdown: Any,
) -> trio.CancelScope:
    """``watch_client`` on the response's scope while ``before()`` runs; then
    the client disconnects. The response's scope, once the watcher cancelled
    it."""
    with trio.CancelScope() as response:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                watch_client, client.receive, response, writer, *shutdown
            )
            await before()
            await client.to_app.send({"type": "http.disconnect"})
            await trio.sleep_forever()
    return response


async def test_keepalives_while_idle_and_none_while_frames_flow(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = _Client()
    writer = BodyWriter(client.send, 15)

    async def before() -> None:
        await trio.sleep(46)  # idle: at 15, 30, 45
        for _ in range(10):  # a frame every 10 s: never idle for 15
            await writer.write(b"data: x\n\n")
            await trio.sleep(10)
        await trio.sleep(16)  # idle again: one more, 15 s after the last frame

    await _until_the_client_leaves(client, writer, before)
    assert client.keepalives() == [15, 30, 45, 46 + 90 + 15]


async def test_no_keepalive_while_a_frame_is_on_its_way(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = _Client()
    writer = BodyWriter(client.send, 15)

    async def before() -> None:
        client.reading = trio.Event()  # the client stops reading at 5 s
        await trio.sleep(5)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.write, b"data: stuck\n\n")
            await trio.sleep(40)  # the frame waits: 15 and 30 s pass
            client.reading.set()  # read at 45 s
        await trio.sleep(16)

    await _until_the_client_leaves(client, writer, before)
    # The frame went out whole at 45, then the keepalive at 60, a period after
    # the frame: nothing in the middle of it, no burst of missed keepalives.
    assert client.sent == [(45, b"data: stuck\n\n"), (60, KEEPALIVE_FRAME)]


async def test_a_disconnect_cancels_the_response_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = _Client()

    async def before() -> None:
        await client.to_app.send({"type": "http.request", "body": b"more"})
        await trio.sleep(3)

    response = await _until_the_client_leaves(
        client, BodyWriter(client.send, 15), before
    )
    assert response.cancelled_caught
    assert trio.current_time() == 3
    assert client.sent == []


@pytest.mark.parametrize("begun_before", [False, True])
async def test_the_shutdown_stops_keepalives_and_runs_its_step_once(
    autojump_clock: trio.testing.MockClock, begun_before: bool
) -> None:
    client = _Client()
    writer = BodyWriter(client.send, 15)
    shutdown = Shutdown()
    steps: list[float] = []

    async def on_shutdown() -> None:
        steps.append(trio.current_time())

    async def before() -> None:
        await trio.sleep(20)
        shutdown.begin()
        shutdown.begin()  # idempotent
        await trio.sleep(100)  # no keepalive any more; the client is still watched

    if begun_before:
        shutdown.begin()
    response = await _until_the_client_leaves(
        client, writer, before, shutdown, on_shutdown
    )
    assert response.cancelled_caught
    assert steps == ([0] if begun_before else [20])
    assert client.keepalives() == ([] if begun_before else [15])


async def test_keepalives_off_only_the_client_is_watched(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = _Client()
    response = await _until_the_client_leaves(
        client, BodyWriter(client.send, 0), functools.partial(trio.sleep, 10_000)
    )
    assert response.cancelled_caught
    assert client.sent == []


async def _stopped(
    client: _Client, writer: BodyWriter, after_s: float, *, disconnect: bool = False
) -> tuple[trio.CancelScope, bool]:
    """``watch_client`` with a ``WatchEnd``, stopped ``after_s`` into the
    response (with ``disconnect``: the body ended, then the client's
    disconnect, as hypercorn says it once the body is complete, before the
    stop). The response's scope, and whether the watcher returned on its
    own."""
    end = WatchEnd()
    returned = False

    async def watcher(response: trio.CancelScope) -> None:
        nonlocal returned
        await watch_client(client.receive, response, writer, None, None, end)
        returned = True

    with trio.CancelScope() as response:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watcher, response)
            await trio.sleep(after_s)
            if disconnect:
                await writer.end()
                await client.to_app.send({"type": "http.disconnect"})
                await trio.testing.wait_all_tasks_blocked()  # read before the stop
            end.stop(response)
    return response, returned


@pytest.mark.parametrize("disconnect", [False, True])
async def test_a_stopped_watcher_returns_and_cancels_nothing(
    autojump_clock: trio.testing.MockClock, disconnect: bool
) -> None:
    # The body is written: the watcher's wait is cut short (or the disconnect
    # that follows a complete response is read), and the watcher returns on
    # its own; the response's scope is never cancelled (no Cancelled through
    # the nursery per response).
    client = _Client()
    response, returned = await _stopped(
        client, BodyWriter(client.send, 15), 20, disconnect=disconnect
    )
    assert returned
    assert not response.cancel_called
    assert client.keepalives() == [15]


async def test_a_watcher_stopped_before_it_ran_returns_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = _Client()
    response, returned = await _stopped(client, BodyWriter(client.send, 15), 0)
    assert returned
    assert not response.cancel_called
    assert client.sent == []


async def test_a_watcher_stopped_in_a_keepalive_is_cancelled_with_the_response(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A keepalive stuck in a send (the client stopped reading) is not waited
    # for: the response's scope is cancelled, as without a WatchEnd.
    client = _Client()
    client.reading = trio.Event()
    response, returned = await _stopped(client, BodyWriter(client.send, 15), 20)
    assert response.cancelled_caught
    assert not returned
    assert trio.current_time() == 20
    assert client.sent == []


async def test_with_a_watch_end_a_disconnect_mid_body_still_cancels(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = _Client()
    writer = BodyWriter(client.send, 15)
    with trio.fail_after(60), trio.CancelScope() as response:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                watch_client, client.receive, response, writer, None, None, WatchEnd()
            )
            await writer.write(b"data: x\n\n")
            await client.to_app.send({"type": "http.disconnect"})
            await trio.sleep_forever()
    assert response.cancelled_caught
    assert trio.current_time() == 0
