"""How the kernel calls a hook: sync or async (``call_hook``), and what a
hook's failure means: a ``TripWire`` found in an exception group
(``tripwire_in``) and a plain exception under the processor's ``on_error``
(``on_error_outcome``, the one home of the failure policy)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from .._errors import ProcessorContractError, ProcessorError, TripWire
from .._secrets import get_logger
from ._contract import HookArgs, OnError

__all__ = [
    "HookFn",
    "call_hook",
    "is_async_hook",
    "on_error_outcome",
    "tripwire_in",
]

logger = get_logger("procession")

HookFn: TypeAlias = Callable[[Any], Any]


def tripwire_in(group: BaseExceptionGroup[Any]) -> TripWire | None:
    """The ``TripWire`` a hook raised inside an exception group (its own nursery),
    or None.

    An abort wins over plain errors raised beside it (SPEC §2.2: a tripwire is
    never swallowed), but not over cancellation or other ``BaseException``s,
    which must propagate: then None is returned and the caller re-raises.
    """
    tripwires, rest = group.split(TripWire)
    if tripwires is None:
        return None
    if rest is not None and rest.split(Exception)[1] is not None:
        return None  # Cancelled, KeyboardInterrupt...: let it through
    first: BaseException = tripwires
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    assert isinstance(first, TripWire)
    return first


def on_error_outcome(
    policy: OnError, processor_id: str, hook: str, error: Exception, *, passing: str
) -> TripWire | ProcessorError | ProcessorContractError | None:
    """What a hook's plain exception means under its processor's ``on_error``:
    the one home of the failure policy, for every lane.

    Returns None for ``"pass"`` (logged; the caller carries on as if the hook
    changed nothing, which ``passing`` describes for the log), a ``TripWire``
    attributed to the processor for ``"block"``, and for ``"raise"`` the error
    the run fails with: a ``ProcessorError`` whose ``__cause__`` is the
    original, or the ``ProcessorContractError`` itself when the hook broke the
    contract (it already names the processor and the hook).
    """
    if policy == "pass":
        logger.warning(
            "processor %r failed in %s; %s (on_error='pass'): %r",
            processor_id,
            hook,
            passing,
            error,
            exc_info=error,
        )
        return None
    if policy == "block":
        tripwire = TripWire(
            f"{processor_id} failed: {error}", processor_id=processor_id
        )
        tripwire.__cause__ = error
        return tripwire
    if isinstance(error, ProcessorContractError):
        # Already names the processor and the hook: the run fails with it as
        # it is, as it does when a hook between the stream's chunks breaks the
        # contract (never a ProcessorError around it, its message doubled).
        return error
    failed = ProcessorError(processor_id, hook, error)
    failed.__cause__ = error
    return failed


def is_async_hook(fn: HookFn) -> bool:
    """Whether calling ``fn`` returns a coroutine (checked once, at registration)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )


async def call_hook(fn: HookFn, is_async: bool, args: HookArgs) -> Any:
    """Call a sync or async hook and return its result. Checkpoints only if the
    hook does. A sync hook that returns an awaitable has it awaited."""
    if is_async:
        return await fn(args)
    result = fn(args)
    if inspect.isawaitable(result):
        return await _await(result)
    return result


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
