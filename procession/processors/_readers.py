"""How the runtime reads what a hook returned: each hook's return value is
normalised to one result type, or refused with a ``ProcessorContractError``
that names the processor and the hook (SPEC §2.11)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from .._errors import ProcessorContractError
from ._contract import (
    ProcessAPIErrorResult,
    ProcessInputResult,
    ProcessInputStepResult,
    ProcessLLMRequestResult,
)

if TYPE_CHECKING:
    from ..data import Message
    from ._message_list import MessageList

__all__ = [
    "is_tool_choice",
    "read_api_error_result",
    "read_input_step_result",
    "read_llm_request_result",
    "read_llm_response_result",
    "read_message_result",
    "stream_result_error",
]

_INPUT_STEP_KEYS: Final = frozenset(attrs.fields_dict(ProcessInputStepResult))
_CAMEL: Final = {
    "toolChoice": "tool_choice",
    "activeTools": "active_tools",
    "messageList": "message_list",
    "systemMessages": "system_messages",
    "providerOptions": "provider_options",
    "modelSettings": "model_settings",
    "structuredOutput": "structured_output",
}


def _dict_keys(
    value: Mapping[str, Any], allowed: frozenset[str], processor_id: str, hook: str
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = _CAMEL.get(key, key)
        if name not in allowed:
            raise ProcessorContractError(
                processor_id,
                hook,
                f"returned a dict with the unknown key {key!r}; expected only "
                f"{sorted(allowed)}",
            )
        out[name] = item
    return out


def read_input_step_result(
    value: object, processor_id: str, *, message_list: MessageList | None = None
) -> ProcessInputStepResult | list[Message] | MessageList | None:
    """Normalise what ``process_input_step`` returned.

    Accepts ``None``, a ``ProcessInputStepResult``, a dict with its fields (snake or
    camelCase), a list of messages, or a ``MessageList``. Anything else is a
    ``ProcessorContractError`` naming the processor. Given the ``message_list``
    the hook received, returning a different ``MessageList`` (bare or as the
    result's ``message_list``) is an error too (seed).
    """
    from ._message_list import MessageList

    hook = "process_input_step"
    if value is None or isinstance(value, ProcessInputStepResult | MessageList):
        result = value
    elif isinstance(value, list):
        return value
    elif isinstance(value, Mapping):
        result = ProcessInputStepResult(
            **_dict_keys(value, _INPUT_STEP_KEYS, processor_id, hook)
        )
    else:
        raise ProcessorContractError(
            processor_id,
            hook,
            f"returned {value!r}; expected None, a ProcessInputStepResult (or a dict "
            f"of its fields), a list of messages, or the message_list",
        )
    if isinstance(result, ProcessInputStepResult):
        _check_step_fields(result, processor_id)
    if (
        isinstance(result, ProcessInputStepResult)
        and result.messages is not None
        and result.message_list is not None
    ):
        raise ProcessorContractError(
            processor_id,
            hook,
            "returned both messages and message_list; return one of them",
        )
    returned = (
        result.message_list if isinstance(result, ProcessInputStepResult) else result
    )
    if (
        message_list is not None
        and returned is not None
        and returned is not message_list
    ):
        raise ProcessorContractError(
            processor_id,
            hook,
            "returned a different MessageList; modify the message_list passed in "
            "and return it (or nothing)",
        )
    return result


_STEP_MAPPINGS: Final = ("tools", "provider_options", "model_settings")
_STEP_SEQUENCES: Final = ("messages", "system_messages", "active_tools")


def is_tool_choice(value: object) -> bool:
    """Whether ``value`` is a tool choice a provider understands: ``"auto"``,
    ``"none"``, ``"required"`` or ``{"type": "tool", "tool_name": name}``
    (``toolName`` as Mastra spells it)."""
    if isinstance(value, str):
        return value in ("auto", "none", "required")
    if isinstance(value, Mapping):
        name = value.get("tool_name", value.get("toolName"))
        return value.get("type") == "tool" and isinstance(name, str)
    return False


def read_llm_response_result(value: object, processor_id: str) -> None:
    """``process_llm_response`` returns nothing (the seed: ``undefined | void``;
    the value is reserved). Anything else is an error, not silently dropped."""
    if value is not None:
        raise ProcessorContractError(
            processor_id,
            "process_llm_response",
            f"returned {value!r}; expected None (it observes the response; to "
            f"change what the client sees use process_output_stream, to change "
            f"the conversation process_output_step)",
        )


def _check_step_fields(result: ProcessInputStepResult, processor_id: str) -> None:
    """The fields a step result changes must have the right shape: a wrong one
    would otherwise fail deep inside the model call, far from its cause."""
    for name in _STEP_MAPPINGS:
        value = getattr(result, name)
        if value is not None and not isinstance(value, Mapping):
            raise ProcessorContractError(
                processor_id,
                "process_input_step",
                f"returned {name}={value!r}; expected a mapping (or None to keep "
                f"the step's)",
            )
    for name in _STEP_SEQUENCES:
        value = getattr(result, name)
        if value is not None and (
            isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence)
        ):
            raise ProcessorContractError(
                processor_id,
                "process_input_step",
                f"returned {name}={value!r}; expected a list (or None to keep the "
                f"step's)",
            )
    if result.tool_choice is not None and not is_tool_choice(result.tool_choice):
        raise ProcessorContractError(
            processor_id,
            "process_input_step",
            f"returned tool_choice={result.tool_choice!r}; expected 'auto', 'none', "
            f"'required' or {{'type': 'tool', 'tool_name': ...}}",
        )
    if result.active_tools is not None and not all(
        isinstance(n, str) for n in result.active_tools
    ):
        raise ProcessorContractError(
            processor_id,
            "process_input_step",
            f"returned active_tools={result.active_tools!r}; expected tool names",
        )


def read_api_error_result(value: object, processor_id: str) -> bool:
    """Normalise ``process_api_error``'s return value to "retry or not"."""
    if value is None:
        return False
    if isinstance(value, ProcessAPIErrorResult):
        return value.retry
    if isinstance(value, Mapping) and set(value) <= {"retry"}:
        retry = value.get("retry", False)
        if isinstance(retry, bool):
            return retry
    raise ProcessorContractError(
        processor_id,
        "process_api_error",
        f"returned {value!r}; expected None, ProcessAPIErrorResult(retry=...) or "
        f"{{'retry': bool}}",
    )


def read_llm_request_result(
    value: object, processor_id: str
) -> ProcessLLMRequestResult | None:
    """Normalise ``process_llm_request``'s return value."""
    if value is None or isinstance(value, ProcessLLMRequestResult):
        return value
    if isinstance(value, Mapping) and set(value) <= {"prompt", "response"}:
        return ProcessLLMRequestResult(
            prompt=value.get("prompt"), response=value.get("response")
        )
    raise ProcessorContractError(
        processor_id,
        "process_llm_request",
        f"returned {value!r}; expected None or ProcessLLMRequestResult(prompt=..., "
        f"response=...)",
    )


_TOOL_RESULT_HINT: Final = (
    "; to change the tool's result, call "
    "args.message_list.update_tool_invocation(...) and return None"
)


def read_message_result(
    value: object, processor_id: str, hook: str, message_list: MessageList
) -> ProcessInputResult | None:
    """``_read_message_result``; a ``process_tool_result`` that returned something
    else than messages is told how to change a tool's result instead."""
    try:
        return _read_message_result(value, processor_id, hook, message_list)
    except ProcessorContractError as error:
        if hook != "process_tool_result":
            raise
        problem = str(error).split(f"{hook} ", 1)[1]
        raise ProcessorContractError(
            processor_id, hook, problem + _TOOL_RESULT_HINT
        ) from None


def _read_message_result(
    value: object, processor_id: str, hook: str, message_list: MessageList
) -> ProcessInputResult | None:
    """Normalise what a message hook (``process_input``, ``process_output_step``,
    ``process_tool_result``, ``process_output_result``) returned (SPEC §2.11).

    ``None``, ``[]`` and the same ``message_list`` mean "no change" (returns None).
    A non-empty list, or a ``ProcessInputResult`` / ``{"messages", "system_messages"}``
    dict, is returned as a ``ProcessInputResult`` for the caller to reconcile.
    A different ``MessageList`` is an error.
    """
    from ._message_list import MessageList

    if value is None or value is message_list:
        return None
    if isinstance(value, MessageList):
        raise ProcessorContractError(
            processor_id,
            hook,
            "returned a different MessageList; modify the message_list passed in "
            "and return it (or nothing)",
        )
    if isinstance(value, ProcessInputResult):
        return value
    if isinstance(value, list | tuple):
        if hook != "process_input" and not value:
            return None
        return ProcessInputResult(messages=list(value))
    if isinstance(value, Mapping):
        keys = _dict_keys(
            value, frozenset({"messages", "system_messages"}), processor_id, hook
        )
        if "messages" not in keys:
            raise ProcessorContractError(
                processor_id, hook, f"returned {value!r} without 'messages'"
            )
        return ProcessInputResult(**keys)
    raise ProcessorContractError(
        processor_id,
        hook,
        f"returned {value!r}; expected None, a list of messages, "
        f"{{'messages': ..., 'system_messages': ...}}, or the message_list",
    )


def stream_result_error(processor_id: str, result: object) -> ProcessorContractError:
    """The error for a ``process_output_stream`` result that is not a chunk, None
    or a list of chunks."""
    return ProcessorContractError(
        processor_id,
        "process_output_stream",
        f"returned {result!r}; expected a chunk, None (drop) or a list of chunks",
    )
