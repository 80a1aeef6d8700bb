"""OpenAI Chat Completions and Responses, spoken directly over ``httpx2``.

No ``openai`` SDK: both endpoints are a POST with ``stream: true`` whose body is
server-sent events, which ``_sse`` reads. Works against any OpenAI-compatible
server through ``base_url`` (which includes ``/v1``).

Chat Completions (data-only SSE, ending with ``data: [DONE]``): ``content``
deltas become ``text-start/-delta/-end`` (id ``"text-0"``), ``reasoning_content``
/ ``reasoning`` deltas (sent by several compatible servers) become
``reasoning-*`` (id ``"reasoning-0"``), tool calls stream by ``index`` as
``tool-call-input-streaming-start``, ``tool-call-delta``… and, once the choice
finishes, ``tool-call-input-streaming-end`` and ``tool-call``. A ``data:``
object with an ``error`` key raises ``ProviderStreamError`` with that object as
body.

Responses (``event:`` + ``data:``): output items map to the same chunks (ids are
the item ids); ``response.completed`` / ``response.incomplete`` end the stream;
an ``error`` event and ``response.failed`` raise ``ProviderStreamError`` whose
``body`` is the event itself, in whichever shape it came (flat or nested
``error``), so error processors can match it.
"""

from __future__ import annotations

import abc
import functools
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self

import attrs
import trio

from .._errors import (
    ConfigurationError,
    MessageFormatError,
    ProviderError,
    ProviderStreamError,
)
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
from ._errors import (
    headers_of,
    http_error,
    incomplete_stream,
    openai_error_code,
    openai_payload_retryable,
    parse_error_body,
    retryable_status,
    stream_error,
    transport_error,
)
from ._json import as_dict, dumps, get_dict, get_int, get_str, parse_args
from ._sse import (
    CLOSE_DEADLINE,
    ProviderCall,
    ProviderResponse,
    ServerSentEvent,
    usage_total,
)

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "OpenAIChatModel",
    "OpenAIChatResponse",
    "OpenAIResponsesModel",
    "OpenAIResponsesResponse",
]

API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"


def _import_httpx2() -> Any:
    try:
        import httpx2
    except ImportError as exc:
        raise ConfigurationError(
            "the OpenAI providers need the 'httpx2' package, which is not "
            'installed: pip install "procession[openai]"'
        ) from exc
    return httpx2


class _OpenAIModel(abc.ABC):
    """What the Chat Completions and Responses models share: configuration,
    the HTTP client, sending the request and mapping HTTP errors."""

    _path: ClassVar[str]
    _provider: ClassVar[str]
    _kind: ClassVar[str]

    def __init__(
        self,
        model_id: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: httpx2.AsyncClient | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        name = type(self).__name__
        if not isinstance(model_id, str) or not model_id:
            raise ConfigurationError(
                f"{name}(model_id) must be a non-empty str, got {model_id!r}"
            )
        http = _import_httpx2()
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        if not key:
            raise ConfigurationError(
                f"no OpenAI API key for model {model_id!r}: set the {API_KEY_ENV} "
                f"environment variable or pass {name}(api_key=...) (any non-empty "
                f"string, for a compatible server that does not check keys)"
            )
        url = base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
        self._model_id = model_id
        self._url = url.rstrip("/") + self._path
        self._headers = {
            "authorization": f"Bearer {key}",
            "accept": "text/event-stream",
            **dict(default_headers or {}),
        }
        self._owns_client = client is None
        if client is None:
            client = http.AsyncClient(timeout=http.Timeout(600.0, connect=10.0))
        self._http: httpx2.AsyncClient = client

    @property
    def provider(self) -> str:
        return self._provider

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def url(self) -> str:
        """The endpoint requests are posted to."""
        return self._url

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._model_id!r})"

    async def aclose(self) -> None:
        """Close the HTTP client if this model built it."""
        if self._owns_client:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def stream(self, request: ModelRequest) -> ProviderCall:
        """Start a streaming call. Entering posts the request and waits for the
        response headers (``ProviderError`` for an HTTP error status or a failed
        connection); leaving closes the HTTP response before returning, even when
        the body was not read to the end or the block was cancelled."""
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
    def _response(
        self, response: httpx2.Response, body: dict[str, Any], warnings: list[Any]
    ) -> ProviderResponse:
        """The streamed response object for this endpoint."""

    async def _start(self, request: ModelRequest) -> ProviderResponse:
        import httpx2

        body, warnings = self.request_body(request)
        headers = {**self._headers, **_headers_setting(request.settings)}
        http_request = self._http.build_request(
            "POST", self._url, json=body, headers=headers
        )
        try:
            response = await self._http.send(http_request, stream=True)
        except httpx2.TransportError as exc:
            raise transport_error(self._provider, exc) from exc
        content_type = response.headers.get("content-type", "")
        if response.status_code >= 400 or content_type.startswith("application/json"):
            raise await self._rejected(response)
        return self._response(response, body, warnings)

    async def _rejected(self, response: httpx2.Response) -> ProviderError:
        """The error for a response that is not a stream (read, then closed)."""
        import httpx2

        try:
            raw = await response.aread()
        except httpx2.TransportError:
            raw = b""
        finally:
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + CLOSE_DEADLINE
                await response.aclose()
        body = parse_error_body(raw)
        headers = headers_of(response)
        code = openai_error_code(body)
        if response.status_code < 400:
            return stream_error(
                f"{self._provider} answered with JSON instead of an event stream: "
                f"{str(body)[:500]}",
                headers=headers,
                body=body,
                is_retryable=openai_payload_retryable(body),
                code=code,
            )
        retryable = retryable_status(response.status_code, headers)
        if code == "insufficient_quota":
            retryable = False
        return http_error(
            self._provider,
            response.status_code,
            headers,
            body,
            code=code,
            is_retryable=retryable,
        )


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


