"""The Mastra protocol: SSE frames of Mastra chunks, the generate JSON, the
agent listing ``@mastra/client-js`` reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .._secrets import redact
from ..chunks import (
    Chunk,
    StartChunk,
    StartPayload,
    StepStartChunk,
    StepStartPayload,
    TextDeltaChunk,
    TextDeltaPayload,
    Usage,
    to_wire,
)
from ..runtime import Agent, AgentResult
from ..wire import message_to_wire
from ._http import dumps, json_string

__all__ = [
    "DONE_FRAME",
    "KEEPALIVE_FRAME",
    "MastraFrames",
    "agent_info",
    "error_frame",
    "generate_body",
    "mastra_frame",
    "plain_delta",
    "usage_wire",
]

DONE_FRAME: Final = b"data: [DONE]\n\n"
"""The last frame of a stream that ended cleanly (as the AI SDK's
``JsonToSseTransformStream`` writes it)."""
KEEPALIVE_FRAME: Final = b": keepalive\n\n"
"""An SSE comment: clients ignore it; proxies see the connection is alive."""


def mastra_frame(chunk: Chunk, run_id: str) -> bytes:
    """One SSE frame, ``data: {"type","runId","from","payload"}\\n\\n``, of
    ``chunk`` in Mastra's JSON (``procession.chunks.to_wire``). An envelope
    chunk without a run id (one a processor built) gets the run's."""
    wire = to_wire(chunk)
    if "payload" in wire or "object" in wire or wire["type"].startswith("data-"):
        wire.setdefault("runId", run_id)
        wire.setdefault("from", "AGENT")
    return b"data: " + dumps(wire) + b"\n\n"


def plain_delta(chunk: Chunk) -> TextDeltaChunk | None:
    """``chunk`` if it is a plain text delta (exactly the class, its payload
    with no provider metadata and no unknown keys), the chunk the per-run
    encoders write from its strings; else None."""
    if type(chunk) is not TextDeltaChunk:
        return None
    payload = chunk.payload
    if (
        type(payload) is TextDeltaPayload
        and payload.provider_metadata is None
        and not payload.extra
    ):
        return chunk
    return None


class MastraFrames:
    """``mastra_frame(chunk, run_id)`` for the chunks of one run, with the
    envelope's fixed bytes (the type, the run id, ``from``) encoded once per
    run: a plain text delta (no metadata, nothing extra) costs two JSON
    strings and a concatenation, the run's own ``start`` nothing, its
    ``step-start`` one JSON string; every other chunk goes the general way.
    The bytes are always ``mastra_frame``'s (a property test holds them
    equal)."""

    __slots__ = ("_bare_head", "_head", "_run", "_run_tail", "run_id")

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        run = json_string(run_id).encode()
        # A delta with the run's id: {"type","runId","from","payload"}; one
        # with none gets the id last (setdefault), as mastra_frame writes it.
        self._head = (
            b'data: {"type":"text-delta","runId":' + run + b',"from":"AGENT",'
            b'"payload":{"id":'
        )
        self._bare_head = b'data: {"type":"text-delta","from":"AGENT","payload":{"id":'
        self._run_tail = b'},"runId":' + run + b"}\n\n"
        self._run = run

    def __call__(self, chunk: Chunk) -> bytes:
        if type(chunk) is StepStartChunk or type(chunk) is StartChunk:
            return self._lifecycle(chunk)
        delta = plain_delta(chunk)
        if (
            delta is not None
            and delta.from_ == "AGENT"
            and delta.metadata is None
            and not delta.extra
        ):
            payload = delta.payload
            body = (
                json_string(payload.id) + ',"text":' + json_string(payload.text)
            ).encode()
            run_id = delta.run_id
            if run_id == self.run_id:
                return self._head + body + b"}}\n\n"
            if run_id is None:
                return self._bare_head + body + self._run_tail
        return mastra_frame(chunk, self.run_id)

    def _lifecycle(self, chunk: StartChunk | StepStartChunk) -> bytes:
        """The run's own ``start`` / ``step-start`` (its id, nothing a
        processor added), else the general way."""
        if (
            chunk.run_id != self.run_id
            or chunk.from_ != "AGENT"
            or chunk.metadata is not None
            or chunk.extra
        ):
            return mastra_frame(chunk, self.run_id)
        payload = chunk.payload
        if type(payload) is StartPayload:
            if not payload.extra:
                return (
                    b'data: {"type":"start","runId":'
                    + self._run
                    + (b',"from":"AGENT","payload":{}}\n\n')
                )
        elif (
            type(payload) is StepStartPayload
            and type(message_id := payload.message_id) is str
            and payload.request is None
            and payload.warnings is None
            and payload.started_at is None
            and payload.input_messages is None
            and not payload.extra
        ):
            return (
                b'data: {"type":"step-start","runId":'
                + self._run
                + b',"from":"AGENT","payload":{"messageId":'
                + json_string(message_id).encode()
                + b"}}\n\n"
            )
        return mastra_frame(chunk, self.run_id)


def error_frame(message: str, run_id: str) -> bytes:
    """An ``error`` chunk frame for a failure of the server itself while it
    streamed: the message only (redacted), never a traceback."""
    wire = {
        "type": "error",
        "runId": run_id,
        "from": "AGENT",
        "payload": {"error": {"name": "Error", "message": redact(message)}},
    }
    return b"data: " + dumps(wire) + b"\n\n"


