"""Helpers shared by the agent-rules tests in this folder.

The tests drive a real ``Agent`` with a ``ScriptedModel`` and check what the client
receives (chunks, in order, as Mastra wire JSON where the shape matters), what the
result says, and what the model was sent (``model.calls``). One file per area; each
rule of SPEC §2 that concerns a run (1-14, 16, 17) lives in:

- 1, 11: ``test_drop_and_rewrite.py``
- 2, 7: ``test_failures.py``
- 3, 4, 5, 9: ``test_retries.py``
- 6: ``test_tripwires.py``
- 8, structured cancellation: ``test_cancellation.py``
- 10: ``test_fused_and_actors_agree.py``
- 12, per-call processor lists: ``test_processor_lists.py``
- 13, 17, tool restriction: ``test_agent_tools.py``
- 14, 16, API errors: ``test_model_calls.py``
- ``prepare_step``, per-step models: ``test_steps.py``
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
import trio

from procession import Agent, AgentResult, Message, Processor, ProcessorViolation, tool
from procession.actors import ExecutionMode
from procession.chunks import TextDeltaChunk, to_wire
from procession.messages import MessageContent, TextPart
from procession.processors import (
    ProcessAPIErrorArgs,
    ProcessOutputStreamArgs,
    PromptToolResultPart,
)

MODES: tuple[ExecutionMode, ...] = ("adaptive", "fused", "actors")
each_mode = pytest.mark.parametrize("mode", MODES)


async def run_stream(
    agent: Agent, messages: Any = "hi", **options: Any
) -> tuple[list[Any], AgentResult]:
    """Read a whole streamed run; return the client's chunks and the result."""
    async with agent.stream(messages, **options) as stream:
        chunks = [chunk async for chunk in stream]
        result = await stream.result()
    return chunks, result


def types(chunks: Sequence[Any]) -> list[str]:
    return [chunk.type for chunk in chunks]


def deltas(chunks: Sequence[Any]) -> list[str]:
    return [c.payload.text for c in chunks if isinstance(c, TextDeltaChunk)]


def wire(chunks: Sequence[Any]) -> list[dict[str, Any]]:
    """The chunks as Mastra wire JSON, minus the random response-message id of
    ``step-start`` / ``step-finish`` (message ids are fresh uuids in every run)."""
    out = []
    for chunk in chunks:
        item = to_wire(chunk)
        if item.get("type") in ("step-start", "step-finish"):
            item = {**item, "payload": dict(item["payload"])}
            item["payload"].pop("messageId", None)
        out.append(item)
    return out


def prompt_texts(prompt: Sequence[Any]) -> list[str]:
    """Each prompt message as ``"role: text"`` (tool results as their value)."""
    out = []
    for message in prompt:
        if isinstance(message.content, str):
            out.append(f"{message.role}: {message.content}")
            continue
        pieces = []
        for part in message.content:
            if isinstance(part, PromptToolResultPart):
                pieces.append(f"result[{part.tool_call_id}]={part.result}")
            elif hasattr(part, "text"):
                pieces.append(part.text)
            elif hasattr(part, "tool_name"):
                pieces.append(f"call[{part.tool_call_id}]:{part.tool_name}")
        out.append(f"{message.role}: {' '.join(pieces)}")
    return out


def system_texts(prompt: Sequence[Any]) -> list[str]:
    return [m.content for m in prompt if m.role == "system"]


def upper(chunk: TextDeltaChunk) -> TextDeltaChunk:
    return attrs.evolve(
        chunk, payload=attrs.evolve(chunk.payload, text=chunk.payload.text.upper())
    )


@attrs.frozen
class EchoInput:
    text: str


@tool
def echo(args: EchoInput) -> str:
    """Echo the text back."""
    return f"echo:{args.text}"


def user_message(text: str) -> Message:
    return Message(role="user", content=MessageContent(parts=[TextPart(text=text)]))


class Upper(Processor):
    id = "upper"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        return upper(part) if isinstance(part, TextDeltaChunk) else part


class Observer(Processor):
    """Records every chunk type it is shown (last in the output lane)."""

    id = "observer"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        self.seen.append(args.part.type)
        return args.part


class RetryApiErrors(Processor):
    """Asks for a retry of every failed model call, ``times`` times."""

    id = "retry-api"

    def __init__(self, times: int = 1_000) -> None:
        self.times = times
        self.seen: list[tuple[int, str]] = []

    def process_api_error(self, args: ProcessAPIErrorArgs) -> Any:
        self.seen.append((args.retry_count, str(args.error)))
        if len(self.seen) <= self.times:
            return {"retry": True}
        return None


class StreamGuard(Processor):
    """Aborts on a text delta containing ``secret``; logs ``on_violation``."""

    id = "stream-guard"

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        if isinstance(part, TextDeltaChunk) and "secret" in part.payload.text.lower():
            args.abort("leak", metadata={"kind": "pii"})
        return part

    async def on_violation(self, violation: ProcessorViolation) -> None:
        await trio.sleep(1)  # awaited: the tripwire chunk must wait for this
        self.log.append(("violation", violation.message, violation.blocking))
