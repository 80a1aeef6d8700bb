"""``Tool``, the ``@tool`` decorator, ``ToolContext`` and ``execute_tool``:
what the model is offered and how a tool runs (``ToolSet``, the tools of an
agent, is ``_toolset``).

A ``Tool`` validates itself when it is made: its schema and its checker are a
``procession.wire.ValueSchema`` (generated for attrs inputs, the given dict
otherwise), and its arguments are checked by ``_arguments`` when a call
arrives.
"""

from __future__ import annotations

import copy
import inspect
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NoReturn, TypeAlias, overload

import attrs
import trio

from ..._errors import ConfigurationError
from ...models import ToolDefinition
from ...processors import AbortSignal, ProcessorStreamWriter, RequestContext
from ...wire import ValueSchema, short_repr

__all__ = [
    "ApprovalPolicy",
    "Tool",
    "ToolContext",
    "ToolInput",
    "ToolSuspended",
    "execute_tool",
    "tool",
]

ToolInput: TypeAlias = type[Any] | Mapping[str, Any] | None
"""What a tool's ``input`` may be: an attrs class, a JSON Schema dict or None."""


class ToolSuspended(BaseException):
    """Raised by ``ToolContext.suspend(payload)``: the tool stops and the run
    waits for ``Agent.resume_stream``. A ``BaseException``, so a tool's own
    ``except Exception:`` does not swallow it."""

    def __init__(self, payload: Any) -> None:
        super().__init__("the tool suspended itself")
        self.payload = payload


_NAME_RE: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""Tool names model providers accept (Anthropic's and OpenAI's common rule)."""

_NO_ARGUMENTS_SCHEMA: Final[Mapping[str, Any]] = {"type": "object", "properties": {}}


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    paragraph = inspect.cleandoc(doc).strip().split("\n\n", 1)[0]
    return " ".join(line.strip() for line in paragraph.splitlines())


# --------------------------------------------------------------------------- #
# Tool, ToolContext, decorator, execution
# --------------------------------------------------------------------------- #


@attrs.frozen(kw_only=True)
class ToolContext:
    """What a tool's ``execute`` receives besides its arguments."""

    tool_call_id: str
    tool_name: str
    writer: ProcessorStreamWriter | None = None
    """Emits custom ``data-*`` chunks into the stream at the tool call's position."""
    request_context: RequestContext = attrs.field(factory=RequestContext)
    abort_signal: AbortSignal | None = None
    """Set when the run is being cancelled (a tool may also just be cancelled)."""
    messages: Sequence[Any] = ()
    """The conversation so far (read it; do not edit it)."""
    resume_data: Any = None
    """What ``Agent.resume_stream`` gave, when the tool runs again after it
    suspended itself; None on its first call."""
    suspend_payload: Any = None
    """What the tool passed to ``suspend`` the first time (on the call that
    resumes it)."""

    def suspend(self, payload: Any = None) -> NoReturn:
        """Stop the tool here; the run waits for a person, who answers with
        ``Agent.resume_stream(run_id, resume_data)``. The tool is then called
        again from the top, with ``context.resume_data`` set (Mastra's
        ``suspend()``). ``payload`` (JSON) reaches the client in the
        ``tool-call-suspended`` chunk. Never returns."""
        raise ToolSuspended(payload)


ApprovalPolicy: TypeAlias = bool | Callable[[Any, ToolContext], Any]
"""A tool's ``require_approval``: a bool, or ``fn(args, context)`` returning
(or awaiting to) a bool, asked once per call. A policy that raises requires
approval (it fails closed)."""


def _accepts_two_positional(fn: Callable[..., Any]) -> bool:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no signature: trust them
        return True
    try:
        signature.bind(None, None)
    except TypeError:
        return False
    return True