def _unsupported(settings: Mapping[str, Any], known: frozenset[str]) -> list[Any]:
    return [
        {"type": "unsupported-setting", "setting": name}
        for name in settings
        if name not in known and settings[name] is not None
    ]


def _result_text(result: object) -> str:
    return result if isinstance(result, str) else dumps(result)


def _args_text(args: object) -> str:
    return args if isinstance(args, str) else dumps(args if args is not None else {})


def _data_url(part: PromptFilePart) -> str:
    if part.data.startswith(("http://", "https://", "data:")):
        return part.data
    return f"data:{part.mime_type};base64,{part.data}"


def _options(request: ModelRequest) -> dict[str, Any]:
    return as_dict(request.provider_options.get("openai"))


def _tool_name_of(choice: ToolChoice) -> str | None:
    if isinstance(choice, Mapping) and choice.get("type") == "tool":
        name = choice.get("tool_name") or choice.get("toolName")
        if isinstance(name, str):
            return name
    return None


def _bad_choice(choice: object) -> ConfigurationError:
    return ConfigurationError(
        f"tool_choice must be 'auto', 'none', 'required' or "
        f"{{'type': 'tool', 'tool_name': ...}}, got {choice!r}"
    )


@attrs.define
class _ToolState:
    call_id: str
    name: str
    item_id: str = ""
    args_text: str = ""
    done: bool = False


# =========================================================================== #
# Chat Completions
# =========================================================================== #

_CHAT_SETTINGS = {
    "max_tokens": "max_tokens",
    "max_output_tokens": "max_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "seed": "seed",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "stop_sequences": "stop",
}

_CHAT_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
}


