"""The Anthropic Messages API, on the official ``anthropic`` SDK (>= 1.0, httpx2).

The SDK makes the request (auth, headers, base URL, HTTP error classes); the
streamed body is read here (see ``_sse``) and turned into chunks:

==============================  ==========================================
Anthropic event                 chunks
==============================  ==========================================
``message_start``               ``response-metadata`` (id, model)
text block                      ``text-start``, ``text-delta``…, ``text-end``
thinking block                  ``reasoning-start``, ``reasoning-delta``…,
                                ``reasoning-end`` (carrying the signature)
redacted_thinking block         ``redacted-reasoning``
tool_use block                  ``tool-call-input-streaming-start``,
                                ``tool-call-delta``…,
                                ``tool-call-input-streaming-end``, ``tool-call``
``message_delta``               (stop reason and usage, in ``finish``)
``error``                       ``ProviderStreamError`` (code: the error type)
==============================  ==========================================

Chunk ids are the content block index (``"0"``, ``"1"``, ...), unique within a
response. A body that ends without ``message_stop`` raises
``ProviderStreamError(code="incomplete_stream")``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Unpack, cast

import attrs

from .._errors import ConfigurationError, ProviderError
from .._secrets import register_secret
from ..data import (
    ReasoningDeltaChunk,
    ReasoningDeltaPayload,
    ReasoningEndChunk,
    ReasoningEndPayload,
    ReasoningStartChunk,
    ReasoningStartPayload,
    RedactedReasoningChunk,
    RedactedReasoningPayload,
    ResponseMetadataChunk,
    ResponseMetadataPayload,
    TextDeltaChunk,
    TextDeltaPayload,
    TextEndChunk,
    TextEndPayload,
    TextStartChunk,
    TextStartPayload,
    Usage,
)
from ..models import ModelRequest
from ._anthropic_request import _request_body
from ._errors import anthropic_error, incomplete_stream
from ._http_model import HttpModel
from ._json import as_dict, get_dict, get_int, get_str
from ._sse import (
    DEFAULT_MAX_EVENT_BYTES,
    ProviderResponse,
    ResponseOptions,
    ServerSentEvent,
    usage_total,
)
from ._tool_calls import ToolCallBlock, ToolCallEmitter

if TYPE_CHECKING:
    import anthropic
    import httpx2
    from anthropic.types import MessageParam

__all__ = ["AnthropicModel", "AnthropicResponse"]

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"

_FINISH_REASONS: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool-calls",
    "refusal": "content-filter",
    "pause_turn": "other",
}


def _import_sdk() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise ConfigurationError(
            "the Anthropic provider needs the 'anthropic' package, which is not "
            'installed: pip install "procession[anthropic]"'
        ) from exc
    return anthropic


class AnthropicModel(HttpModel):
    """A Claude model through the Anthropic Messages API (streaming).

    Args:
        model_id: the model, e.g. ``"claude-sonnet-4-5"``.
        api_key: the API key; default ``$ANTHROPIC_API_KEY``. Not needed when
            ``client`` is given.
        base_url: the API root (without ``/v1``); default ``$ANTHROPIC_BASE_URL``,
            else the SDK's default.
        client: an ``anthropic.AsyncAnthropic`` to use as it is (its retry
            setting is then yours: procession retries through error processors,
            so ``max_retries=0`` is recommended).
        http_client: an ``httpx2.AsyncClient`` for the SDK client this model
            builds (ignored with ``client``); you close it.
        max_tokens: ``max_tokens`` when the call settings do not say.
        default_headers: headers sent with every request.
        max_event_bytes: the largest server-sent event accepted (default
            16 MiB); a larger one ends the stream with ``EventTooLargeError``.

    Raises:
        ConfigurationError: the ``anthropic`` package is missing, there is no
            API key (neither ``api_key``, ``client`` nor ``$ANTHROPIC_API_KEY``).
            Raised here, before any request.

    The SDK client it builds has ``max_retries=0``: retries are the agent's
    (error processors), never hidden inside the provider. ``await model.aclose()``
    (or ``async with model:``) closes a client it built.
    """

    _provider = "anthropic"

    def __init__(
        self,
        model_id: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        http_client: httpx2.AsyncClient | None = None,
        max_tokens: int = 4096,
        default_headers: Mapping[str, str] | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        super().__init__(model_id, max_event_bytes=max_event_bytes)
        if (
            isinstance(max_tokens, bool)
            or not isinstance(max_tokens, int)
            or (max_tokens < 1)
        ):
            raise ConfigurationError(
                f"AnthropicModel(max_tokens=) must be a positive int, got "
                f"{max_tokens!r}"
            )
        sdk = _import_sdk()
        self._max_tokens = max_tokens
        self._owns_client = client is None
        if client is None:
            key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
            if not key:
                raise ConfigurationError(
                    f"no Anthropic API key for model {model_id!r}: set the "
                    f"{API_KEY_ENV} environment variable or pass "
                    f"AnthropicModel(api_key=...)"
                )
            url = base_url if base_url is not None else os.environ.get(BASE_URL_ENV)
            kwargs: dict[str, Any] = {"api_key": key, "max_retries": 0}
            if url:
                kwargs["base_url"] = url
            if http_client is not None:
                kwargs["http_client"] = http_client
            if default_headers:
                kwargs["default_headers"] = dict(default_headers)
            client = cast("anthropic.AsyncAnthropic", sdk.AsyncAnthropic(**kwargs))
        # Whatever the key's source, no error, log line or frame shows it.
        register_secret(getattr(client, "api_key", None))
        self._client = client

    @property
    def client(self) -> anthropic.AsyncAnthropic:
        """The SDK client requests go through."""
        return self._client

    def request_body(self, request: ModelRequest) -> tuple[dict[str, Any], list[Any]]:
        """The JSON body this model sends for ``request`` (without ``stream``),
        and the warnings (settings the API does not support)."""
        return _request_body(self._model_id, self._max_tokens, request)

    async def _send(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[httpx2.Response, dict[str, Any]]:
        rest = {
            k: v
            for k, v in body.items()
            if k not in ("model", "max_tokens", "messages")
        }
        try:
            stream = await self._client.messages.create(
                model=self._model_id,
                max_tokens=body["max_tokens"],
                messages=cast("list[MessageParam]", body["messages"]),
                stream=True,
                extra_body=rest,
                extra_headers=headers or None,
            )
        except Exception as exc:
            mapped = anthropic_error(exc)
            if mapped is None:
                raise
            raise mapped from exc
        return stream.response, {**body, "stream": True}

    async def _close_client(self) -> None:
        await self._client.close()


@attrs.define
class _Block:
    """An open text, thinking or redacted-thinking block (a tool call's is a
    ``ToolCallBlock``)."""

    kind: str
    id: str
    signature: str | None = None


class AnthropicResponse(ProviderResponse):
    """The chunks of one streamed Messages API response (see the module
    docstring); ``finish`` is set once the body ended after ``message_stop``."""

    provider = "anthropic"
    model_class = "AnthropicModel"

    def __init__(
        self, response: httpx2.Response, **options: Unpack[ResponseOptions]
    ) -> None:
        super().__init__(response, **options)
        self._blocks: dict[int, _Block | ToolCallBlock] = {}
        self._tool_calls = ToolCallEmitter(self._emit)
        self._message_id: str | None = None
        self._model: str | None = None
        self._usage: dict[str, Any] = {}
        self._stop_reason: str | None = None
        self._stop_sequence: str | None = None
        self._stopped = False

    def _map_error(self, exc: Exception) -> ProviderError | None:
        return anthropic_error(exc)

    def _on_event(self, event: ServerSentEvent) -> None:
        name = event.event
        if name is None or name == "ping":
            return
        data = as_dict(event.json())
        if name == "error":
            import anthropic

            raise anthropic.APIStatusError(
                str(data), response=self._response, body=data
            )
        if name == "message_start":
            message = get_dict(data, "message")
            self._message_id = get_str(message, "id")
            self._model = get_str(message, "model")
            self._usage.update(get_dict(message, "usage"))
            self._emit(
                ResponseMetadataChunk(
                    payload=ResponseMetadataPayload(
                        id=self._message_id, model_id=self._model
                    )
                )
            )
        elif name == "content_block_start":
            self._block_start(data)
        elif name == "content_block_delta":
            self._block_delta(data)
        elif name == "content_block_stop":
            self._block_stop(data)
        elif name == "message_delta":
            delta = get_dict(data, "delta")
            if "stop_reason" in delta:
                self._stop_reason = get_str(delta, "stop_reason")
                self._stop_sequence = get_str(delta, "stop_sequence")
            # Counts are cumulative; a null means "not reported here", not zero,
            # so it must not wipe what message_start said.
            self._usage.update(
                {k: v for k, v in get_dict(data, "usage").items() if v is not None}
            )
        elif name == "message_stop":
            self._stopped = True

    def _block_start(self, data: dict[str, Any]) -> None:
        index = get_int(data, "index")
        if index is None:
            return
        block = get_dict(data, "content_block")
        kind = get_str(block, "type") or ""
        bid = str(index)
        if kind == "text":
            self._blocks[index] = _Block("text", bid)
            self._emit(TextStartChunk(payload=TextStartPayload(id=bid)))
            if text := get_str(block, "text"):
                self._emit(TextDeltaChunk(payload=TextDeltaPayload(id=bid, text=text)))
        elif kind == "thinking":
            self._blocks[index] = _Block(
                "thinking", bid, signature=get_str(block, "signature") or None
            )
            self._emit(ReasoningStartChunk(payload=ReasoningStartPayload(id=bid)))
            if text := get_str(block, "thinking"):
                self._emit(
                    ReasoningDeltaChunk(
                        payload=ReasoningDeltaPayload(id=bid, text=text)
                    )
                )
        elif kind == "redacted_thinking":
            self._blocks[index] = _Block("redacted", bid)
            self._emit(
                RedactedReasoningChunk(
                    payload=RedactedReasoningPayload(
                        id=bid, data=get_str(block, "data") or ""
                    )
                )
            )
        elif kind == "tool_use":
            self._blocks[index] = self._tool_calls.start(
                get_str(block, "id") or f"toolu_{bid}",
                get_str(block, "name") or "",
                initial_args=block.get("input"),
            )
        # Server tools, their results and other block kinds are not streamed.

    def _block_delta(self, data: dict[str, Any]) -> None:
        index = get_int(data, "index")
        block = self._blocks.get(index) if index is not None else None
        if block is None:
            return
        delta = get_dict(data, "delta")
        kind = get_str(delta, "type")
        if isinstance(block, ToolCallBlock):
            if kind == "input_json_delta":
                self._tool_calls.delta(block, get_str(delta, "partial_json"))
        elif kind == "text_delta" and block.kind == "text":
            if text := get_str(delta, "text"):
                self._emit(
                    TextDeltaChunk(payload=TextDeltaPayload(id=block.id, text=text))
                )
        elif kind == "thinking_delta" and block.kind == "thinking":
            if text := get_str(delta, "thinking"):
                self._emit(
                    ReasoningDeltaChunk(
                        payload=ReasoningDeltaPayload(id=block.id, text=text)
                    )
                )
        elif kind == "signature_delta" and block.kind == "thinking":
            block.signature = (block.signature or "") + (
                get_str(delta, "signature") or ""
            )

    def _block_stop(self, data: dict[str, Any]) -> None:
        index = get_int(data, "index")
        block = self._blocks.pop(index, None) if index is not None else None
        if block is None:
            return
        if isinstance(block, ToolCallBlock):
            self._tool_calls.end(block)
        elif block.kind == "text":
            self._emit(TextEndChunk(payload=TextEndPayload(id=block.id)))
        elif block.kind == "thinking":
            self._emit(
                ReasoningEndChunk(
                    payload=ReasoningEndPayload(id=block.id, signature=block.signature)
                )
            )

    def _on_end(self) -> None:
        if not self._stopped:
            raise incomplete_stream("anthropic", "message_stop")
        usage = self._usage
        details = get_dict(usage, "output_tokens_details")
        reason = self._stop_reason
        self.finish = self._finished(
            _FINISH_REASONS.get(reason, "unknown") if reason is not None else "unknown",
            usage_total(
                Usage(
                    input_tokens=get_int(usage, "input_tokens"),
                    output_tokens=get_int(usage, "output_tokens"),
                    reasoning_tokens=get_int(details, "thinking_tokens"),
                    cached_input_tokens=get_int(usage, "cache_read_input_tokens"),
                    cache_creation_input_tokens=get_int(
                        usage, "cache_creation_input_tokens"
                    ),
                    raw=dict(usage),
                )
            ),
            {
                "anthropic": {
                    "stop_reason": reason,
                    "stop_sequence": self._stop_sequence,
                    "usage": dict(usage),
                }
            },
            request_id=self._response.headers.get("request-id"),
            id=self._message_id,
            model=self._model,
        )


# The model's own class attribute, set once its response class exists.
AnthropicModel._response_class = AnthropicResponse  # noqa: SLF001 - the base's hook
