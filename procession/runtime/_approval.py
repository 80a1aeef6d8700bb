"""A person in the loop: which tool calls wait for approval, and the state of a
step whose calls are paused.

Whether a call needs approval follows Mastra's rule (its
``tool-approval-verdict``): a tool whose ``require_approval`` is a function
decides alone (its verdict replaces the agent's); otherwise the call needs
approval if the tool says ``require_approval=True`` or the call's
``require_tool_approval`` (the call's, else the agent's) says so, as a bool or
``fn(tool_name, args, request_context)``. A policy that raises requires
approval (it fails closed). Each policy is asked once per call; the verdict
is kept with the step, so a resumed run does not ask again.

A step's calls (``ToolPhase``) run in model order, concurrently between the
calls that wait: when one needs approval (or its tool suspends itself) the
run pauses there, with the calls before it already executed and their results
held; the calls after it have not started. Nothing of the step's results is
sent before the last of its calls is answered (as in Mastra): then every
result goes out in call order, through ``process_tool_result``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeAlias

import attrs

from .._secrets import get_logger
from ..data import PendingToolCall, StepResult, ToolCallInfo
from ..memory import ToolDecision
from ..models import ModelFinish
from ..processors import RequestContext
from .tools import Tool, ToolContext

__all__ = [
    "Executed",
    "PauseRun",
    "PausedStep",
    "RequireToolApproval",
    "ToolPhase",
    "needs_approval",
]

logger = get_logger("procession")

RequireToolApproval: TypeAlias = (
    bool | Callable[[str, Any, RequestContext], bool | Awaitable[bool]]
)
"""``require_tool_approval`` on an agent or a call: every call of every tool
waits for approval (``True``), none does (``False``, unless its tool says so),
or ``fn(tool_name, args, request_context)`` decides per call."""


@attrs.frozen
class Executed:
    """A call that ran (or was declined): held until the step's results go
    out. ``ok`` with ``value`` its result; else ``value`` its error (an
    exception, or ``{"name", "message"}`` read back from a snapshot);
    ``denied`` a declined call, ``value`` the reason the model reads."""

    ok: bool
    value: Any
    custom: tuple[Any, ...] = ()
    denied: bool = False


@attrs.define
class ToolPhase:
    """One step's tool calls, across pauses (see the module docstring)."""

    step_number: int
    calls: list[ToolCallInfo]
    executed: dict[int, Executed] = attrs.Factory(dict)
    verdicts: dict[int, bool] = attrs.Factory(dict)
    """Whether call ``i`` needs approval, once asked."""
    pending: PendingToolCall | None = None
    """The call the run waits on (the first not executed)."""
    suspend_payloads: dict[str, Any] = attrs.Factory(dict)
    """What each call that suspended itself passed (by tool call id)."""
    decision: ToolDecision | None = None
    """The answer a resumed run applies to ``pending``."""
    resume_data: dict[str, Any] = attrs.Factory(dict)
    """What ``resume_stream`` gave a suspended call (by tool call id)."""
    custom: list[Any] = attrs.Factory(list)
    """Custom chunks of calls that suspended themselves (sent on resume)."""

    def next_index(self) -> int:
        """The first call not executed yet (``len(calls)`` when all are)."""
        for index in range(len(self.calls)):
            if index not in self.executed:
                return index
        return len(self.calls)


@attrs.define
class PausedStep:
    """A step stopped between its model call and its tools' results: what its
    continuation needs (the snapshot keeps it as JSON)."""

    step_number: int
    config: Any
    """The step's ``StepConfig`` (its tools, tool choice, model settings)."""
    finish: ModelFinish
    response_id: str
    """The id of the step's response message (its tool calls)."""
    current: StepResult
    """The step as the model ended it (no tool results yet)."""
    built: int = 0
    """How many text pieces the step's message held when it was built."""
    phase: ToolPhase | None = None
    text_before: str = ""
    """The step's text sent before the pause (its result keeps it)."""


class PauseRun(Exception):
    """The step waits for a person: the coordinator keeps the run (its
    snapshot, in one transaction with the turn so far), sends the
    ``tool-call-approval`` / ``tool-call-suspended`` chunk and ends the
    stream ``suspended``. ``paused`` is set by the step runner."""

    def __init__(self, phase: ToolPhase) -> None:
        super().__init__("the run waits for a person")
        self.phase = phase
        self.paused: PausedStep | None = None


async def needs_approval(
    tool: Tool,
    call: ToolCallInfo,
    args: Any,
    context: ToolContext,
    policy: RequireToolApproval,
    request_context: RequestContext,
) -> bool:
    """Whether ``call`` waits for a person (the module docstring's rule).
    ``args`` are the parsed arguments (what the tool's own policy gets);
    the call's policy gets the model's JSON arguments. Checkpoints only in
    an async policy."""
    own = tool.require_approval
    if callable(own):
        return await _ask(own, (args, context), f"tool {tool.name!r}")
    if own is True:
        return True
    if callable(policy):
        return await _ask(
            policy,
            (call.tool_name, call.args, request_context),
            "require_tool_approval",
        )
    return bool(policy)


async def _ask(
    policy: Callable[..., Any], arguments: tuple[Any, ...], who: str
) -> bool:
    try:
        verdict = policy(*arguments)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except Exception:
        logger.exception("%s's approval policy failed: the call needs approval", who)
        return True
    return bool(verdict)


PendingKind: TypeAlias = Literal["approval", "suspended"]
