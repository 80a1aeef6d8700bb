"""Socket-level helpers shared by the provider tests (real SDKs, fake server)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from procession.chunks import TextDeltaChunk
from procession.models import LanguageModel, ModelRequest
from procession.testing.fake_provider import ConnectionLog, FakeProvider


async def wait_for_client_close(server: FakeProvider) -> ConnectionLog:
    """The first connection's log once the server has closed it (it notices the
    client's close on its next write); after 2 s it gives up, so the test's own
    assertions say what did not happen."""
    log = server.connections[0]
    with trio.move_on_after(2):
        await log.wait_closed()
    return log


async def cancel_mid_read(
    model: LanguageModel, request: ModelRequest, deltas: int = 3
) -> Any:
    """Stream ``request`` and cancel the reader while a read is in flight, once
    it has seen ``deltas`` text deltas; the response (already left)."""
    enough = trio.Event()
    responses: list[Any] = []

    async def read() -> None:
        async with model.stream(request) as response:
            responses.append(response)
            seen = 0
            async for chunk in response:
                seen += isinstance(chunk, TextDeltaChunk)
                if seen == deltas:
                    enough.set()

    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await enough.wait()
            # Every task is parked: the reader in its read of the next event.
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    [response] = responses
    return response