class OpenAIChatModel(_OpenAIModel):
    """A model behind the Chat Completions endpoint (``POST
    {base_url}/chat/completions``, streaming with ``include_usage``).

    Args:
        model_id: the model, e.g. ``"gpt-4.1-mini"``.
        api_key: default ``$OPENAI_API_KEY``.
        base_url: the API root including ``/v1``; default ``$OPENAI_BASE_URL``,
            else ``https://api.openai.com/v1``. Any OpenAI-compatible server works.
        client: a shared ``httpx2.AsyncClient`` (you close it); otherwise the
            model builds its own (``await model.aclose()`` closes it).
        default_headers: headers sent with every request.

    Raises:
        ConfigurationError: ``httpx2`` is missing or there is no API key; raised
            here, before any request.

    Call settings: ``max_tokens``, ``temperature``, ``top_p``, ``seed``,
    ``presence_penalty``, ``frequency_penalty``, ``stop_sequences`` (others are
    reported as warnings); ``provider_options["openai"]`` is merged into the body.
    """

    _path = "/chat/completions"
    _provider = "openai-chat"

    def request_body(self, request: ModelRequest) -> tuple[dict[str, Any], list[Any]]:
        settings = request.settings
        warnings = _unsupported(settings, frozenset({*_CHAT_SETTINGS, "headers"}))
        body: dict[str, Any] = {
            "model": self._model_id,
            "messages": _chat_messages(request.prompt),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        for name, wire in _CHAT_SETTINGS.items():
            value = settings.get(name)
            if value is not None and wire not in body:
                body[wire] = list(value) if name == "stop_sequences" else value
        if request.tools:
            body["tools"] = [_chat_tool(t) for t in request.tools]
            body["tool_choice"] = _chat_tool_choice(request.tool_choice)
        body.update(_options(request))
        return body, warnings

    def _response(
        self, response: httpx2.Response, body: dict[str, Any], warnings: list[Any]
    ) -> ProviderResponse:
        return OpenAIChatResponse(response, request_body=body, warnings=warnings)


def _chat_tool(tool: ToolDefinition) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": tool.name,
        "parameters": dict(tool.input_schema),
    }
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def _chat_tool_choice(choice: ToolChoice) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    name = _tool_name_of(choice)
    if name is None:
        raise _bad_choice(choice)
    return {"type": "function", "function": {"name": name}}


