"""The Anthropic Messages request body: the prompt, tools, tool choice and
prompt caching, from procession's provider-neutral request."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import ConfigurationError, MessageFormatError
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
)
from ..models import ModelRequest, ToolChoice, ToolDefinition
from ._json import as_dict, dumps, parse_args

__all__: list[str] = []  # used by _anthropic

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
