"""Each provider failure arrives as its ``ProviderError`` kind, through the real
anthropic SDK and through httpx2 (OpenAI), against the fake server (real
clock, bounded by ``trio.fail_after``)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic
import httpx2
import pytest
import trio

from procession import (
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    ProviderStatusError,
    ProviderStreamError,
    ProviderTimeoutError,
    RateLimitError,
)
from procession.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from procession.testing.fake_provider import (
    Fault,
    HttpError,
    Stream,
    Turn,
    open_fake_provider,
)
from tests.providers.provider_helpers import HI, HTTPCORE_GC_WARNING

pytestmark = HTTPCORE_GC_WARNING

TIMEOUT = 10
PROVIDERS = ["anthropic", "openai-responses", "openai-chat"]
OVERLOADED_503 = (
    "That model is currently overloaded with other requests. You can retry your "
    "request, or contact us through our help center at help.openai.com."
)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def _model(
    provider: str, anthropic_url: str, openai_url: str, http: httpx2.AsyncClient | None
) -> Any:
    if provider == "anthropic":
        return AnthropicModel(
            "claude-test", api_key="k", base_url=anthropic_url, http_client=http
        )
    cls = OpenAIResponsesModel if provider == "openai-responses" else OpenAIChatModel
    return cls("gpt-test", api_key="k", base_url=openai_url, client=http)


@contextlib.asynccontextmanager
async def _serve(
    provider: str, script: list[Turn], *, read_timeout: float | None = None
) -> AsyncIterator[Any]:
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(open_fake_provider(script))
        http = None
        if read_timeout is not None:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(timeout=httpx2.Timeout(read_timeout))
            )
        url = server.base_url
        yield await stack.enter_async_context(
            _model(provider, url, server.openai_base_url, http)
        )


async def _failure(model: Any) -> ProviderError:
    """The ``ProviderError`` that entering or reading ``model.stream(HI)`` raises."""
    try:
        async with model.stream(HI) as response:
            async for _ in response:
                pass
    except ProviderError as error:
        return error
    pytest.fail("the stream ended without a ProviderError")


async def _fails_with(
    provider: str, script: list[Turn], **kwargs: Any
) -> ProviderError:
    with trio.fail_after(TIMEOUT):
        async with _serve(provider, script, **kwargs) as model:
            return await _failure(model)


def _sdk_cause(provider: str) -> Callable[[BaseException | None], bool]:
    if provider == "anthropic":
        return lambda cause: isinstance(cause, anthropic.APIStatusError)
    return lambda cause: cause is None  # our own client raised it: nothing wrapped


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_429_is_a_rate_limit_error(provider: str) -> None:
    error = await _fails_with(provider, [HttpError.rate_limited(retry_after=7)])
    assert type(error) is RateLimitError
    assert error.status_code == 429
    assert error.is_retryable is True
    assert error.headers["Retry-After"] == "7"
    assert isinstance(error.body, dict)
    assert _sdk_cause(provider)(error.__cause__)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_529_is_an_overloaded_error(provider: str) -> None:
    error = await _fails_with(provider, [HttpError.overloaded()])
    assert type(error) is OverloadedError
    assert error.status_code == 529
    assert error.is_retryable is True
    assert _sdk_cause(provider)(error.__cause__)


@pytest.mark.parametrize("provider", ["openai-responses", "openai-chat"])
async def test_a_503_saying_overloaded_is_an_overloaded_error(provider: str) -> None:
    error = await _fails_with(provider, [HttpError(503, message=OVERLOADED_503)])
    assert type(error) is OverloadedError
    assert error.status_code == 503
    assert error.code == "server_error"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_plain_500_is_a_status_error_of_no_finer_kind(provider: str) -> None:
    error = await _fails_with(provider, [HttpError.server_error()])
    assert type(error) is ProviderStatusError
    assert error.status_code == 500


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_dropped_connection_is_a_connection_error(provider: str) -> None:
    error = await _fails_with(
        provider, [Stream.text("a", "b", "c", fault=Fault(drop_after=3))]
    )
    assert type(error) is ProviderConnectionError
    assert error.code == "incomplete_chunked_read"
    assert error.is_retryable is True
    assert error.status_code is None
    assert isinstance(error.__cause__, httpx2.RemoteProtocolError)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_close_without_response_is_a_connection_error(provider: str) -> None:
    error = await _fails_with(
        provider, [HttpError(500, fault=Fault(close_without_response=True))]
    )
    assert type(error) is ProviderConnectionError
    assert error.code == "ECONNRESET"
    assert error.status_code is None


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_refused_connection_is_a_connection_error(provider: str) -> None:
    with socket.socket() as probe:  # a port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    with trio.fail_after(TIMEOUT):
        async with _model(provider, base, f"{base}/v1", None) as model:
            error = await _failure(model)
    assert type(error) is ProviderConnectionError
    assert error.code == "ECONNREFUSED"
    assert error.is_retryable is True


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stall_mid_body_is_a_timeout_error(provider: str) -> None:
    error = await _fails_with(
        provider,
        [Stream.text("a", "b", fault=Fault(stall_after=3))],
        read_timeout=0.3,
    )
    assert type(error) is ProviderTimeoutError
    assert error.code == "timeout"
    assert error.is_retryable is True
    assert isinstance(error.__cause__, httpx2.ReadTimeout)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_truncated_stream_is_a_stream_error(provider: str) -> None:
    error = await _fails_with(
        provider, [Stream.text("a", "b", fault=Fault(truncate_after=3))]
    )
    assert type(error) is ProviderStreamError
    assert error.code == "incomplete_stream"
    assert error.is_retryable is True
    assert error.status_code is None


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_error_event_in_a_200_stream_is_a_stream_error(provider: str) -> None:
    error = await _fails_with(
        provider, [Stream.text("Hel") + Stream.error("overloaded_error", "Overloaded")]
    )
    assert type(error) is ProviderStreamError
    assert error.code == "overloaded_error"
    assert error.status_code is None
    assert "text/event-stream" in error.headers["content-type"]


async def test_an_event_whose_data_is_not_json_is_a_stream_error() -> None:
    error = await _fails_with(
        "anthropic", [Stream.raw("event: message_start\ndata: {not json\n\n")]
    )
    assert type(error) is ProviderStreamError
    assert error.code == "invalid_response"
    assert error.is_retryable is True
