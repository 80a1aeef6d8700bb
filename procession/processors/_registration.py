"""Registration: checking processors, lanes and ids, and the typing protocols for
the seed's ``InputProcessor`` / ``OutputProcessor`` / ``ErrorProcessor``."""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

import attrs

from .._errors import ConfigurationError, DuplicateProcessorIdError
from .._secrets import get_logger
from ._calling import HookFn, is_async_hook
from ._context import ProcessorViolation
from ._contract import (
    HOOK_NAMES,
    INPUT_HOOKS,
    OUTPUT_HOOKS,
    OnError,
    ProcessAPIErrorArgs,
    ProcessInputArgs,
    ProcessInputStepArgs,
    ProcessLLMRequestArgs,
    ProcessLLMResponseArgs,
    ProcessOutputResultArgs,
    ProcessOutputStepArgs,
    ProcessOutputStreamArgs,
    ProcessToolResultArgs,
)

__all__ = [
    "ErrorProcessor",
    "HookSpec",
    "InputProcessor",
    "OutputProcessor",
    "ProcessorSet",
    "ProcessorSpec",
    "ProcessorWarning",
    "register_processors",
]

logger = get_logger("procession")

_ON_ERROR = ("raise", "pass", "block")

# The hooks that place a processor in a lane (SPEC §2.12); process_api_error is
# accepted in every lane (consulted in input, output, then error lanes).
_LANE_HOOKS: dict[str, tuple[str, ...]] = {
    "input": (*INPUT_HOOKS, "process_api_error"),
    "output": (*OUTPUT_HOOKS, "process_api_error"),
    "error": ("process_api_error",),
}


class ProcessorWarning(UserWarning):
    """A processor registered, but something about it is probably a mistake (a
    ``process_*`` method that is not a hook, e.g. a misspelled one)."""


# --- typing protocols (one per hook; the seed's aliases are unions of them) -------


@runtime_checkable
class _HasProcessInput(Protocol):
    id: str

    def process_input(self, args: ProcessInputArgs, /) -> Any: ...


@runtime_checkable
class _HasProcessInputStep(Protocol):
    id: str

    def process_input_step(self, args: ProcessInputStepArgs, /) -> Any: ...


@runtime_checkable
class _HasProcessLLMRequest(Protocol):
    id: str

    def process_llm_request(self, args: ProcessLLMRequestArgs, /) -> Any: ...


@runtime_checkable
class _HasProcessLLMResponse(Protocol):
    id: str

    def process_llm_response(self, args: ProcessLLMResponseArgs, /) -> Any: ...


@runtime_checkable
class _HasProcessOutputStream(Protocol):
    id: str

    def process_output_stream(self, args: ProcessOutputStreamArgs, /) -> Any: ...


@runtime_checkable
class _HasProcessOutputStep(Protocol):
    id: str

    def process_output_step(self, args: ProcessOutputStepArgs, /) -> Any: ...


@runtime_checkable
class _HasProcessOutputResult(Protocol):
    id: str

    def process_output_result(self, args: ProcessOutputResultArgs, /) -> Any: ...


@runtime_checkable
class _HasProcessToolResult(Protocol):
    id: str

    def process_tool_result(self, args: ProcessToolResultArgs, /) -> Any: ...


@runtime_checkable
class ErrorProcessor(Protocol):
    """A processor that implements ``process_api_error`` (the seed's
    ``ErrorProcessor``)."""

    id: str

    def process_api_error(self, args: ProcessAPIErrorArgs, /) -> Any: ...


InputProcessor: TypeAlias = (
    _HasProcessInput
    | _HasProcessInputStep
    | _HasProcessLLMRequest
    | _HasProcessLLMResponse
)
"""Implements at least one of ``process_input``, ``process_input_step``,
``process_llm_request``, ``process_llm_response`` (the seed's ``InputProcessor``)."""

OutputProcessor: TypeAlias = (
    _HasProcessOutputStream
    | _HasProcessOutputStep
    | _HasProcessOutputResult
    | _HasProcessToolResult
)
"""Implements at least one of ``process_output_stream``, ``process_output_step``,
``process_output_result`` — or ``process_tool_result``, which SPEC §2.12 counts for
the output lane (the seed's ``RedactToolResult`` has only that hook)."""


# --- specs -----------------------------------------------------------------------


@attrs.frozen
class HookSpec:
    """A processor's hook, resolved once: the bound callable and whether it is
    async."""

    fn: HookFn
    is_async: bool


