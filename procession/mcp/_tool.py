"""``MCPTool``, one tool of an MCP server, its annotations and approval
setting, and what a call's result gives the model."""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias

import attrs

from .._errors import ConfigurationError
from ..runtime.tools import Tool, ToolContext

__all__ = [
    "ApprovalPolicy",
    "MCPTool",
    "MCPToolAnnotations",
    "ToolApproval",
    "check_approval",
    "make_tools",
    "per_tool_approval",
    "result_text",
    "result_value",
]

logger: Final = logging.getLogger("procession.mcp")

ToolApproval: TypeAlias = bool | Callable[[Any, ToolContext], "bool | Awaitable[bool]"]
"""One tool's ``require_approval``: a bool, or ``predicate(args, context)``
returning (or awaiting to) whether this call needs a person's approval."""

ApprovalPolicy: TypeAlias = (
    bool | Callable[[str, Any, ToolContext], "bool | Awaitable[bool]"]
)
"""``MCPTools(require_approval=...)``: a bool for every tool, or
``predicate(name, args, context)`` with the tool's name on the server."""

_INVALID_NAME_CHARS: Final = re.compile(r"[^a-zA-Z0-9_-]")


@attrs.frozen(kw_only=True)
class MCPToolAnnotations:
    """A tool's MCP annotations, as the server describes it. They are hints
    from the server, not guarantees, and never require approval by
    themselves (``MCPTools(require_approval=...)`` opts in)."""

    title: str | None = None
    read_only_hint: bool | None = None
    """``readOnlyHint``: the tool does not change its environment."""
    destructive_hint: bool | None = None
    """``destructiveHint``: it may destroy or overwrite (MCP's default: true)."""
    idempotent_hint: bool | None = None
    """``idempotentHint``: calling it twice does no more than once."""
    open_world_hint: bool | None = None
    """``openWorldHint``: it reaches beyond a closed domain (the web, say)."""


@attrs.frozen(kw_only=True, eq=False)
class MCPTool(Tool):
    """One tool of an MCP server: a ``Tool`` whose ``execute`` calls the
    server over its ``MCPTools``' connection, so ``process_tool_result``,
    tracing, timeouts and cancellation apply as to any tool.

    ``name`` is what the model sees (the server's name, made valid for model
    providers and prefixed when the ``MCPTools`` has a ``prefix``);
    ``server_name`` the name on the server. ``input`` is the server's JSON
    Schema, against which arguments are checked before a call.
    """

    server_name: str
    server: str
    """The display name of the server (``MCPTools.name``)."""
    annotations: MCPToolAnnotations = attrs.field(factory=MCPToolAnnotations)
    output_schema: Mapping[str, Any] | None = attrs.field(default=None, repr=False)
    # ``require_approval`` is Tool's: set from ``MCPTools(require_approval=...)``
    # (the server's name bound into a predicate), enforced by the agent's
    # tool-approval check like any tool's.


def check_approval(value: object) -> ApprovalPolicy:
    if isinstance(value, bool):
        return value
    if not callable(value):
        raise ConfigurationError(
            f"require_approval must be a bool or a function (name, args, context) "
            f"-> bool, got {value!r}"
        )
    try:
        inspect.signature(value).bind(None, None, None)
    except TypeError:
        raise ConfigurationError(
            f"require_approval {value!r} must accept three positional arguments "
            f"(name, args, context)"
        ) from None
    except ValueError:  # no signature to read (a builtin): trust it
        pass
    return value


def per_tool_approval(policy: ApprovalPolicy, server_name: str) -> ToolApproval:
    if isinstance(policy, bool):
        return policy

    def predicate(args: Any, context: ToolContext) -> bool | Awaitable[bool]:
        return policy(server_name, args, context)

    predicate.__qualname__ = f"require_approval[{server_name}]"
    return predicate


def make_tools(
    listed: Sequence[Any],
    *,
    server: str,
    prefix: str | None,
    approval: ApprovalPolicy,
    executor: Callable[[str], Callable[[Any, ToolContext], Any]],
) -> tuple[MCPTool, ...]:
    """``MCPTool`` objects for the server's tool list (``mcp_types.Tool``
    objects); a tool whose schema or name cannot be offered to a model is
    left out, with a warning naming it. ``executor(server_name)`` makes each
    tool's ``execute``."""
    made: dict[str, MCPTool] = {}
    for spec in listed:
        name = _INVALID_NAME_CHARS.sub("_", spec.name)
        if prefix is not None:
            name = f"{prefix}_{name}"
        name = name[:64]
        if name in made:
            logger.warning(
                "MCP server %s: tool %r is left out: its name is %r, as %r's is",
                server,
                spec.name,
                name,
                made[name].server_name,
            )
            continue
        notes = spec.annotations
        try:
            made[name] = MCPTool(
                name=name,
                description=spec.description or getattr(spec, "title", None) or "",
                input=spec.input_schema,
                execute=executor(spec.name),
                server_name=spec.name,
                server=server,
                annotations=MCPToolAnnotations(
                    title=notes.title,
                    read_only_hint=notes.read_only_hint,
                    destructive_hint=notes.destructive_hint,
                    idempotent_hint=notes.idempotent_hint,
                    open_world_hint=notes.open_world_hint,
                )
                if notes is not None
                else MCPToolAnnotations(),
                output_schema=spec.output_schema,
                require_approval=per_tool_approval(approval, spec.name),
            )
        except ConfigurationError as exc:
            logger.warning(
                "MCP server %s: tool %r is left out: %s", server, spec.name, exc
            )
    return tuple(made.values())


def result_text(content: Sequence[Any]) -> str:
    return "\n".join(
        block.text for block in content if getattr(block, "type", None) == "text"
    )


def result_value(result: Any) -> Any:
    """A call's result for the model: its text, or its content blocks as JSON
    when there is more than text, or the structured content of a result
    without content."""
    content = result.content
    if not content:
        return (
            result.structured_content if result.structured_content is not None else ""
        )
    if all(getattr(block, "type", None) == "text" for block in content):
        return result_text(content)
    return [
        block.model_dump(by_alias=True, mode="json", exclude_none=True)
        for block in content
    ]
