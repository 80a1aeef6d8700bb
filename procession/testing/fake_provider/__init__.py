"""A loopback fake provider server speaking the real Anthropic and OpenAI wire
formats, for testing providers and agents end to end over real sockets.

Importing this module needs ``h11`` (``pip install "procession[testing]"``)::

    from procession.testing.fake_provider import HttpError, Stream, open_fake_provider

    async with open_fake_provider(
        [HttpError.overloaded(headers={"retry-after-ms": "1"}), Stream.text("Hi")]
    ) as server:
        client = anthropic.AsyncAnthropic(api_key="test", base_url=server.base_url)
        ...
    # leaving the block fails the test if the script ran out or was not used up

The server answers ``POST /v1/messages`` (Anthropic Messages: ``event:`` +
``data:`` SSE), ``POST /v1/chat/completions`` (OpenAI Chat Completions:
data-only SSE, ``[DONE]``) and ``POST /v1/responses`` (OpenAI Responses:
``event:`` + ``data:`` SSE with ``sequence_number``), all three from one ordered
script of turns, so a test reads as a conversation:

* the script: ``Stream`` (neutral content, rendered for the endpoint hit),
  ``HttpError``, a callable ``Turn``, each optionally with a ``Fault`` (delays,
  stall, drop, truncation, close without response, split frames), and
  ``TokenCounts``;
* the renderers ``anthropic_events``, ``chat_events`` and ``responses_events``
  (what a ``Stream`` becomes on each endpoint, usable without a server);
* the server: ``open_fake_provider``, ``FakeProvider`` (its requests, its
  script), ``ConnectionLog`` (one per TCP connection, with ``wait_closed`` and
  ``wait_stalled`` to wait on instead of polling the clock).

``Usage``, this module's name for ``TokenCounts`` until 0.1, still works for one
release and warns (``DeprecationWarning``): it was easy to mistake for
``procession.chunks.Usage``, a different class.
"""

from __future__ import annotations

import typing as _typing
import warnings as _warnings

from ..._faces import fixup_module_metadata as _fixup_module_metadata
from ._render_anthropic import anthropic_events as anthropic_events
from ._render_openai import chat_events as chat_events
from ._render_openai import responses_events as responses_events
from ._script import Endpoint as Endpoint
from ._script import Fault as Fault
from ._script import HttpError as HttpError
from ._script import RecordedRequest as RecordedRequest
from ._script import Stream as Stream
from ._script import TokenCounts as TokenCounts
from ._script import Turn as Turn
from ._server import ConnectionLog as ConnectionLog
from ._server import FakeProvider as FakeProvider
from ._server import FakeProviderError as FakeProviderError
from ._server import open_fake_provider as open_fake_provider

__all__ = [
    "ConnectionLog",
    "Endpoint",
    "FakeProvider",
    "FakeProviderError",
    "Fault",
    "HttpError",
    "RecordedRequest",
    "Stream",
    "TokenCounts",
    "Turn",
    "anthropic_events",
    "chat_events",
    "open_fake_provider",
    "responses_events",
]

# Deprecated names (kept for one release), each with its new name.
_RENAMED = {"Usage": "TokenCounts"}


def __getattr__(name: str) -> _typing.Any:
    if name not in _RENAMED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    new = _RENAMED[name]
    _warnings.warn(
        f"{__name__}.{name} is renamed {new} (it is not procession.chunks.Usage); "
        f"the old name will be removed in the next release",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[new]


_fixup_module_metadata(__name__, globals())