def usage_wire(usage: Usage) -> dict[str, Any]:
    """AI SDK ``LanguageModelUsage`` JSON (counts never reported left out)."""
    fields = {
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "totalTokens": usage.total_tokens,
        "reasoningTokens": usage.reasoning_tokens,
        "cachedInputTokens": usage.cached_input_tokens,
    }
    return {key: value for key, value in fields.items() if value is not None}


def _tripwire(result: AgentResult) -> dict[str, Any] | None:
    tripwire = result.tripwire
    if tripwire is None:
        return None
    return {
        "reason": tripwire.reason,
        "retry": tripwire.retry,
        "metadata": tripwire.metadata,
        "processorId": tripwire.processor_id,
    }


def _tool_chunk(kind: str, run_id: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": kind, "runId": run_id, "from": "AGENT", "payload": dict(payload)}


def generate_body(result: AgentResult) -> dict[str, Any]:
    """Mastra's ``generate`` JSON (its ``getFullOutput()``): ``text``,
    ``finishReason``, ``usage``, ``totalUsage``, ``steps``, ``toolCalls`` and
    ``toolResults`` (as Mastra chunks), ``reasoningText``, ``tripwire`` when a
    processor blocked the run, ``response.dbMessages`` (the response's
    ``MastraDBMessage``s) and ``runId``."""
    run_id = result.run_id
    steps = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for step in result.steps:
        step_calls = [
            _tool_chunk(
                "tool-call",
                run_id,
                {"toolCallId": c.tool_call_id, "toolName": c.tool_name, "args": c.args},
            )
            for c in step.tool_calls
        ]
        step_results = [
            _tool_chunk(
                "tool-result",
                run_id,
                {
                    "toolCallId": r.tool_call_id,
                    "toolName": r.tool_name,
                    "args": r.args,
                    "result": r.result,
                    **({"isError": True} if r.is_error else {}),
                },
            )
            for r in step.tool_results
        ]
        if step.finish_reason != "retry":
            calls += step_calls
            results += step_results
        entry: dict[str, Any] = {
            "stepNumber": step.step_number,
            "text": step.text,
            "reasoningText": step.reasoning or None,
            "toolCalls": step_calls,
            "toolResults": step_results,
            "finishReason": step.finish_reason,
            "usage": usage_wire(step.usage or Usage()),
        }
        if step.tripwire is not None:
            entry["tripwire"] = {
                "reason": step.tripwire.reason,
                "retry": step.tripwire.retry,
                "metadata": step.tripwire.metadata,
                "processorId": step.tripwire.processor_id,
            }
        steps.append({k: v for k, v in entry.items() if v is not None})
    reasoning = "".join(s.reasoning for s in result.steps if s.finish_reason != "retry")
    body: dict[str, Any] = {
        "runId": run_id,
        "text": result.text,
        "finishReason": result.finish_reason,
        "usage": usage_wire(result.usage),
        "totalUsage": usage_wire(result.usage),
        "steps": steps,
        "toolCalls": calls,
        "toolResults": results,
        "reasoningText": reasoning or None,
        "tripwire": _tripwire(result),
        "response": {
            "dbMessages": [message_to_wire(m) for m in result.response_messages]
        },
    }
    return {k: v for k, v in body.items() if v is not None}


def _processors(agent: Agent, lane: str) -> list[dict[str, str]]:
    value = getattr(agent, lane)
    if value is None or (callable(value) and not isinstance(value, list | tuple)):
        # A lane chosen per request (a callable of the request context) has
        # no fixed list to show.
        return []
    out = []
    for processor in value:
        ident = getattr(processor, "id", None)
        if not isinstance(ident, str):
            continue
        name = getattr(processor, "name", None)
        out.append(
            {"id": ident, "name": name if isinstance(name, str) and name else ident}
        )
    return out


def agent_info(agent: Agent) -> dict[str, Any]:
    """What ``GET /api/agents`` says of ``agent``, in the shape of
    ``@mastra/client-js``'s ``GetAgentResponse``: ``id``, ``name``,
    ``description``, ``instructions``, ``tools``, the model, and the
    processors by lane (``inputProcessors``, ``outputProcessors`` and our
    ``errorProcessors``, each ``[{id, name}]``)."""
    description = getattr(agent, "description", None)
    info: dict[str, Any] = {
        "id": agent.id,
        "name": agent.name,
        "instructions": "\n\n".join(agent.instructions),
        "tools": {
            name: {"id": name, "description": tool.description}
            # A tool source's tools while it is open (the app's lifespan
            # opens them), none before.
            for name, tool in agent.tools.snapshot(skip_closed=True).items()
        },
        "workflows": {},
        "agents": {},
        "provider": agent.model.provider,
        "modelId": agent.model.model_id,
        "modelVersion": "v2",
        "inputProcessors": _processors(agent, "input_processors"),
        "outputProcessors": _processors(agent, "output_processors"),
        "errorProcessors": _processors(agent, "error_processors"),
        "defaultOptions": {},
        "defaultGenerateOptionsLegacy": {},
        "defaultStreamOptionsLegacy": {},
        # procession's: whether a body's memory: {thread, resource} is kept.
        "memory": agent.memory is not None,
    }
    if isinstance(description, str) and description:
        info["description"] = description
    return info
