"""Per-call options: the "use the agent's default" sentinel and the checks.

``Agent.generate`` / ``Agent.stream`` take every option as a typed keyword
whose default is ``USE_AGENT_DEFAULT`` (in the style of httpx's
``USE_CLIENT_DEFAULT``): an option left out, or passed as that sentinel, takes
the agent's value. An unknown keyword is a ``TypeError`` that lists the valid
options, raised when the method is called.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from ..actors import ExecutionMode
from ..processors import ConfigurationError, RequestContext

__all__ = [
    "CALL_OPTIONS",
    "USE_AGENT_DEFAULT",
    "ProcessorList",
    "UseAgentDefault",
    "check_execution_mode",
    "check_int",
    "check_seconds",
    "new_run_id",
    "or_default",
    "reject_unknown",
    "resolve_lane",
]

ProcessorList = Sequence[object] | Callable[[RequestContext], Sequence[object]]

_T = TypeVar("_T")

EXECUTION_MODES: Final = ("adaptive", "fused", "actors")

CALL_OPTIONS: Final = (
    "input_processors",
    "output_processors",
    "error_processors",
    "max_processor_retries",
    "prepare_step",
    "request_context",
    "max_steps",
    "model_settings",
    "provider_options",
    "tool_choice",
    "active_tools",
    "model",
    "execution_mode",
    "idle_timeout",
    "run_deadline",
    "run_id",
    "memory",
    "thread_id",
    "resource_id",
)
"""Every per-call option of ``generate`` / ``stream``, in the signature's order."""


def new_run_id() -> str:
    """A new run id: ``run-`` and 128 random bits in hex (``secrets``). Run
    ids key resumable streams across a fleet (Redis) and name runs in cancel
    routes: they must neither collide nor be guessed."""
    return f"run-{secrets.token_hex(16)}"


class UseAgentDefault:
    """The type of ``USE_AGENT_DEFAULT``: "take the agent's value"."""

    _instance: UseAgentDefault | None = None

    def __new__(cls) -> UseAgentDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "USE_AGENT_DEFAULT"

    def __reduce__(self) -> str:
        return "USE_AGENT_DEFAULT"


USE_AGENT_DEFAULT: Final = UseAgentDefault()
"""Pass (or leave out) an option as this to use the agent's own value."""


def or_default(value: _T | UseAgentDefault, default: _T) -> _T:
    """``value``, or ``default`` when ``value`` is ``USE_AGENT_DEFAULT``."""
    return default if isinstance(value, UseAgentDefault) else value


def reject_unknown(method: str, unexpected: Mapping[str, Any]) -> None:
    """A ``TypeError`` naming the unknown keywords and the valid options."""
    if unexpected:
        names = ", ".join(sorted(unexpected))
        raise TypeError(
            f"Agent.{method}() got unexpected keyword argument(s) {names}; the "
            f"per-call options are: {', '.join(CALL_OPTIONS)}"
        )


def resolve_lane(
    value: Any, request_context: RequestContext, name: str
) -> list[object]:
    """A lane's processors: a list, or a callable of the request context."""
    if value is None:
        return []
    if callable(value) and not isinstance(value, Sequence):
        value = value(request_context)
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigurationError(
            f"{name} must be a list of processors or a callable of the request "
            f"context returning one, got {value!r}"
        )
    return list(value)


def check_int(name: str, value: Any, *, minimum: int, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(
            f"{name} must be an int >= {minimum}"
            f"{' or None' if allow_none else ''}, got {value!r}"
        )


def check_seconds(name: str, value: Any) -> float | None:
    """A policy's seconds: a positive number, or None (off)."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not value > 0
        or value != value  # NaN
    ):
        raise ConfigurationError(
            f"{name} must be a positive number of seconds or None (off), got {value!r}"
        )
    return float(value)


def check_execution_mode(value: Any) -> ExecutionMode:
    if value not in EXECUTION_MODES:
        raise ConfigurationError(
            f"execution_mode must be 'adaptive', 'fused' or 'actors', got {value!r}"
        )
    mode: ExecutionMode = value
    return mode