def _is_async_callable(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    # A callable object with ``async def __call__``.
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - we want the method itself
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(call)


@attrs.frozen(kw_only=True, eq=False)
class Tool:
    """A function the model may call.

    Args:
        name: what the model calls it: 1 to 64 letters, digits, ``_`` or ``-``.
        description: what it does, for the model.
        input: an attrs class, a JSON Schema object schema, or None (see the
            module docstring).
        execute: ``execute(args, context)``, sync or async (detected once, here).
            A sync ``execute`` runs inline in the agent's task: blocking I/O
            belongs in ``await trio.to_thread.run_sync(...)`` inside an async one.
        provider_options: passed to the model provider with the definition.

    Tools compare by identity. Construction validates everything and builds the
    schema, so a bad tool fails when it is defined, not when it is called.

    Raises:
        ConfigurationError: naming the tool and what was expected.
    """

    name: str
    description: str = ""
    input: type[Any] | Mapping[str, Any] | None = None
    execute: Callable[[Any, ToolContext], Any]
    provider_options: Mapping[str, Any] | None = None
    require_approval: ApprovalPolicy = False
    """Whether a call waits for a person's approval before it runs: a bool, or
    ``fn(args, context)`` returning one (asked once per call; it overrides
    the agent's ``require_tool_approval``, as in Mastra)."""
    resume_schema: Mapping[str, Any] | None = None
    """The JSON Schema of what ``resume_stream`` gives a tool that suspends
    itself (shown to the client; None: any JSON)."""
    idempotent: bool = False
    """Whether a call may run again with the same arguments to the same
    effect. A durable run taken over while this tool was running runs it
    again only if so; otherwise the model gets a ``ToolInterruptedError``
    (its outcome is unknown)."""
    _schema: dict[str, Any] = attrs.field(init=False, repr=False)
    _checker: ValueSchema | None = attrs.field(init=False, repr=False)
    """Checks the arguments (None: the tool takes no input)."""
    _is_async: bool = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.fullmatch(self.name):
            raise ConfigurationError(
                f"tool name {self.name!r} is not valid: use 1 to 64 letters, digits, "
                f"'_' or '-' (what model providers accept)"
            )
        if not isinstance(self.description, str):
            raise ConfigurationError(
                f"tool {self.name!r}: description must be a str, got "
                f"{self.description!r}"
            )
        if not callable(self.execute):
            raise ConfigurationError(
                f"tool {self.name!r}: execute must be a function (args, context), "
                f"got {self.execute!r}"
            )
        if not _accepts_two_positional(self.execute):
            raise ConfigurationError(
                f"tool {self.name!r}: execute {self.execute!r} must accept two "
                f"positional arguments (args, context)"
            )
        if not isinstance(self.require_approval, bool) and not callable(
            self.require_approval
        ):
            raise ConfigurationError(
                f"tool {self.name!r}: require_approval must be a bool or a "
                f"function (args, context) -> bool, got {self.require_approval!r}"
            )
        if not isinstance(self.idempotent, bool):
            raise ConfigurationError(
                f"tool {self.name!r}: idempotent must be True or False, got "
                f"{self.idempotent!r}"
            )
        if self.resume_schema is not None and not isinstance(
            self.resume_schema, Mapping
        ):
            raise ConfigurationError(
                f"tool {self.name!r}: resume_schema must be a JSON Schema dict or "
                f"None, got {self.resume_schema!r}"
            )
        if self.provider_options is not None and not isinstance(
            self.provider_options, Mapping
        ):
            raise ConfigurationError(
                f"tool {self.name!r}: provider_options must be a mapping or None, "
                f"got {self.provider_options!r}"
            )
        schema, checker = self._build_schema()
        object.__setattr__(self, "_schema", schema)
        object.__setattr__(self, "_checker", checker)
        object.__setattr__(self, "_is_async", _is_async_callable(self.execute))

    def _build_schema(self) -> tuple[dict[str, Any], ValueSchema | None]:
        spec = self.input
        if spec is None:
            return copy.deepcopy(dict(_NO_ARGUMENTS_SCHEMA)), None
        owner = f"tool {self.name!r}"
        if isinstance(spec, type) and attrs.has(spec):
            checker = ValueSchema.of(spec, owner=owner, what="the input")
            return checker.schema, checker
        if isinstance(spec, Mapping):
            if spec.get("type") != "object":
                raise ConfigurationError(
                    f"tool {self.name!r}: a JSON Schema input must be an object "
                    f'schema ({{"type": "object", ...}}), got {short_repr(spec)}'
                )
            checker = ValueSchema.of(spec, owner=owner, what="the input")
            return checker.schema, checker
        raise ConfigurationError(
            f"tool {self.name!r}: input must be an attrs class, a JSON Schema dict "
            f"or None, got {spec!r}"
        )

    @property
    def _validator(self) -> Any:
        """A jsonschema validator for a dict input, when jsonschema is installed."""
        return None if self._checker is None else self._checker.validator

    @property
    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments (a fresh copy)."""
        return copy.deepcopy(self._schema)

    @property
    def is_async(self) -> bool:
        """Whether ``execute`` is a coroutine function."""
        return self._is_async

    def definition(self) -> ToolDefinition:
        """The tool as the model is offered it (a fresh schema copy each call,
        so a provider adapter may edit it)."""
        return ToolDefinition(
            name=self.name,
            description=self.description,
            input_schema=self.input_schema,
            provider_options=self.provider_options,
        )


def _adapt(fn: Callable[..., Any]) -> Callable[[Any, ToolContext], Any]:
    """``fn`` as ``execute(args, context)``: functions of one parameter are
    called with the arguments only, of none with nothing."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return fn
    kinds = inspect.Parameter
    if any(p.kind is kinds.KEYWORD_ONLY and p.default is p.empty for p in parameters):
        raise ConfigurationError(
            f"tool function {fn!r} has required keyword-only parameters; it is "
            f"called as fn(args, context)"
        )
    if any(p.kind is kinds.VAR_POSITIONAL for p in parameters):
        return fn
    positional = [
        p
        for p in parameters
        if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
    ]
    if len(positional) >= 2:
        return fn
    takes_args = len(positional) == 1
    adapted: Callable[[Any, ToolContext], Any]
    if inspect.iscoroutinefunction(fn):

        async def adapted_async(args: Any, context: ToolContext) -> Any:
            return await (fn(args) if takes_args else fn())

        adapted = adapted_async
    else:

        def adapted_sync(args: Any, context: ToolContext) -> Any:
            return fn(args) if takes_args else fn()

        adapted = adapted_sync
    # Not functools.wraps: its __wrapped__ would make inspect.signature report
    # fn's own (shorter) signature.
    adapted.__name__ = getattr(fn, "__name__", adapted.__name__)
    adapted.__qualname__ = getattr(fn, "__qualname__", adapted.__qualname__)
    adapted.__doc__ = fn.__doc__
    return adapted


def _input_from_annotation(fn: Callable[..., Any]) -> type[Any] | None:
    """The attrs class the first parameter of ``fn`` is annotated with, if any."""
    try:
        first = next(iter(inspect.signature(fn).parameters.values()), None)
    except (TypeError, ValueError):
        return None
    if first is None:
        return None
    try:
        annotation = typing.get_type_hints(fn).get(first.name)
    except Exception:  # an unresolvable forward reference: no inference
        annotation = first.annotation
    if isinstance(annotation, type) and attrs.has(annotation):
        return annotation
    return None


def _make_tool(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    input: ToolInput,
    provider_options: Mapping[str, Any] | None,
    require_approval: ApprovalPolicy = False,
    resume_schema: Mapping[str, Any] | None = None,
    idempotent: bool = False,
) -> Tool:
    if not callable(fn):
        raise ConfigurationError(f"@tool decorates a function, got {fn!r}")
    if name is None:
        name = getattr(fn, "__name__", None)
        if not isinstance(name, str):
            raise ConfigurationError(f"@tool cannot name {fn!r}; pass name=...")
    if input is None:
        input = _input_from_annotation(fn)
    return Tool(
        name=name,
        description=(
            description
            if description is not None
            else _first_paragraph(inspect.getdoc(fn))
        ),
        input=input,
        execute=_adapt(fn),
        provider_options=provider_options,
        require_approval=require_approval,
        resume_schema=resume_schema,
        idempotent=idempotent,
    )


@overload
def tool(name: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    name: str | None = None,
    *,
    description: str | None = None,
    input: ToolInput = None,
    provider_options: Mapping[str, Any] | None = None,
    require_approval: ApprovalPolicy = False,
    resume_schema: Mapping[str, Any] | None = None,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    name: str | Callable[..., Any] | None = None,
    *,
    description: str | None = None,
    input: ToolInput = None,
    provider_options: Mapping[str, Any] | None = None,
    require_approval: ApprovalPolicy = False,
    resume_schema: Mapping[str, Any] | None = None,
    idempotent: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a ``Tool`` of a function: ``@tool`` or ``@tool("name", ...)``.

    * ``name`` defaults to the function's name; ``description`` to the first
      paragraph of its docstring.
    * ``input`` defaults to the attrs class the first parameter is annotated
      with (else None: no arguments).
    * The function is called as ``fn(args, context)``; one that takes a single
      parameter is called as ``fn(args)``, one that takes none as ``fn()``.
    * ``require_approval=True`` (or ``fn(args, context) -> bool``): a call
      waits for a person's approval before it runs (``Tool.require_approval``).
    * ``idempotent=True``: a durable run taken over mid-call may run it again
      (``Tool.idempotent``).

    The decorated name is bound to the ``Tool``, not the function.

    Raises:
        ConfigurationError: as ``Tool`` does.
    """
    if callable(name):
        return _make_tool(
            name,
            None,
            description,
            input,
            provider_options,
            require_approval,
            resume_schema,
            idempotent,
        )

    def decorate(fn: Callable[..., Any]) -> Tool:
        return _make_tool(
            fn,
            name,
            description,
            input,
            provider_options,
            require_approval,
            resume_schema,
            idempotent,
        )

    return decorate


async def execute_tool(tool: Tool, args: Any, context: ToolContext) -> Any:
    """Run ``tool.execute(args, context)`` and return its result.

    ``args`` is what ``parse_arguments`` returned. An async ``execute`` is
    awaited (it checkpoints as it does). A sync one runs inline, after a check
    for cancellation and followed by a cancel-shielded schedule point, so its
    result is never lost to a cancellation that arrives while it runs; it blocks
    the run while it runs, so blocking I/O belongs in
    ``trio.to_thread.run_sync``. A sync ``execute`` that returns a coroutine has
    it awaited. Exceptions propagate unchanged (the agent turns them into
    ``tool-error`` chunks).
    """
    if tool.is_async:
        return await tool.execute(args, context)
    await trio.lowlevel.checkpoint_if_cancelled()
    result = tool.execute(args, context)
    if inspect.iscoroutine(result):
        return await result
    await trio.lowlevel.cancel_shielded_checkpoint()
    return result