def _chat_messages(prompt: Sequence[PromptMessage]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for index, message in enumerate(prompt):
        if isinstance(message, PromptSystemMessage):
            out.append({"role": "system", "content": message.content})
        elif isinstance(message, PromptUserMessage):
            parts = message.content
            if len(parts) == 1 and isinstance(parts[0], PromptTextPart):
                out.append({"role": "user", "content": parts[0].text})
            else:
                out.append(
                    {
                        "role": "user",
                        "content": [_chat_user_part(p, index) for p in parts],
                    }
                )
        elif isinstance(message, PromptAssistantMessage):
            text = "".join(
                p.text for p in message.content if isinstance(p, PromptTextPart)
            )
            calls = [
                {
                    "id": p.tool_call_id,
                    "type": "function",
                    "function": {"name": p.tool_name, "arguments": _args_text(p.args)},
                }
                for p in message.content
                if isinstance(p, PromptToolCallPart) and not p.provider_executed
            ]
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = calls
            if text or calls:
                out.append(entry)
        elif isinstance(message, PromptToolMessage):
            out.extend(
                {
                    "role": "tool",
                    "tool_call_id": p.tool_call_id,
                    "content": _result_text(p.result),
                }
                for p in message.content
            )
        else:
            raise MessageFormatError(
                f"prompt message #{index} is not a prompt message: {message!r}"
            )
    return out


def _chat_user_part(
    part: PromptTextPart | PromptFilePart, index: int
) -> dict[str, Any]:
    if isinstance(part, PromptTextPart):
        return {"type": "text", "text": part.text}
    if part.mime_type.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": _data_url(part)}}
    if part.mime_type == "application/pdf" and not part.data.startswith("http"):
        return {
            "type": "file",
            "file": {
                "filename": part.filename or "document.pdf",
                "file_data": _data_url(part),
            },
        }
    raise MessageFormatError(
        f"prompt message #{index}: Chat Completions cannot take a file of type "
        f"{part.mime_type!r} (it takes images and inline PDFs)"
    )


class OpenAIChatResponse(ProviderResponse):
    """The chunks of one streamed Chat Completions response (see the module
    docstring); ``finish`` is set once the body ended after ``[DONE]`` or a
    ``finish_reason``."""

    provider = "openai-chat"

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
        self._id: str | None = None
        self._model: str | None = None
        self._metadata_sent = False
        self._text_open = False
        self._reasoning_open = False
        self._tools: dict[int, _ToolState] = {}
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] | None = None
        self._saw_done = False

    def _on_event(self, event: ServerSentEvent) -> None:
        if event.data.strip() == "[DONE]":
            self._saw_done = True
            self._close_blocks()
            return
        payload = as_dict(event.json())
        if payload.get("error") is not None:
            raise _event_error(self.provider, payload, self._response)
        if not self._metadata_sent and (
            get_str(payload, "id") or get_str(payload, "model")
        ):
            self._metadata_sent = True
            self._id = get_str(payload, "id")
            self._model = get_str(payload, "model")
            self._emit(
                ResponseMetadataChunk(
                    payload=ResponseMetadataPayload(
                        id=self._id,
                        model_id=self._model,
                        timestamp=get_int(payload, "created"),
                    )
                )
            )
        usage = payload.get("usage")
        if isinstance(usage, dict):
            self._usage = usage
        choices = payload.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            choice = as_dict(choice)
            if get_int(choice, "index") not in (0, None):
                continue  # n > 1 is not supported: only the first choice counts
            self._delta(get_dict(choice, "delta"))
            reason = get_str(choice, "finish_reason")
            if reason is not None:
                self._finish_reason = reason
                self._close_blocks()

    def _delta(self, delta: dict[str, Any]) -> None:
        reasoning = get_str(delta, "reasoning_content") or get_str(delta, "reasoning")
        if reasoning:
            if not self._reasoning_open:
                self._reasoning_open = True
                self._emit(
                    ReasoningStartChunk(payload=ReasoningStartPayload(id="reasoning-0"))
                )
            self._emit(
                ReasoningDeltaChunk(
                    payload=ReasoningDeltaPayload(id="reasoning-0", text=reasoning)
                )
            )
        content = get_str(delta, "content")
        if content:
            self._end_reasoning()
            if not self._text_open:
                self._text_open = True
                self._emit(TextStartChunk(payload=TextStartPayload(id="text-0")))
            self._emit(
                TextDeltaChunk(payload=TextDeltaPayload(id="text-0", text=content))
            )
        calls = delta.get("tool_calls")
        for position, call in enumerate(calls if isinstance(calls, list) else ()):
            call = as_dict(call)
            index = get_int(call, "index")
            index = position if index is None else index
            function = get_dict(call, "function")
            state = self._tools.get(index)
            if state is None:
                self._end_reasoning()
                state = _ToolState(
                    call_id=get_str(call, "id") or f"call_{index}",
                    name=get_str(function, "name") or "",
                )
                self._tools[index] = state
                self._emit(
                    ToolCallInputStreamingStartChunk(
                        payload=ToolCallInputStreamingStartPayload(
                            tool_call_id=state.call_id, tool_name=state.name
                        )
                    )
                )
            piece = get_str(function, "arguments")
            if piece and not state.done:
                state.args_text += piece
                self._emit(
                    ToolCallDeltaChunk(
                        payload=ToolCallDeltaPayload(
                            tool_call_id=state.call_id,
                            args_text_delta=piece,
                            tool_name=state.name,
                        )
                    )
                )

    def _end_reasoning(self) -> None:
        if self._reasoning_open:
            self._reasoning_open = False
            self._emit(ReasoningEndChunk(payload=ReasoningEndPayload(id="reasoning-0")))

    def _close_blocks(self) -> None:
        self._end_reasoning()
        if self._text_open:
            self._text_open = False
            self._emit(TextEndChunk(payload=TextEndPayload(id="text-0")))
        for index in sorted(self._tools):
            state = self._tools[index]
            if state.done:
                continue
            state.done = True
            self._emit(
                ToolCallInputStreamingEndChunk(
                    payload=ToolCallInputStreamingEndPayload(tool_call_id=state.call_id)
                )
            )
            self._emit(
                ToolCallChunk(
                    payload=ToolCallPayload(
                        tool_call_id=state.call_id,
                        tool_name=state.name,
                        args=parse_args(state.args_text),
                    )
                )
            )

    def _on_end(self) -> None:
        if not self._saw_done and (self._finish_reason is None or self._usage is None):
            # We always ask for include_usage, so a body that ends after the
            # finish_reason but before the usage chunk and [DONE] was cut off.
            raise incomplete_stream(self.provider, "the usage chunk and [DONE]")
        self._close_blocks()
        reason = self._finish_reason
        usage = self._usage or {}
        raw_response = self._raw_response()
        raw_response.update(id=self._id, model=self._model)
        self.finish = ModelFinish(
            finish_reason=_CHAT_FINISH.get(reason, "unknown") if reason else "unknown",
            usage=_openai_usage(
                usage,
                input_key="prompt_tokens",
                output_key="completion_tokens",
                input_details="prompt_tokens_details",
                output_details="completion_tokens_details",
            )
            if self._usage is not None
            else None,
            warnings=tuple(self._warnings),
            provider_metadata={
                "openai": {"finish_reason": reason, "usage": self._usage}
            },
            request=self._request_body,
            raw_response=raw_response,
        )


