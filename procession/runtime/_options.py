"""Per-call options: ``CallOptions``, the one list of them; the "use the agent's
default" sentinel; and the checks.

``Agent.generate`` / ``Agent.stream`` take each field of ``CallOptions`` as a
typed keyword: ``@takes_call_options`` spells their signatures from the
class, so mypy checks every keyword of every call, and ``help()`` and IDEs show
each one with its type. Most default to ``USE_AGENT_DEFAULT`` (in the style of
httpx's ``USE_CLIENT_DEFAULT``): an option left out, or passed as that
sentinel, takes the agent's value. An unknown keyword is a ``TypeError`` that
lists the valid options, raised when the method is called; a bad value is a
``ConfigurationError`` naming the option, raised by ``Agent._prepare`` before
anything runs.

To add a per-call option:

1. add one line to ``CallOptions``: its name, type and default
   (``USE_AGENT_DEFAULT`` when the agent has a value of its own);
2. check and use it where ``Agent._prepare`` (``_agent.py``) resolves the call
   (a bad value is a ``ConfigurationError`` naming the option; a value the run
   needs goes into a ``RunSpec`` field);
3. name it in ``Agent.generate``'s docstring (a test fails until it is).

The signatures, the ``TypeError``'s list and ``CALL_OPTIONS`` follow from the
class.
"""

from __future__ import annotations

import functools
import inspect
import secrets
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Concatenate, Final, ParamSpec, TypeVar, cast

import attrs

from .._errors import ConfigurationError
from ..actors import ExecutionMode
from ..models import LanguageModel
from ..processors import ProcessInputStepArgs, RequestContext
from ._approval import RequireToolApproval
from ._durable import Durable

__all__ = [
    "CALL_OPTIONS",
    "CallOptions",
    "ProcessorList",
    "USE_AGENT_DEFAULT",
    "UseAgentDefault",
    "check_approval_policy",
    "check_callable",
    "check_execution_mode",
    "check_int",
    "check_seconds",
    "new_run_id",
    "or_default",
    "reject_unknown",
    "resolve_lane",
    "takes_call_options",
]

ProcessorList = Sequence[object] | Callable[[RequestContext], Sequence[object]]

_T = TypeVar("_T")
_P = ParamSpec("_P")
_S = TypeVar("_S")
_R = TypeVar("_R")

EXECUTION_MODES: Final = ("adaptive", "fused", "actors")


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


@attrs.frozen(kw_only=True)
class CallOptions:
    """The per-call options of ``Agent.generate`` / ``Agent.stream``, one line
    each, in the signatures' order (``Agent.generate``'s docstring says what
    each does). Values are as the caller gave them: ``Agent._prepare`` checks
    them and applies the agent's defaults."""

    input_processors: ProcessorList | UseAgentDefault | None = USE_AGENT_DEFAULT
    output_processors: ProcessorList | UseAgentDefault | None = USE_AGENT_DEFAULT
    error_processors: ProcessorList | UseAgentDefault | None = USE_AGENT_DEFAULT
    max_processor_retries: int | UseAgentDefault | None = USE_AGENT_DEFAULT
    prepare_step: Callable[[ProcessInputStepArgs], Any] | UseAgentDefault | None = (
        USE_AGENT_DEFAULT
    )
    request_context: RequestContext | Mapping[str, Any] | None = None
    max_steps: int | UseAgentDefault = USE_AGENT_DEFAULT
    model_settings: Mapping[str, Any] | None = None
    provider_options: Mapping[str, Any] | None = None
    tool_choice: Any = USE_AGENT_DEFAULT
    active_tools: Sequence[str] | None = None
    model: LanguageModel | str | UseAgentDefault = USE_AGENT_DEFAULT
    execution_mode: ExecutionMode | UseAgentDefault = USE_AGENT_DEFAULT
    idle_timeout: float | UseAgentDefault | None = USE_AGENT_DEFAULT
    run_deadline: float | UseAgentDefault | None = USE_AGENT_DEFAULT
    run_id: str | None = None
    memory: Mapping[str, Any] | None = None
    thread_id: str | None = None
    resource_id: str | None = None
    require_tool_approval: RequireToolApproval | UseAgentDefault = USE_AGENT_DEFAULT
    approval_ttl: float | UseAgentDefault | None = USE_AGENT_DEFAULT
    durable: bool | Durable | UseAgentDefault = USE_AGENT_DEFAULT


CALL_OPTIONS: Final = tuple(field.name for field in attrs.fields(CallOptions))
"""Every per-call option of ``generate`` / ``stream``, in the signature's order."""
_NAMES: Final = frozenset(CALL_OPTIONS)


def _spelled_from(
    options: Callable[_P, CallOptions],
) -> Callable[
    [Callable[[_S, Any, CallOptions], _R]], Callable[Concatenate[_S, Any, _P], _R]
]:
    """A decorator: a method ``(self, messages, options: CallOptions)`` called
    as ``(self, messages, *, <each option>)``. ``options`` is ``CallOptions``,
    passed so that the type checker binds ``_P`` to the keywords of its
    ``__init__`` (keyword-only, with the fields' types and defaults)."""

    def spell(
        method: Callable[[_S, Any, CallOptions], _R],
    ) -> Callable[Concatenate[_S, Any, _P], _R]:
        name = method.__name__

        @functools.wraps(method)
        def with_keywords(self: _S, messages: Any, **keywords: Any) -> _R:
            reject_unknown(name, keywords.keys() - _NAMES)
            return method(self, messages, CallOptions(**keywords))

        # What inspect.signature (help(), IDEs reading the runtime) shows: self,
        # messages and the options. (Set through __dict__: typeshed's function
        # types do not declare __signature__.)
        own = inspect.signature(method)
        with_keywords.__dict__["__signature__"] = own.replace(
            parameters=[
                *list(own.parameters.values())[:2],
                *inspect.signature(options).parameters.values(),
            ]
        )
        # with_keywords takes **keywords and builds a CallOptions, whose
        # __init__ is keyword-only: it is called exactly as _P says.
        return cast(Callable[Concatenate[_S, Any, _P], _R], with_keywords)

    return spell


takes_call_options = _spelled_from(CallOptions)
"""``@takes_call_options`` on ``Agent.stream`` / ``Agent.generate``: the method
is written ``(self, messages, options: CallOptions)`` and called with each
option as a keyword, which mypy checks against its field's type. An unknown
keyword is a ``TypeError`` naming the valid options, raised at the call."""


def or_default(value: _T | UseAgentDefault, default: _T) -> _T:
    """``value``, or ``default`` when ``value`` is ``USE_AGENT_DEFAULT``."""
    return default if isinstance(value, UseAgentDefault) else value


def reject_unknown(method: str, unexpected: Collection[str]) -> None:
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


def check_callable(name: str, value: _T) -> _T:
    """``value``, which must be callable or None."""
    if value is not None and not callable(value):
        raise ConfigurationError(f"{name} must be callable, got {value!r}")
    return value


def check_approval_policy(value: Any) -> RequireToolApproval:
    """``require_tool_approval``: a bool or a callable, else
    ``ConfigurationError``."""
    if isinstance(value, bool) or callable(value):
        return cast(RequireToolApproval, value)
    raise ConfigurationError(
        f"require_tool_approval must be True, False or a function (tool_name, "
        f"args, request_context) -> bool, got {value!r}"
    )


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
