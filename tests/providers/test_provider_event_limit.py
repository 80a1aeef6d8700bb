"""Each provider model takes ``max_event_bytes`` (issue 9, §2.6): an event
larger than it ends the stream with ``EventTooLargeError`` naming the model
class to configure; a bad value is refused when the model is built.

Against the loopback fake server (real clock, bounded by ``trio.fail_after``).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from procession import ConfigurationError, EventTooLargeError
from procession.chunks import TextDeltaChunk
from procession.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from procession.testing.fake_provider import (
    Stream,
    anthropic_events,
    chat_events,
    open_fake_provider,
    responses_events,
)
from tests.providers.provider_helpers import HI, HTTPCORE_GC_WARNING

pytestmark = HTTPCORE_GC_WARNING

MODELS = [AnthropicModel, OpenAIChatModel, OpenAIResponsesModel]
RENDER: dict[type, Any] = {
    AnthropicModel: anthropic_events,
    OpenAIChatModel: chat_events,
    OpenAIResponsesModel: responses_events,
}


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def build(kind: type, base_url: str, **options: Any) -> Any:
    url = base_url if kind is AnthropicModel else base_url + "/v1"
    return kind("m", api_key="k", base_url=url, **options)


async def read_all(kind: type, events: list[str], **options: Any) -> list[str]:
    """The text deltas of one streamed response of ``kind`` serving ``events``."""
    with trio.fail_after(10):
        async with (
            open_fake_provider([Stream.raw(events)]) as server,
            build(kind, server.base_url, **options) as model,
            model.stream(HI) as response,
        ):
            return [
                c.payload.text async for c in response if isinstance(c, TextDeltaChunk)
            ]


@pytest.mark.parametrize("kind", MODELS)
async def test_an_event_over_the_limit_names_the_setting(kind: type) -> None:
    events = RENDER[kind](Stream.text("x" * 5000), model="m")
    with pytest.raises(EventTooLargeError, match="limit of 1000 bytes") as info:
        await read_all(kind, events, max_event_bytes=1000)
    assert str(info.value).endswith(
        f"raise the limit: {kind.__name__}(..., max_event_bytes=...)"
    )
    assert info.value.limit == 1000


@pytest.mark.parametrize("kind", MODELS)
async def test_a_large_event_under_the_default_limit_passes(kind: type) -> None:
    text = "y" * 1_000_000
    events = RENDER[kind](Stream.text(text), model="m")
    assert "".join(await read_all(kind, events)) == text


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("value", [0, -1, True, 1.5, "16MiB", None])
def test_a_bad_limit_is_refused_when_the_model_is_built(kind: type, value: Any) -> None:
    with pytest.raises(
        ConfigurationError,
        match=rf"{kind.__name__}\(max_event_bytes=\) must be a positive int",
    ):
        build(kind, "http://127.0.0.1:9", max_event_bytes=value)
