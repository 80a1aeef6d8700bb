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

import base64
import functools
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import attrs

from .._errors import ConfigurationError, MessageFormatError, ProviderError
from ..data import (
    PromptAssistantMessage,
    PromptFilePart,
    PromptMessage,
    PromptReasoningPart,
    PromptSystemMessage,
    PromptTextPart,
    PromptToolCallPart,
    PromptToolMessage,
    PromptToolResultPart,
    PromptUserMessage,
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
    ToolCallChunk,
    ToolCallDeltaChunk,
    ToolCallDeltaPayload,
    ToolCallInputStreamingEndChunk,
    ToolCallInputStreamingEndPayload,
    ToolCallInputStreamingStartChunk,
    ToolCallInputStreamingStartPayload,
    ToolCallPayload,
    Usage,
)
from ..models import ModelFinish, ModelRequest, ToolChoice, ToolDefinition
from ._errors import anthropic_error, incomplete_stream
from ._json import as_dict, dumps, get_dict, get_int, get_str, parse_args
from ._sse import ProviderCall, ProviderResponse, ServerSentEvent, usage_total

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

_SAMPLING_SETTINGS = ("temperature", "top_p", "top_k")
"""Sent in the body through ``extra_body``: SDK >= 1.0 removed the kwargs."""

_KNOWN_SETTINGS = frozenset(
    {
        "max_tokens",
        "max_output_tokens",
        "stop_sequences",
        "headers",
        *_SAMPLING_SETTINGS,
    }
)


def _import_sdk() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise ConfigurationError(
            "the Anthropic provider needs the 'anthropic' package, which is not "
            'installed: pip install "procession[anthropic]"'
        ) from exc
    return anthropic


