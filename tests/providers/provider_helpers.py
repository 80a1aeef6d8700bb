"""Helpers shared by the provider tests (real SDKs, fake server): the
dialects the shared suite runs over, a call streamed to its end or its error,
and the socket-level waits."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from procession import ProviderError
from procession.chunks import Chunk, TextDeltaChunk
from procession.models import LanguageModel, ModelRequest, ToolDefinition
from procession.processors import PromptTextPart, PromptUserMessage
from procession.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from procession.runtime.tools import tool
from procession.testing.fake_provider import (
    ConnectionLog,
    FakeProvider,
    open_fake_provider,
)

TIMEOUT = 10
"""Every test's bound (``trio.fail_after``): the sockets are real, so is the clock."""

HI = ModelRequest(prompt=[PromptUserMessage([PromptTextPart("hi")])])
WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather in a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


@attrs.frozen
class City:
    city: str


@tool
def get_weather(args: City) -> str:
    """Weather in a city."""
    return f"18C in {args.city}"


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


# --------------------------------------------------------------------------- #
# The three dialects, and streaming one call through any of them
# --------------------------------------------------------------------------- #

HTTPCORE_GC_WARNING = pytest.mark.filterwarnings(
    "ignore:Async generator 'httpcore2._async.connection_pool.PoolByteStream"
    ".__aiter__' was garbage collected:ResourceWarning"
)
"""httpx2's response stream iterates httpcore2's PoolByteStream generator
without closing it, so closing a response before its body ends (which we must
do, and do: the socket is closed at once, see test_providers.py) leaves that
inner generator to the garbage collector, and trio warns. The warning is
upstream's; everything else stays an error."""

PROVIDER_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
)
"""What could point a model at a real API; the tests unset all of it."""


@attrs.frozen
class Dialect:
    """One provider dialect as the shared tests drive it: its model class, how
    it is built against the fake server, and what it names on the wire."""

    name: str
    kind: type[AnthropicModel | OpenAIChatModel | OpenAIResponsesModel]
    model_id: str
    api_key: str
    path: str
    """The endpoint the server sees."""
    key_env: str
    base_url_env: str
    registered: str
    """A ``provider/model`` id ``resolve_model`` builds this dialect from."""
    incomplete: str
    """What an ``incomplete_stream`` error says the body ended without."""
    events_before_text: int
    """The events a text reply sends before its first delta (a fault after
    one more of them cuts the body after the first delta)."""

    def base_url(self, server: FakeProvider) -> str:
        return (
            server.base_url if self.kind is AnthropicModel else server.openai_base_url
        )

    def build(self, base_url: str, **kwargs: Any) -> Any:
        return self.kind(
            self.model_id, api_key=self.api_key, base_url=base_url, **kwargs
        )


ANTHROPIC = Dialect(
    name="anthropic",
    kind=AnthropicModel,
    model_id="claude-test",
    api_key="test-key",
    path="/v1/messages",
    key_env="ANTHROPIC_API_KEY",
    base_url_env="ANTHROPIC_BASE_URL",
    # (A model id the SDK does not flag as deprecated: it would warn.)
    registered="anthropic/claude-fake-1",
    incomplete="message_stop",
    events_before_text=2,  # message_start, content_block_start
)
CHAT = Dialect(
    name="openai-chat",
    kind=OpenAIChatModel,
    model_id="gpt-test",
    api_key="sk-test",
    path="/v1/chat/completions",
    key_env="OPENAI_API_KEY",
    base_url_env="OPENAI_BASE_URL",
    registered="openai-chat/gpt-4.1",
    incomplete="the usage chunk and [DONE]",
    events_before_text=1,  # the role chunk
)
RESPONSES = attrs.evolve(
    CHAT,
    name="openai-responses",
    kind=OpenAIResponsesModel,
    path="/v1/responses",
    registered="openai/gpt-5",
    incomplete="response.completed",
    # response.created, .in_progress, .output_item.added, .content_part.added
    events_before_text=4,
)
DIALECTS = [ANTHROPIC, CHAT, RESPONSES]


@contextlib.asynccontextmanager
async def serve(
    dialect: Dialect, script: list[Any], **kwargs: Any
) -> AsyncIterator[tuple[FakeProvider, Any]]:
    """The fake server with ``script``, and a ``dialect`` model pointed at it
    (``kwargs`` go to the model)."""
    async with (
        open_fake_provider(script) as server,
        dialect.build(dialect.base_url(server), **kwargs) as model,
    ):
        yield server, model


async def collect(model: Any, request: ModelRequest) -> tuple[list[Chunk], Any]:
    """Every chunk of one call, and its finish."""
    async with model.stream(request) as response:
        chunks = [chunk async for chunk in response]
        return chunks, response.finish


async def collect_until_error(
    model: Any, request: ModelRequest
) -> tuple[list[Chunk], ProviderError]:
    """The chunks of one call up to its ``ProviderError``, and the error."""
    chunks: list[Chunk] = []
    try:
        async with model.stream(request) as response:
            async for chunk in response:
                chunks.append(chunk)
    except ProviderError as error:
        return chunks, error
    pytest.fail(f"the stream ended without a ProviderError after {chunks!r}")


def texts(chunks: list[Chunk]) -> list[str]:
    return [c.payload.text for c in chunks if isinstance(c, TextDeltaChunk)]