class HookProbe:
    """How many driven calls of a registered stream hook in a row, across
    runs, did not yield to trio (``actors._watch``: once there are
    ``PROBATION``, a new run's stage only counts its calls). Written by
    every run of the registration, without a lock: a lost update costs a
    call driven more or a yield found one park later, never a wrong
    boundary."""

    __slots__ = ("quiet",)

    def __init__(self) -> None:
        self.quiet = 0


@attrs.frozen(eq=False)
class ProcessorSpec:
    """A registered processor: its identity, hooks and policies, read once so the
    hot path never calls ``getattr``."""

    processor: object
    id: str
    name: str
    index: int
    hooks: dict[str, HookSpec]
    process_data_parts: bool
    on_error: OnError
    on_violation: Callable[[ProcessorViolation], Any] | None
    stream_boundary: bool | None = None
    """The processor's say in the ``"adaptive"`` execution mode: ``True``, its
    ``process_output_stream`` runs in a task of its own from the first chunk;
    ``False``, never (it stays inline even if its hook parks); ``None``, the
    pipeline decides by watching the hook."""

    probe: HookProbe = attrs.field(factory=HookProbe, init=False, eq=False, repr=False)
    """What the ``"adaptive"`` mode's runs learned of this processor's
    ``process_output_stream`` (``actors._watch``): kept with the registration,
    which an agent's runs share."""

    def hook(self, name: str) -> HookSpec | None:
        return self.hooks.get(name)


@attrs.frozen
class ProcessorSet:
    """The processors of one call, by lane, with one spec per processor instance."""

    input: tuple[ProcessorSpec, ...]
    output: tuple[ProcessorSpec, ...]
    error: tuple[ProcessorSpec, ...]
    all: tuple[ProcessorSpec, ...]
    """Every distinct processor, in merged order (input, output, error lanes)."""
    _with_hook: dict[tuple[str, ...], tuple[ProcessorSpec, ...]] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )

    def with_hook(self, hook: str, *lanes: str) -> tuple[ProcessorSpec, ...]:
        """The specs of ``lanes`` (``"input"``, ``"output"``, ``"error"``, in
        the order given) that have ``hook``, each processor once. Computed once
        per set: an agent's runs share their set, and ask this at every step."""
        key = (hook, *lanes)
        found = self._with_hook.get(key)
        if found is None:
            seen: set[str] = set()
            chosen: list[ProcessorSpec] = []
            for lane in lanes:
                for spec in getattr(self, lane):
                    if hook in spec.hooks and spec.id not in seen:
                        seen.add(spec.id)
                        chosen.append(spec)
            found = self._with_hook[key] = tuple(chosen)
        return found


def _spec_for(processor: object, index: int, lane: str) -> ProcessorSpec:
    if isinstance(processor, type):
        raise ConfigurationError(
            f"{lane}_processors got the class {processor.__qualname__}, not a "
            f"processor: instantiate it ({processor.__qualname__}(...)) and pass "
            f"the instance"
        )
    ident = getattr(processor, "id", None)
    if not isinstance(ident, str) or not ident:
        raise ConfigurationError(
            f"processor {processor!r} has no id; give it a non-empty string "
            f"attribute 'id' (e.g. id = 'my-processor')"
        )
    hooks: dict[str, HookSpec] = {}
    for hook in HOOK_NAMES:
        fn = getattr(processor, hook, None)
        if fn is None:
            continue
        if not callable(fn):
            raise ConfigurationError(
                f"processor {ident!r}: {hook} is {fn!r}, which is not callable"
            )
        hooks[hook] = HookSpec(fn=fn, is_async=is_async_hook(fn))
    if not hooks:
        raise ConfigurationError(
            f"processor {ident!r} ({processor!r}) implements none of the hooks "
            f"{', '.join(HOOK_NAMES)}"
        )
    _warn_about_near_hooks(processor, ident)
    on_error: OnError = getattr(processor, "on_error", "raise")
    if on_error not in _ON_ERROR:
        raise ConfigurationError(
            f"processor {ident!r}: on_error is {on_error!r}; expected one of "
            f"{', '.join(map(repr, _ON_ERROR))}"
        )
    on_violation = getattr(processor, "on_violation", None)
    if on_violation is not None and not callable(on_violation):
        raise ConfigurationError(
            f"processor {ident!r}: on_violation is {on_violation!r}, not callable"
        )
    boundary = getattr(processor, "stream_boundary", None)
    if boundary is not None and not isinstance(boundary, bool):
        raise ConfigurationError(
            f"processor {ident!r}: stream_boundary is {boundary!r}; expected "
            f"True, False or None"
        )
    name = getattr(processor, "name", None)
    return ProcessorSpec(
        processor=processor,
        id=ident,
        name=name if isinstance(name, str) and name else ident,
        index=index,
        hooks=hooks,
        process_data_parts=bool(getattr(processor, "process_data_parts", False)),
        on_error=on_error,
        on_violation=on_violation,
        stream_boundary=boundary,
    )


