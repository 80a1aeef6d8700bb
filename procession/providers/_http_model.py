"""What every provider model shares: its checked arguments, its lifecycle (the
client it closes, ``async with``), and a streaming call made of a request body,
the ``headers`` setting, one HTTP send and the dialect's response.

A dialect says how the body is built (``request_body``), how it is sent
(``_send``: the ``anthropic`` SDK, or ``httpx2`` directly) and which
``ProviderResponse`` reads the stream (``_response_class``).
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self

from .._errors import ConfigurationError
from ..models import ModelRequest
from ._sse import ProviderCall, ProviderResponse, check_max_event_bytes

if TYPE_CHECKING:
    import httpx2

__all__ = ["HttpModel", "headers_setting"]


class HttpModel(abc.ABC):
    """A model reached over HTTP with streamed server-sent events.

    ``__init__`` checks ``model_id`` and ``max_event_bytes`` (a
    ``ConfigurationError`` naming the class); the subclass then builds or takes
    its client and says whether it owns it (``_owns_client``), so that
    ``aclose`` closes only a client the model built.
    """

    _provider: ClassVar[str]
    _response_class: ClassVar[type[ProviderResponse]]
    _owns_client: bool

    def __init__(self, model_id: str, *, max_event_bytes: int) -> None:
        name = type(self).__name__
        if not isinstance(model_id, str) or not model_id:
            raise ConfigurationError(
                f"{name}(model_id) must be a non-empty str, got {model_id!r}"
            )
        self._max_event_bytes = check_max_event_bytes(max_event_bytes, name)
        self._model_id = model_id

    @property
    def provider(self) -> str:
        return self._provider

    @property
    def model_id(self) -> str:
        return self._model_id

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._model_id!r})"

    async def aclose(self) -> None:
        """Close the client if this model built it (its connection pool).
        Checkpoints if there is a client to close; cancellation propagates."""
        if self._owns_client:
            await self._close_client()

    async def __aenter__(self) -> Self:
        """The model itself (no checkpoint); leaving the block closes it."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """``aclose()``: checkpoints like it."""
        await self.aclose()

    def stream(self, request: ModelRequest) -> ProviderCall:
        """Start a streaming call. Entering sends the request and waits for the
        response headers (``ProviderError`` if the call is rejected or the
        connection fails); leaving closes the HTTP response before returning,
        even when the body was not read to the end or the block was cancelled."""
        if not isinstance(request, ModelRequest):
            raise TypeError(
                f"{type(self).__name__}.stream expects a ModelRequest, got {request!r}"
            )
        return ProviderCall(functools.partial(self._start, request))

    @abc.abstractmethod
    def request_body(self, request: ModelRequest) -> tuple[dict[str, Any], list[Any]]:
        """The JSON body this model sends for ``request``, and the warnings
        (settings the endpoint does not support)."""

    @abc.abstractmethod
    async def _send(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[httpx2.Response, dict[str, Any]]:
        """Send ``body`` with the call's extra ``headers``; the streaming
        response once its headers arrived, and the body as it was sent.
        Raises ``ProviderError`` if the call is rejected or fails."""

    @abc.abstractmethod
    async def _close_client(self) -> None:
        """Close the client this model built."""

    async def _start(self, request: ModelRequest) -> ProviderResponse:
        body, warnings = self.request_body(request)
        headers = headers_setting(request.settings)
        response, sent = await self._send(body, headers)
        return self._response_class(
            response,
            request_body=sent,
            warnings=warnings,
            max_event_bytes=self._max_event_bytes,
        )


def headers_setting(settings: Mapping[str, Any]) -> dict[str, str]:
    """The call's ``headers`` setting (``{}`` when unset); ``ConfigurationError``
    unless it maps str to str."""
    headers = settings.get("headers")
    if headers is None:
        return {}
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise ConfigurationError(
            f"model setting 'headers' must map str to str, got {headers!r}"
        )
    return dict(headers)