class AnthropicModel:
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

    Raises:
        ConfigurationError: the ``anthropic`` package is missing, or there is no
            API key (neither ``api_key``, ``client`` nor ``$ANTHROPIC_API_KEY``).
            Raised here, before any request.

    The SDK client it builds has ``max_retries=0``: retries are the agent's
    (error processors), never hidden inside the provider. ``await model.aclose()``
    (or ``async with model:``) closes a client it built.
    """

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
    ) -> None:
        if not isinstance(model_id, str) or not model_id:
            raise ConfigurationError(
                f"AnthropicModel(model_id) must be a non-empty str, got {model_id!r}"
            )
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
        self._model_id = model_id
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
        self._client = client

    @property
    def provider(self) -> str:
        return "anthropic"

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def client(self) -> anthropic.AsyncAnthropic:
        """The SDK client requests go through."""
        return self._client

    def __repr__(self) -> str:
        return f"AnthropicModel({self._model_id!r})"

    async def aclose(self) -> None:
        """Close the SDK client if this model built it (its connection pool)."""
        if self._owns_client:
            await self._client.close()

    async def __aenter__(self) -> AnthropicModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def stream(self, request: ModelRequest) -> ProviderCall:
        """Start a streaming call. Entering sends the request and waits for the
        response headers (``ProviderError`` if the call is rejected or the
        connection fails); leaving closes the HTTP response before returning,
        even when the body was not read to the end or the block was cancelled."""
        if not isinstance(request, ModelRequest):
            raise TypeError(
                f"AnthropicModel.stream expects a ModelRequest, got {request!r}"
            )
        return ProviderCall(functools.partial(self._start, request))

    def request_body(self, request: ModelRequest) -> tuple[dict[str, Any], list[Any]]:
        """The JSON body this model sends for ``request`` (without ``stream``),
        and the warnings (settings the API does not support)."""
        return _request_body(self._model_id, self._max_tokens, request)

    async def _start(self, request: ModelRequest) -> ProviderResponse:
        body, warnings = self.request_body(request)
        headers = _headers_setting(request.settings)
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
        return AnthropicResponse(
            stream.response, request_body={**body, "stream": True}, warnings=warnings
        )


# --------------------------------------------------------------------------- #
# Request
# --------------------------------------------------------------------------- #


def _headers_setting(settings: Mapping[str, Any]) -> dict[str, str]:
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


def _request_body(
    model_id: str, default_max_tokens: int, request: ModelRequest
) -> tuple[dict[str, Any], list[Any]]:
    settings = request.settings
    warnings: list[Any] = [
        {"type": "unsupported-setting", "setting": name}
        for name in settings
        if name not in _KNOWN_SETTINGS
    ]
    system, messages = _prompt(request.prompt)
    max_tokens = settings.get("max_tokens", settings.get("max_output_tokens"))
    body: dict[str, Any] = {
        "model": model_id,
        "max_tokens": default_max_tokens if max_tokens is None else max_tokens,
        "messages": messages,
    }
    if system:
        body["system"] = system
    for name in _SAMPLING_SETTINGS:
        if settings.get(name) is not None:
            body[name] = settings[name]
    if settings.get("stop_sequences"):
        body["stop_sequences"] = list(settings["stop_sequences"])
    if request.tools:
        body["tools"] = [_tool(t) for t in request.tools]
        body["tool_choice"] = _tool_choice(request.tool_choice)
    options = as_dict(request.provider_options.get("anthropic"))
    for key, value in options.items():
        # The AI SDK spells the top-level cache switch in camelCase.
        body["cache_control" if key == "cacheControl" else key] = value
    return body, warnings


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name, "input_schema": dict(tool.input_schema)}
    if tool.description:
        out["description"] = tool.description
    cache = _cache_control(tool.provider_options)
    if cache is not None:
        out["cache_control"] = cache
    return out


def _tool_choice(choice: ToolChoice) -> dict[str, Any]:
    if choice == "auto":
        return {"type": "auto"}
    if choice == "required":
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    if isinstance(choice, Mapping):
        name = choice.get("tool_name") or choice.get("toolName")
        if choice.get("type") == "tool" and isinstance(name, str):
            return {"type": "tool", "name": name}
    raise ConfigurationError(
        f"tool_choice must be 'auto', 'none', 'required' or "
        f"{{'type': 'tool', 'tool_name': ...}}, got {choice!r}"
    )


def _cache_control(options: Mapping[str, Any] | None) -> Any:
    """The ``cache_control`` a part or message asks for through its provider
    options (``{"anthropic": {"cacheControl": {...}}}``, either spelling)."""
    if not options:
        return None
    mine = as_dict(options.get("anthropic"))
    return mine.get("cacheControl", mine.get("cache_control"))


def _with_cache(
    block: dict[str, Any], options: Mapping[str, Any] | None
) -> dict[str, Any]:
    cache = _cache_control(options)
    if cache is not None:
        block["cache_control"] = cache
    return block


def _prompt(
    prompt: Sequence[PromptMessage],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``system`` blocks and ``messages``: every system message becomes a system
    text block (wherever it stood); user and tool messages become user turns and
    assistant messages assistant turns, consecutive turns of one role merged (the
    API wants them alternating, tool results first in the user turn)."""
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]], options: Any) -> None:
        if not blocks:
            return
        cache = _cache_control(options)
        if cache is not None:
            blocks[-1]["cache_control"] = cache
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    for index, message in enumerate(prompt):
        if isinstance(message, PromptSystemMessage):
            system.append(
                _with_cache(
                    {"type": "text", "text": message.content}, message.provider_options
                )
            )
        elif isinstance(message, PromptUserMessage):
            # The API rejects empty text blocks (and a turn with none left).
            add(
                "user",
                [
                    _user_block(p, index)
                    for p in message.content
                    if not isinstance(p, PromptTextPart) or p.text.strip()
                ],
                message.provider_options,
            )
        elif isinstance(message, PromptToolMessage):
            add(
                "user",
                [_tool_result(p) for p in message.content],
                message.provider_options,
            )
        elif isinstance(message, PromptAssistantMessage):
            blocks = [b for p in message.content if (b := _assistant_block(p, index))]
            add("assistant", blocks, message.provider_options)
        else:
            raise MessageFormatError(
                f"prompt message #{index} is not a prompt message: {message!r}"
            )
    _fix_assistant_turns(messages)
    return system, messages