def _openai_usage(
    usage: dict[str, Any],
    *,
    input_key: str,
    output_key: str,
    input_details: str,
    output_details: str,
) -> Usage:
    return usage_total(
        Usage(
            input_tokens=get_int(usage, input_key),
            output_tokens=get_int(usage, output_key),
            total_tokens=get_int(usage, "total_tokens"),
            reasoning_tokens=get_int(
                get_dict(usage, output_details), "reasoning_tokens"
            ),
            cached_input_tokens=get_int(
                get_dict(usage, input_details), "cached_tokens"
            ),
            raw=dict(usage),
        )
    )


def _event_error(
    provider: str, payload: dict[str, Any], response: httpx2.Response
) -> ProviderStreamError:
    """An error event (or ``response.failed``) in a 200 stream: ``body`` is the
    whole event."""
    inner = get_dict(payload, "error") or get_dict(
        get_dict(payload, "response"), "error"
    )
    message = get_str(inner, "message") or get_str(payload, "message") or str(payload)
    code = openai_error_code(payload)
    return stream_error(
        f"{provider} stream error ({code}): {message}",
        headers=headers_of(response),
        body=payload,
        is_retryable=openai_payload_retryable(payload),
        code=code,
    )


# =========================================================================== #
# Responses
# =========================================================================== #

_RESPONSES_SETTINGS = {
    "max_tokens": "max_output_tokens",
    "max_output_tokens": "max_output_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
}

_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.done"})


class OpenAIResponsesModel(_OpenAIModel):
    """A model behind the Responses endpoint (``POST {base_url}/responses``,
    streaming).

    Same arguments and errors as ``OpenAIChatModel``. Call settings:
    ``max_tokens`` (sent as ``max_output_tokens``), ``temperature``, ``top_p``
    (others are reported as warnings); ``provider_options["openai"]`` is merged
    into the body (e.g. ``{"store": False}``, ``{"reasoning": {...}}``).
    Reasoning parts of earlier steps are not sent back (the Responses API needs
    its own reasoning item ids for that).
    """

    _path = "/responses"
    _provider = "openai"

    def request_body(self, request: ModelRequest) -> tuple[dict[str, Any], list[Any]]:
        settings = request.settings
        warnings = _unsupported(settings, frozenset({*_RESPONSES_SETTINGS, "headers"}))
        body: dict[str, Any] = {
            "model": self._model_id,
            "input": _responses_input(request.prompt),
            "stream": True,
        }
        for name, wire in _RESPONSES_SETTINGS.items():
            value = settings.get(name)
            if value is not None and wire not in body:
                body[wire] = value
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.input_schema),
                    "strict": False,
                }
                for t in request.tools
            ]
            body["tool_choice"] = _responses_tool_choice(request.tool_choice)
        body.update(_options(request))
        return body, warnings

    def _response(
        self, response: httpx2.Response, body: dict[str, Any], warnings: list[Any]
    ) -> ProviderResponse:
        return OpenAIResponsesResponse(response, request_body=body, warnings=warnings)


def _responses_tool_choice(choice: ToolChoice) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    name = _tool_name_of(choice)
    if name is None:
        raise _bad_choice(choice)
    return {"type": "function", "name": name}