def _warn_about_near_hooks(processor: object, ident: str) -> None:
    """A ``process_*`` method that is not a hook is never called: most likely a
    misspelled hook, which would otherwise be ignored in silence."""
    for name in dir(processor):
        if (
            not name.startswith("process_")
            or name in HOOK_NAMES
            or name == "process_data_parts"
            or not callable(getattr(processor, name, None))
        ):
            continue
        close = difflib.get_close_matches(name, HOOK_NAMES, n=1)
        hint = f"did you mean {close[0]}?" if close else "it is not a hook"
        warnings.warn(
            f"processor {ident!r} has a method {name} that is not a hook and is "
            f"never called: {hint} (the hooks are {', '.join(HOOK_NAMES)})",
            ProcessorWarning,
            stacklevel=4,
        )


def _check_lane(spec: ProcessorSpec, lane: str) -> None:
    """A processor with none of a lane's hooks would sit in it and never run."""
    wanted = _LANE_HOOKS[lane]
    if any(hook in spec.hooks for hook in wanted):
        return
    has = list(spec.hooks)
    belongs = [
        name
        for name, hooks in _LANE_HOOKS.items()
        if any(hook in spec.hooks for hook in hooks)
    ]
    raise ConfigurationError(
        f"processor {spec.id!r} is in {lane}_processors but has none of that "
        f"lane's hooks ({', '.join(wanted)}), so it would never run there; it "
        f"has {', '.join(has)}: put it in "
        f"{' or '.join(f'{name}_processors' for name in belongs)}"
    )


def register_processors(
    input: Iterable[object] = (),
    output: Iterable[object] = (),
    error: Iterable[object] = (),
) -> ProcessorSet:
    """Check the processors of one call and resolve each once (SPEC §2.12).

    * The same instance may sit in several lanes: it gets one spec (one actor, one
      ``state``).
    * Two *different* instances with the same ``id`` are a
      ``DuplicateProcessorIdError``.
    * A processor with no hook at all is a ``ConfigurationError``, and so is one
      with none of a lane's hooks in that lane (input: ``process_input``,
      ``process_input_step``, ``process_llm_request``, ``process_llm_response``;
      output: ``process_output_stream``, ``process_output_step``,
      ``process_output_result``, ``process_tool_result``; ``process_api_error``
      counts in every lane and is the error lane's one hook), naming it, the
      lane and the hooks it has; and a processor class passed instead of an
      instance.
    * A ``process_*`` method that is not a hook gets a ``ProcessorWarning``
      ("did you mean process_output_stream?").
    * ``processor_index`` is set on each processor to its position in the merged
      list (input, output, then error lane; each instance counted once).
    """
    lanes: list[Sequence[object]] = []
    for lane_name, lane in (("input", input), ("output", output), ("error", error)):
        if isinstance(lane, str | bytes) or not isinstance(lane, Iterable):
            raise ConfigurationError(
                f"{lane_name}_processors must be a list of processors, got {lane!r}"
            )
        lanes.append(list(lane))

    by_instance: dict[int, ProcessorSpec] = {}
    by_id: dict[str, ProcessorSpec] = {}
    merged: list[ProcessorSpec] = []
    lane_specs: list[tuple[ProcessorSpec, ...]] = []
    for lane_name, lane in zip(("input", "output", "error"), lanes, strict=True):
        specs: list[ProcessorSpec] = []
        for processor in lane:
            spec = by_instance.get(id(processor))
            if spec is None:
                spec = _spec_for(processor, len(merged), lane_name)
                other = by_id.get(spec.id)
                if other is not None:
                    raise DuplicateProcessorIdError(spec.id, other.processor, processor)
                by_instance[id(processor)] = spec
                by_id[spec.id] = spec
                merged.append(spec)
                _set_index(processor, spec.index)
            if spec in specs:
                raise ConfigurationError(
                    f"processor {spec.id!r} appears twice in one lane; list it once"
                )
            _check_lane(spec, lane_name)
            specs.append(spec)
        lane_specs.append(tuple(specs))
    return ProcessorSet(
        input=lane_specs[0],
        output=lane_specs[1],
        error=lane_specs[2],
        all=tuple(merged),
    )


def _set_index(processor: object, index: int) -> None:
    try:
        setattr(processor, "processor_index", index)  # noqa: B010 - any object may be a processor
    except (AttributeError, TypeError):
        # A slotted or frozen processor cannot take the attribute; its spec has it.
        logger.debug("could not set processor_index on %r", processor)