def _fix_assistant_turns(messages: list[dict[str, Any]]) -> None:
    """What the API insists on for assistant turns.

    * Signed thinking blocks lead their turn (two adjacent assistant messages
      merged into one turn could put text before them).
    * A final assistant turn (a prefill) must not end in whitespace.
    """
    thinking = ("thinking", "redacted_thinking")
    for turn in messages:
        if turn["role"] == "assistant":
            blocks = turn["content"]
            turn["content"] = [b for b in blocks if b.get("type") in thinking] + [
                b for b in blocks if b.get("type") not in thinking
            ]
    if messages and messages[-1]["role"] == "assistant":
        last = messages[-1]["content"][-1]
        if last.get("type") == "text":
            last["text"] = last["text"].rstrip()
            if not last["text"]:
                messages[-1]["content"].pop()
                if not messages[-1]["content"]:
                    messages.pop()


def _user_block(part: PromptTextPart | PromptFilePart, index: int) -> dict[str, Any]:
    if isinstance(part, PromptTextPart):
        return _with_cache({"type": "text", "text": part.text}, part.provider_options)
    return _with_cache(_file_block(part, index), part.provider_options)


def _file_block(part: PromptFilePart, index: int) -> dict[str, Any]:
    data, mime = part.data, part.mime_type
    is_url = data.startswith(("http://", "https://"))
    if data.startswith("data:") and ";base64," in data:
        header, _, data = data.partition(",")
        mime = header.removeprefix("data:").split(";", 1)[0] or mime
    if mime.startswith("image/"):
        source: dict[str, Any] = (
            {"type": "url", "url": data}
            if is_url
            else {"type": "base64", "media_type": mime, "data": data}
        )
        return {"type": "image", "source": source}
    if mime == "application/pdf":
        source = (
            {"type": "url", "url": data}
            if is_url
            else {"type": "base64", "media_type": mime, "data": data}
        )
        block: dict[str, Any] = {"type": "document", "source": source}
        if part.filename:
            block["title"] = part.filename
        return block
    if mime.startswith("text/") and not is_url:
        try:
            text = base64.b64decode(data, validate=True).decode("utf-8")
        except ValueError:
            text = data
        return {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": text},
        }
    raise MessageFormatError(
        f"prompt message #{index}: Anthropic cannot take a file of type {mime!r} "
        f"(it takes images, PDFs and text files)"
    )


def _tool_result(part: PromptToolResultPart) -> dict[str, Any]:
    result = part.result
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": part.tool_call_id,
        "content": result if isinstance(result, str) else dumps(result),
    }
    if part.is_error:
        block["is_error"] = True
    return _with_cache(block, part.provider_options)


def _assistant_block(part: Any, index: int) -> dict[str, Any] | None:
    if isinstance(part, PromptTextPart):
        if not part.text:
            return None  # the API rejects empty text blocks
        return _with_cache({"type": "text", "text": part.text}, part.provider_options)
    if isinstance(part, PromptReasoningPart):
        if part.redacted_data is not None:
            return {"type": "redacted_thinking", "data": part.redacted_data}
        if part.signature is None:
            # A thinking block without its signature is rejected by the API;
            # reasoning from another provider cannot be sent back.
            return None
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    if isinstance(part, PromptToolCallPart):
        if part.provider_executed:
            return None  # server tools are not supported
        args = part.args
        if isinstance(args, str):
            args = parse_args(args)
        return _with_cache(
            {
                "type": "tool_use",
                "id": part.tool_call_id,
                "name": part.tool_name,
                "input": args if isinstance(args, dict) else {},
            },
            part.provider_options,
        )
    if isinstance(part, PromptFilePart):
        return _with_cache(_file_block(part, index), part.provider_options)
    return None  # provider-executed tool results: server tools are not supported


