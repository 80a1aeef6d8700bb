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

See ``procession.testing._fake_server`` for the design and the fault catalogue.
"""

from .._faces import fixup_module_metadata as _fixup_module_metadata
from ._fake_server import ConnectionLog as ConnectionLog
from ._fake_server import Endpoint as Endpoint
from ._fake_server import FakeProvider as FakeProvider
from ._fake_server import FakeProviderError as FakeProviderError
from ._fake_server import Fault as Fault
from ._fake_server import HttpError as HttpError
from ._fake_server import RecordedRequest as RecordedRequest
from ._fake_server import Stream as Stream
from ._fake_server import Turn as Turn
from ._fake_server import Usage as Usage
from ._fake_server import anthropic_events as anthropic_events
from ._fake_server import chat_events as chat_events
from ._fake_server import open_fake_provider as open_fake_provider
from ._fake_server import responses_events as responses_events

__all__ = [
    "ConnectionLog",
    "Endpoint",
    "FakeProvider",
    "FakeProviderError",
    "Fault",
    "HttpError",
    "RecordedRequest",
    "Stream",
    "Turn",
    "Usage",
    "anthropic_events",
    "chat_events",
    "open_fake_provider",
    "responses_events",
]

_fixup_module_metadata(__name__, globals())
