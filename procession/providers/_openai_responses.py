"""OpenAI Responses (``event:`` + ``data:`` SSE): its request body, its tables
and its mapping to chunks; the transport is ``_openai``'s.

Output items map to the same chunks as Chat Completions' (ids are the item
ids); ``response.completed`` / ``response.incomplete`` end the stream; an
``error`` event and ``response.failed`` raise ``ProviderStreamError`` whose
``body`` is the event itself, in whichever shape it came (flat or nested
``error``), so error processors can match it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Unpack

from .._errors import MessageFormatError
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
)
from ..models import ModelRequest, ToolChoice
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

__all__ = ["OpenAIResponsesModel", "OpenAIResponsesResponse"]

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
    model_class = "OpenAIResponsesModel"

    def __init__(
        self, response: httpx2.Response, **options: Unpack[ResponseOptions]
    ) -> None:
        super().__init__(response, **options)
        self._id: str | None = None
        self._model: str | None = None
        self._open_text: set[str] = set()
        self._open_reasoning: set[str] = set()
        self._tools: dict[str, ToolCallBlock] = {}
        """By item id (and by ``output_index`` as ``"#<n>"``)."""
        self._tool_calls = ToolCallEmitter(self._emit)
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
            block = self._tool_for(payload)
            if block is not None:
                self._tool_calls.delta(block, get_str(payload, "delta"))
        elif kind == "response.output_item.done":
            self._item_done(payload)
        elif kind in _TERMINAL:
            self._terminal = payload

    def _tool_for(self, payload: dict[str, Any]) -> ToolCallBlock | None:
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
            block = self._tool_calls.start(
                get_str(item, "call_id") or item_id or "call",
                get_str(item, "name") or "",
            )
            self._tools[item_id] = block
            self._tools[f"#{get_int(payload, 'output_index')}"] = block
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
            block = self._tools.get(item_id) or self._tool_for(payload)
            if block is not None and self._tool_calls.end(
                block, get_str(item, "arguments")
            ):
                self._called = True

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
        self.finish = self._finished(
            reason,
            _openai_usage(
                usage,
                input_key="input_tokens",
                output_key="output_tokens",
                input_details="input_tokens_details",
                output_details="output_tokens_details",
            )
            if isinstance(usage, dict)
            else None,
            {
                "openai": {
                    "response_id": self._id,
                    "status": get_str(response, "status"),
                    "incomplete_reason": incomplete,
                }
            },
            id=self._id,
            model=self._model,
        )


# The model's own class attribute, set once its response class exists.
OpenAIResponsesModel._response_class = OpenAIResponsesResponse  # noqa: SLF001 - the base's hook
