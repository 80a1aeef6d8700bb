"""The memory processors (Mastra's ``MessageHistory`` and ``WorkingMemory``)
and the ``updateWorkingMemory`` tool, written against the public processor
contract only.

Both are input processors: ``process_input`` runs once before the agentic
loop. Saving is not theirs: the runtime calls ``Memory.save_turn`` once a run
has succeeded, so a tripwire or an error can never leave a saved turn behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from .._errors import MissingThreadError, ToolArgumentsError
from ..processors import MessageList, ProcessInputArgs, Processor, RequestContext
from ._storage import MemoryStorage

__all__ = [
    "DEFAULT_WORKING_MEMORY_TEMPLATE",
    "MEMORY_TAG",
    "UPDATE_WORKING_MEMORY",
    "MessageHistory",
    "WorkingMemory",
    "WorkingMemoryTool",
    "memory_ids",
]

MEMORY_TAG: Final = "memory"
"""The system-message tag of what memory injects (as Mastra's)."""

UPDATE_WORKING_MEMORY: Final = "updateWorkingMemory"
"""The name of the working-memory tool, as Mastra's."""

DEFAULT_WORKING_MEMORY_TEMPLATE: Final = """\
# User Information
- **First Name**:
- **Last Name**:
- **Location**:
- **Occupation**:
- **Interests**:
- **Goals**:
- **Events**:
- **Facts**:
- **Projects**:
"""
"""Mastra's default working-memory template (Markdown)."""


def memory_ids(
    message_list: MessageList | None, request_context: RequestContext | None
) -> tuple[str, str]:
    """The call's ``(thread_id, resource_id)``: the message list's, else the
    request context's (``thread_id``/``threadId``, ``resource_id``/
    ``resourceId``).

    Raises:
        MissingThreadError: either is missing.
    """
    thread = message_list.thread_id if message_list is not None else None
    resource = message_list.resource_id if message_list is not None else None
    if request_context is not None:
        thread = thread or request_context.thread_id
        resource = resource or request_context.resource_id
    if not thread or not resource:
        missing = " and ".join(
            name
            for name, value in (("thread", thread), ("resource", resource))
            if not value
        )
        raise MissingThreadError(
            f"memory is on but the call names no {missing}; pass "
            f"memory={{'thread': ..., 'resource': ...}} (or thread_id= and "
            f"resource_id=)"
        )
    return thread, resource


class MessageHistory(Processor):
    """Loads the thread's last ``last_messages`` messages into the message list
    with source ``memory`` (seen in ``message_list.get.remembered``, not in
    ``process_input``'s ``messages``), before the new input.

    A thread that does not exist yet has no history. A thread owned by another
    resource raises ``ThreadOwnershipError`` (the run ends with that error).
    """

    id = "message-history"

    def __init__(self, storage: MemoryStorage, *, last_messages: int = 10) -> None:
        self.storage = storage
        self.last_messages = last_messages

    async def process_input(self, args: ProcessInputArgs) -> MessageList:
        """Add the history to ``args.message_list``. Checkpoints (one storage
        read); cancelled, it adds nothing."""
        thread, resource = memory_ids(args.message_list, args.request_context)
        if self.last_messages > 0:
            history = await self.storage.list_messages(
                thread, resource, last=self.last_messages
            )
            args.message_list.add(history, "memory")
        return args.message_list

    def __repr__(self) -> str:
        return f"<MessageHistory last_messages={self.last_messages!r}>"


def working_memory_instructions(document: str) -> str:
    """The system message that shows the model its working memory."""
    return (
        "WORKING_MEMORY_SYSTEM_INSTRUCTION:\n"
        "Store and update any conversation-relevant information by calling the "
        f"{UPDATE_WORKING_MEMORY} tool. Keep the document's format; send the "
        "whole updated document as `memory`, not only the change. Update it when "
        "the user tells you something worth remembering across conversations "
        "(names, preferences, goals); do not mention the tool or the document "
        "to the user.\n"
        "<working_memory_data>\n"
        f"{document}\n"
        "</working_memory_data>"
    )


class WorkingMemory(Processor):
    """Shows the model the resource's working-memory document (or the template,
    until the model first writes one) as a system message tagged ``memory``.

    The model updates the document with the ``updateWorkingMemory`` tool
    (``WorkingMemoryTool``). The document is per resource: every thread of the
    resource sees the same one.
    """

    id = "working-memory"

    def __init__(
        self, storage: MemoryStorage, *, template: str = DEFAULT_WORKING_MEMORY_TEMPLATE
    ) -> None:
        self.storage = storage
        self.template = template

    async def process_input(self, args: ProcessInputArgs) -> MessageList:
        """Add the document as a tagged system message. Checkpoints (one
        storage read); cancelled, it adds nothing."""
        _, resource_id = memory_ids(args.message_list, args.request_context)
        resource = await self.storage.get_resource(resource_id)
        document = resource.working_memory if resource is not None else None
        args.message_list.add_system(
            working_memory_instructions(document or self.template), tag=MEMORY_TAG
        )
        return args.message_list

    def __repr__(self) -> str:
        return "<WorkingMemory>"


@attrs.frozen
class WorkingMemoryTool:
    """The ``updateWorkingMemory`` tool as a plain description and handler.

    ``procession.memory`` sits below the runtime, so it cannot build a
    ``procession.runtime.tools.Tool``; the runtime wraps this one as
    ``Tool(name=t.name, description=t.description, input=t.input_schema,
    execute=t.execute)``. ``execute(args, context)`` takes the tool context
    (or a ``RequestContext``) to find the resource.
    """

    storage: MemoryStorage
    name: str = UPDATE_WORKING_MEMORY
    description: str = (
        "Update the working memory: the whole Markdown document of what to "
        "remember about the user, in the template's format."
    )
    input_schema: Mapping[str, Any] = attrs.field(
        factory=lambda: {
            "type": "object",
            "properties": {
                "memory": {
                    "type": "string",
                    "description": "The full updated working-memory document.",
                }
            },
            "required": ["memory"],
            "additionalProperties": False,
        }
    )

    async def execute(self, args: Mapping[str, Any], context: Any) -> dict[str, Any]:
        """Replace the resource's document with ``args["memory"]``; returns
        ``{"success": True}``. Checkpoints (one storage write)."""
        memory = args.get("memory") if isinstance(args, Mapping) else None
        if not isinstance(memory, str):
            raise ToolArgumentsError(
                UPDATE_WORKING_MEMORY, f"'memory' must be a string, got {args!r}"
            )
        request_context = getattr(context, "request_context", context)
        resource_id = getattr(request_context, "resource_id", None)
        if not isinstance(resource_id, str) or not resource_id:
            raise MissingThreadError(
                f"{UPDATE_WORKING_MEMORY} ran without a resource id in the request "
                f"context; the runtime sets it from memory={{'resource': ...}}"
            )
        await self.storage.update_working_memory(resource_id, memory)
        return {"success": True}
