"""OpenAI Chat Completions (data-only SSE, ending with ``data: [DONE]``): its
request body, its tables and its mapping to chunks; the transport is
``_openai``'s.

``content`` deltas become ``text-start/-delta/-end`` (id ``"text-0"``),
``reasoning_content`` / ``reasoning`` deltas (sent by several compatible
servers) become ``reasoning-*`` (id ``"reasoning-0"``), tool calls stream by
``index`` as ``tool-call-input-streaming-start``, ``tool-call-delta``… and,
once the choice finishes, ``tool-call-input-streaming-end`` and ``tool-call``.
A ``data:`` object with an ``error`` key raises ``ProviderStreamError`` with
that object as body.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Unpack

from .._errors import MessageFormatError
from ..data import (
    PromptAssistantMessage,
    PromptFilePart,
    PromptMessage,
    PromptSystemMessage,
    PromptTextPart,
    PromptToolCallPart,
    PromptToolMessage,
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
)
from ..models import ModelRequest, ToolChoice, ToolDefinition
from ._errors import incomplete_stream
from ._json import as_dict, get_dict, get_int, get_str
from ._openai import (
    _args_text,
    _bad_choice,
    _data_url,
    _event_error,
    _openai_usage,
    _OpenAIModel,
    _options,
    _result_text,
    _tool_name_of,
    _unsupported,
)
from ._sse import (
    ProviderResponse,
    ResponseOptions,
    ServerSentEvent,
)
from ._tool_calls import ToolCallBlock, ToolCallEmitter

if TYPE_CHECKING:
    import httpx2

__all__ = ["OpenAIChatModel", "OpenAIChatResponse"]

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
        max_event_bytes: the largest server-sent event accepted (default
            16 MiB); a larger one ends the stream with ``EventTooLargeError``.

    Raises:
        ConfigurationError: ``httpx2`` is missing, there is no API key, or an
            argument is out of range; raised here, before any request.

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
    model_class = "OpenAIChatModel"

    def __init__(
        self, response: httpx2.Response, **options: Unpack[ResponseOptions]
    ) -> None:
        super().__init__(response, **options)
        self._id: str | None = None
        self._model: str | None = None
        self._metadata_sent = False
        self._text_open = False
        self._reasoning_open = False
        self._tools: dict[int, ToolCallBlock] = {}
        self._tool_calls = ToolCallEmitter(self._emit)
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
            block = self._tools.get(index)
            if block is None:
                self._end_reasoning()
                block = self._tools[index] = self._tool_calls.start(
                    get_str(call, "id") or f"call_{index}",
                    get_str(function, "name") or "",
                )
            self._tool_calls.delta(block, get_str(function, "arguments"))

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
            self._tool_calls.end(self._tools[index])

    def _on_end(self) -> None:
        if not self._saw_done and (self._finish_reason is None or self._usage is None):
            # We always ask for include_usage, so a body that ends after the
            # finish_reason but before the usage chunk and [DONE] was cut off.
            raise incomplete_stream(self.provider, "the usage chunk and [DONE]")
        self._close_blocks()
        reason = self._finish_reason
        usage = self._usage or {}
        self.finish = self._finished(
            _CHAT_FINISH.get(reason, "unknown") if reason else "unknown",
            _openai_usage(
                usage,
                input_key="prompt_tokens",
                output_key="completion_tokens",
                input_details="prompt_tokens_details",
                output_details="completion_tokens_details",
            )
            if self._usage is not None
            else None,
            {"openai": {"finish_reason": reason, "usage": self._usage}},
            id=self._id,
            model=self._model,
        )


# The model's own class attribute, set once its response class exists.
OpenAIChatModel._response_class = OpenAIChatResponse  # noqa: SLF001 - the base's hook