# --------------------------------------------------------------------------- #
# Response
# --------------------------------------------------------------------------- #


@attrs.define
class _Block:
    kind: str
    id: str
    tool_call_id: str = ""
    tool_name: str = ""
    input_text: str = ""
    initial_input: Any = None
    signature: str | None = None


class AnthropicResponse(ProviderResponse):
    """The chunks of one streamed Messages API response (see the module
    docstring); ``finish`` is set once the body ended after ``message_stop``."""

    provider = "anthropic"

    def __init__(
        self,
        response: httpx2.Response,
        *,
        request_body: dict[str, Any],
        warnings: list[Any],
    ) -> None:
        super().__init__(response)
        self._request_body = request_body
        self._warnings = warnings
        self._blocks: dict[int, _Block] = {}
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
            tool = _Block(
                "tool",
                bid,
                tool_call_id=get_str(block, "id") or f"toolu_{bid}",
                tool_name=get_str(block, "name") or "",
                initial_input=block.get("input"),
            )
            self._blocks[index] = tool
            self._emit(
                ToolCallInputStreamingStartChunk(
                    payload=ToolCallInputStreamingStartPayload(
                        tool_call_id=tool.tool_call_id, tool_name=tool.tool_name
                    )
                )
            )
        # Server tools, their results and other block kinds are not streamed.

    def _block_delta(self, data: dict[str, Any]) -> None:
        index = get_int(data, "index")
        block = self._blocks.get(index) if index is not None else None
        if block is None:
            return
        delta = get_dict(data, "delta")
        kind = get_str(delta, "type")
        if kind == "text_delta" and block.kind == "text":
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
        elif kind == "input_json_delta" and block.kind == "tool":
            piece = get_str(delta, "partial_json") or ""
            if piece:
                block.input_text += piece
                self._emit(
                    ToolCallDeltaChunk(
                        payload=ToolCallDeltaPayload(
                            tool_call_id=block.tool_call_id,
                            args_text_delta=piece,
                            tool_name=block.tool_name,
                        )
                    )
                )

    def _block_stop(self, data: dict[str, Any]) -> None:
        index = get_int(data, "index")
        block = self._blocks.pop(index, None) if index is not None else None
        if block is None:
            return
        if block.kind == "text":
            self._emit(TextEndChunk(payload=TextEndPayload(id=block.id)))
        elif block.kind == "thinking":
            self._emit(
                ReasoningEndChunk(
                    payload=ReasoningEndPayload(id=block.id, signature=block.signature)
                )
            )
        elif block.kind == "tool":
            if block.input_text:
                args = parse_args(block.input_text)
            elif isinstance(block.initial_input, dict):
                args = block.initial_input
            else:
                args = {}
            self._emit(
                ToolCallInputStreamingEndChunk(
                    payload=ToolCallInputStreamingEndPayload(
                        tool_call_id=block.tool_call_id
                    )
                )
            )
            self._emit(
                ToolCallChunk(
                    payload=ToolCallPayload(
                        tool_call_id=block.tool_call_id,
                        tool_name=block.tool_name,
                        args=args,
                    )
                )
            )

    def _on_end(self) -> None:
        if not self._stopped:
            raise incomplete_stream("anthropic", "message_stop")
        usage = self._usage
        details = get_dict(usage, "output_tokens_details")
        reason = self._stop_reason
        raw_response = self._raw_response()
        raw_response.update(
            request_id=self._response.headers.get("request-id"),
            id=self._message_id,
            model=self._model,
        )
        self.finish = ModelFinish(
            finish_reason=_FINISH_REASONS.get(reason, "unknown")
            if reason is not None
            else "unknown",
            usage=usage_total(
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
            warnings=tuple(self._warnings),
            provider_metadata={
                "anthropic": {
                    "stop_reason": reason,
                    "stop_sequence": self._stop_sequence,
                    "usage": dict(usage),
                }
            },
            request=self._request_body,
            raw_response=raw_response,
        )
