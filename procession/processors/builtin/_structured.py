"""``StructuredOutput``: the final answer as a checked value (``result.object``).

The model answers in JSON; at the end of each step that calls no tool,
``process_output_step`` reads the step's text as JSON and checks it against the
schema (``procession.wire.ValueSchema``: a strict cattrs converter for an attrs
class, JSON Schema validation for a dict, the checks tool arguments use). A
value that fits is written to the client as an ``object-result`` chunk, and the
run's ``result.object`` is the last one the client received in a kept attempt.
One that does not fit asks for a retry (``args.abort(reason, retry=True)``)
with the problems as the reason, which the runtime sends the model as feedback
(within the run's ``max_processor_retries`` budget).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias

from ..._errors import ConfigurationError
from ...data import ObjectResultChunk
from ...wire import ValueMismatch, ValueSchema, short_repr
from .._contract import ProcessInputStepArgs, Processor, ProcessOutputStepArgs

__all__ = ["StructuredOutput", "StructuredOutputErrorStrategy", "read_json"]

StructuredOutputErrorStrategy: TypeAlias = Literal["strict", "warn", "fallback"]
"""What a step that still does not fit does once ``max_retries`` are used:
a tripwire, a violation (no object), or ``fallback_value`` as the object."""

_TAG: Final = "structured-output"
"""The system-message tag of the schema instructions."""
_FENCE: Final = "```"


def read_json(text: str) -> tuple[bool, Any]:
    """``(True, value)`` for the JSON value in a model's answer: the whole text,
    else a fenced block's body, else the first ``{``/``[`` to the last
    ``}``/``]``; ``(False, None)`` when none parses."""
    stripped = text.strip()
    candidates = [stripped]
    if _FENCE in stripped:
        body = stripped.split(_FENCE, 2)[1]
        candidates.append(body.split("\n", 1)[1] if "\n" in body else body)
    for opening, closing in (("{", "}"), ("[", "]")):
        start, end = stripped.find(opening), stripped.rfind(closing)
        if 0 <= start < end:
            candidates.append(stripped[start : end + 1])
    for candidate in candidates:
        try:
            return True, json.loads(candidate)
        except ValueError:
            continue
    return False, None


class StructuredOutput(Processor):
    """The final answer parsed as JSON and checked against ``schema`` (Mastra's
    ``StructuredOutputProcessor``, without a second model: the agent's own
    model answers in JSON and is asked again when it does not fit).

    Register it as an output processor; register the same instance as an input
    processor too to send the model the schema (``instructions``, on every
    step, as a tagged system message)::

        shape = StructuredOutput(Weather)
        agent = Agent(..., input_processors=[shape], output_processors=[shape],
                      max_processor_retries=2)
        result = await agent.generate("Weather in Oslo?")
        result.object  # Weather(city='Oslo', ...)

    Options:

    * ``schema`` (required): an attrs class (the object is an instance of it;
      checked strictly: ``"5"`` is not an int) or a JSON Schema dict (the
      object is the decoded JSON);
    * ``error_strategy``: ``"strict"`` (default: a tripwire ``[StructuredOutput]
      ...`` once retries are used up), ``"warn"`` (a violation, no object),
      ``"fallback"`` (``fallback_value`` becomes the object, the chunk's
      metadata says ``{"fallback": True}``);
    * ``max_retries``: how many times a step that does not fit is sent back
      (default 2) while ``args.retry_count`` (the run's processor retries so
      far) is below it; each retry also needs the run's
      ``max_processor_retries`` budget, without which the retry is a tripwire;
    * ``instructions``: the system message sent with the schema (default: a
      strict "answer with only a JSON value matching this schema").

    The retry reason, which the model sees as feedback: ``[StructuredOutput]
    The answer did not match the schema: <problems>. Answer again with only a
    JSON value matching the schema.`` A step that calls tools is not checked.
    Cost: nothing per chunk (it has no stream hook); one JSON parse and check
    per final step.
    """

    id = "structured-output"

    def __init__(
        self,
        schema: type[Any] | Mapping[str, Any],
        *,
        error_strategy: StructuredOutputErrorStrategy = "strict",
        fallback_value: Any = None,
        max_retries: int = 2,
        instructions: str | None = None,
    ) -> None:
        if error_strategy not in ("strict", "warn", "fallback"):
            raise ConfigurationError(
                f"error_strategy must be one of 'strict', 'warn', 'fallback'; "
                f"got {error_strategy!r}"
            )
        if isinstance(max_retries, bool) or not isinstance(max_retries, int):
            raise ConfigurationError(f"max_retries must be an int, got {max_retries!r}")
        if max_retries < 0:
            raise ConfigurationError(
                f"max_retries must be 0 or more, got {max_retries}"
            )
        self.checker = ValueSchema.of(schema, owner="StructuredOutput")
        self.schema = schema
        self.error_strategy = error_strategy
        self.fallback_value = fallback_value
        self.max_retries = max_retries
        self.instructions = instructions or (
            "Answer with only a JSON value matching this JSON Schema: no prose, "
            "no code fence.\n" + json.dumps(self.checker.schema, sort_keys=True)
        )

    def process_input_step(self, args: ProcessInputStepArgs) -> None:
        """Send the schema instructions with every model call."""
        args.message_list.clear_system_messages(_TAG)
        args.message_list.add_system(self.instructions, tag=_TAG)

    async def process_output_step(self, args: ProcessOutputStepArgs) -> None:
        """Check a final step's text; write the object, or ask again.
        Checkpoints once, writing the object (cancellation leaves it unwritten)."""
        if args.tool_calls:
            return  # not the answer yet: the model is calling tools
        ok, value = read_json(args.text)
        if not ok:
            problem = f"the text is not JSON: {short_repr(args.text)}"
        else:
            try:
                parsed = self.checker.check(value)
            except ValueMismatch as mismatch:
                problem = str(mismatch)
            else:
                await self._emit(args, parsed)
                return
        reason = (
            f"[StructuredOutput] The answer did not match the schema: {problem}. "
            f"Answer again with only a JSON value matching the schema."
        )
        metadata = {"problem": problem, "strategy": self.error_strategy}
        if args.retry_count < self.max_retries:
            args.abort(reason, retry=True, metadata=metadata)
        if self.error_strategy == "strict":
            args.abort(reason, metadata=metadata)
        if self.error_strategy == "warn":
            args.report_violation(reason, metadata)
            return
        await self._emit(args, self.fallback_value, fallback=True)

    async def _emit(self, args: Any, value: Any, *, fallback: bool = False) -> None:
        metadata: dict[str, Any] = {"from": "structured-output"}
        if fallback:
            metadata["fallback"] = True
        assert args.writer is not None  # the runtime always gives one
        await args.writer.custom(ObjectResultChunk(object=value, metadata=metadata))