def _responses_input(prompt: Sequence[PromptMessage]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for index, message in enumerate(prompt):
        if isinstance(message, PromptSystemMessage):
            items.append({"role": "system", "content": message.content})
        elif isinstance(message, PromptUserMessage):
            items.append(
                {
                    "role": "user",
                    "content": [
                        _responses_user_part(p, index) for p in message.content
                    ],
                }
            )
        elif isinstance(message, PromptAssistantMessage):
            for part in message.content:
                if isinstance(part, PromptTextPart) and part.text:
                    items.append({"role": "assistant", "content": part.text})
                elif (
                    isinstance(part, PromptToolCallPart) and not part.provider_executed
                ):
                    items.append(
                        {
                            "type": "function_call",
                            "call_id": part.tool_call_id,
                            "name": part.tool_name,
                            "arguments": _args_text(part.args),
                        }
                    )
                elif isinstance(part, PromptReasoningPart | PromptFilePart):
                    continue  # see the class docstring
        elif isinstance(message, PromptToolMessage):
            items.extend(_function_output(p) for p in message.content)
        else:
            raise MessageFormatError(
                f"prompt message #{index} is not a prompt message: {message!r}"
            )
    return items


def _function_output(part: PromptToolResultPart) -> dict[str, Any]:
    return {
        "type": "function_call_output",
        "call_id": part.tool_call_id,
        "output": _result_text(part.result),
    }


def _responses_user_part(
    part: PromptTextPart | PromptFilePart, index: int
) -> dict[str, Any]:
    if isinstance(part, PromptTextPart):
        return {"type": "input_text", "text": part.text}
    if part.mime_type.startswith("image/"):
        return {"type": "input_image", "image_url": _data_url(part)}
    if part.mime_type == "application/pdf":
        if part.data.startswith(("http://", "https://")):
            return {"type": "input_file", "file_url": part.data}
        return {
            "type": "input_file",
            "filename": part.filename or "document.pdf",
            "file_data": _data_url(part),
        }
    raise MessageFormatError(
        f"prompt message #{index}: the Responses API cannot take a file of type "
        f"{part.mime_type!r} (it takes images and PDFs)"
    )


class OpenAIResponsesResponse(ProviderResponse):
    """The chunks of one streamed Responses API response (see the module
    docstring); ``finish`` is set once a terminal event arrived and the body
    ended."""

    provider = "openai"

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
        self._id: str | None = None
        self._model: str | None = None
        self._open_text: set[str] = set()
        self._open_reasoning: set[str] = set()
        self._tools: dict[str, _ToolState] = {}
        """By item id (and by ``output_index`` as ``"#<n>"``)."""
        self._called = False
        self._terminal: dict[str, Any] | None = None

    def _on_event(self, event: ServerSentEvent) -> None:
        if self._terminal is not None or event.data.strip() == "[DONE]":
            # Some compatible servers end with a Chat-style [DONE] (the openai
            # SDK stops on one too); nothing after the terminal event counts.
            return
        payload = as_dict(event.json())
        kind = get_str(payload, "type") or event.event or ""
        if kind == "error" or kind == "response.failed":
            raise _event_error(self.provider, payload, self._response)
        if kind == "response.created":
            response = get_dict(payload, "response")
            self._id = get_str(response, "id")
            self._model = get_str(response, "model")
            self._emit(
                ResponseMetadataChunk(
                    payload=ResponseMetadataPayload(
                        id=self._id,
                        model_id=self._model,
                        timestamp=get_int(response, "created_at"),
                    )
                )
            )
        elif kind == "response.output_item.added":
            self._item_added(payload)
        elif kind == "response.output_text.delta":
            item_id = get_str(payload, "item_id") or "text"
            self._start_text(item_id)
            if text := get_str(payload, "delta"):
                self._emit(
                    TextDeltaChunk(payload=TextDeltaPayload(id=item_id, text=text))
                )
        elif kind in (
            "response.reasoning_summary_text.delta",
            "response.reasoning_text.delta",
        ):
            item_id = get_str(payload, "item_id") or "reasoning"
            self._start_reasoning(item_id)
            if text := get_str(payload, "delta"):
                self._emit(
                    ReasoningDeltaChunk(
                        payload=ReasoningDeltaPayload(id=item_id, text=text)
                    )
                )
        elif kind == "response.function_call_arguments.delta":
            state = self._tool_for(payload)
            piece = get_str(payload, "delta")
            if state is not None and piece and not state.done:
                state.args_text += piece
                self._emit(
                    ToolCallDeltaChunk(
                        payload=ToolCallDeltaPayload(
                            tool_call_id=state.call_id,
                            args_text_delta=piece,
                            tool_name=state.name,
                        )
                    )
                )
        elif kind == "response.output_item.done":
            self._item_done(payload)
        elif kind in _TERMINAL:
            self._terminal = payload

    def _tool_for(self, payload: dict[str, Any]) -> _ToolState | None:
        item_id = get_str(payload, "item_id")
        if item_id is not None and item_id in self._tools:
            return self._tools[item_id]
        return self._tools.get(f"#{get_int(payload, 'output_index')}")

    def _start_text(self, item_id: str) -> None:
        if item_id not in self._open_text:
            self._open_text.add(item_id)
            self._emit(TextStartChunk(payload=TextStartPayload(id=item_id)))

    def _start_reasoning(self, item_id: str) -> None:
        if item_id not in self._open_reasoning:
            self._open_reasoning.add(item_id)
            self._emit(ReasoningStartChunk(payload=ReasoningStartPayload(id=item_id)))

    def _item_added(self, payload: dict[str, Any]) -> None:
        item = get_dict(payload, "item")
        kind = get_str(item, "type")
        item_id = get_str(item, "id") or ""
        if kind == "function_call":
            state = _ToolState(
                call_id=get_str(item, "call_id") or item_id or "call",
                name=get_str(item, "name") or "",
                item_id=item_id,
            )
            self._tools[item_id] = state
            self._tools[f"#{get_int(payload, 'output_index')}"] = state
            self._emit(
                ToolCallInputStreamingStartChunk(
                    payload=ToolCallInputStreamingStartPayload(
                        tool_call_id=state.call_id, tool_name=state.name
                    )
                )
            )
        elif kind == "reasoning":
            self._start_reasoning(item_id)

    def _item_done(self, payload: dict[str, Any]) -> None:
        item = get_dict(payload, "item")
        kind = get_str(item, "type")
        item_id = get_str(item, "id") or ""
        if kind == "message":
            for text_id in (item_id, "text"):
                if text_id in self._open_text:
                    self._open_text.discard(text_id)
                    self._emit(TextEndChunk(payload=TextEndPayload(id=text_id)))
        elif kind == "reasoning":
            self._start_reasoning(item_id)
            self._open_reasoning.discard(item_id)
            self._emit(ReasoningEndChunk(payload=ReasoningEndPayload(id=item_id)))
        elif kind == "function_call":
            state = self._tools.get(item_id) or self._tool_for(payload)
            if state is None or state.done:
                return
            state.done = True
            self._called = True
            arguments = get_str(item, "arguments")
            args_text = arguments if arguments is not None else state.args_text
            self._emit(
                ToolCallInputStreamingEndChunk(
                    payload=ToolCallInputStreamingEndPayload(tool_call_id=state.call_id)
                )
            )
            self._emit(
                ToolCallChunk(
                    payload=ToolCallPayload(
                        tool_call_id=state.call_id,
                        tool_name=state.name,
                        args=parse_args(args_text),
                    )
                )
            )

    def _on_end(self) -> None:
        terminal = self._terminal
        if terminal is None:
            raise incomplete_stream(self.provider, "response.completed")
        for text_id in sorted(self._open_text):
            self._emit(TextEndChunk(payload=TextEndPayload(id=text_id)))
        self._open_text.clear()
        for item_id in sorted(self._open_reasoning):
            self._emit(ReasoningEndChunk(payload=ReasoningEndPayload(id=item_id)))
        self._open_reasoning.clear()
        response = get_dict(terminal, "response")
        incomplete = get_str(get_dict(response, "incomplete_details"), "reason")
        if incomplete == "max_output_tokens":
            reason = "length"
        elif incomplete == "content_filter":
            reason = "content-filter"
        elif incomplete is not None:
            reason = "other"
        else:
            reason = "tool-calls" if self._called else "stop"
        usage = response.get("usage")
        raw_response = self._raw_response()
        raw_response.update(id=self._id, model=self._model)
        self.finish = ModelFinish(
            finish_reason=reason,
            usage=_openai_usage(
                usage,
                input_key="input_tokens",
                output_key="output_tokens",
                input_details="input_tokens_details",
                output_details="output_tokens_details",
            )
            if isinstance(usage, dict)
            else None,
            warnings=tuple(self._warnings),
            provider_metadata={
                "openai": {
                    "response_id": self._id,
                    "status": get_str(response, "status"),
                    "incomplete_reason": incomplete,
                }
            },
            request=self._request_body,
            raw_response=raw_response,
        )
