"""``Judge``: ask a language model for a JSON verdict on a piece of text.

The LLM-judged processors (``ModerationProcessor``, ``PromptInjectionDetector``,
``LanguageDetector``) call their model through the model protocol
(``model.stream(ModelRequest(...))``), collect the streamed text, and read a
JSON object out of it. Models wrap JSON in prose or code fences; the reader
takes the first ``{`` to the last ``}``. Anything else (no object, invalid JSON,
a model error) is a ``JudgeError``: typed, logged, and handled by the
processor's ``on_judge_error`` policy (``"allow"``: fail open, as Mastra's
detectors; ``"block"``: a tripwire).

Every call is counted (``Judge.calls``), so a test or a benchmark can check that
the judge is asked per window, never per chunk.
"""

from __future__ import annotations

import json
from typing import Any, Final

from ..._errors import ProcessionError
from ...data import (
    PromptSystemMessage,
    PromptTextPart,
    PromptUserMessage,
    TextDeltaChunk,
)
from ...models import LanguageModel, ModelRequest, resolve_model

__all__ = ["Judge", "JudgeError", "parse_verdict", "scores_of"]

_MAX_QUOTED: Final = 200
"""Characters of a malformed verdict quoted in a ``JudgeError``."""


class JudgeError(ProcessionError):
    """A judge model failed to give a usable verdict: the call failed, or its
    answer held no JSON object. ``processor_id`` names the processor; the
    model's error, if any, is the ``__cause__``."""

    def __init__(self, processor_id: str, problem: str) -> None:
        super().__init__(f"{processor_id}: the judge model {problem}")
        self.processor_id = processor_id
        self.problem = problem


def parse_verdict(text: str) -> dict[str, Any] | None:
    """The JSON object in a model's answer (fences and prose around it
    ignored), or None when there is none."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class Judge:
    """A model asked for verdicts with one fixed system prompt.

    ``await judge.ask(text)`` makes one model call at temperature 0 with the
    system prompt and ``text`` as the user message, and returns the JSON object
    the model answered. ``calls`` counts every call made (failed ones too).
    ``model`` may be a ``"provider/model-id"`` string: it is resolved at the
    first call (so building a processor needs no credentials).
    """

    __slots__ = ("_model", "_processor_id", "_system", "calls")

    def __init__(
        self, model: LanguageModel | str, system: str, processor_id: str
    ) -> None:
        self._model = model
        self._system = system
        self._processor_id = processor_id
        self.calls = 0

    @property
    def model(self) -> LanguageModel:
        """The judge model (a model id is resolved now, once)."""
        if isinstance(self._model, str):
            self._model = resolve_model(self._model)
        return self._model

    @property
    def system(self) -> str:
        """The system prompt every call sends."""
        return self._system

    async def ask(self, text: str) -> dict[str, Any]:
        """The verdict on ``text``. Checkpoints (the model call).

        Raises:
            JudgeError: the call failed or the answer held no JSON object
                (the processor logs it and applies its policy).
        """
        self.calls += 1
        request = ModelRequest(
            prompt=[
                PromptSystemMessage(self._system),
                PromptUserMessage([PromptTextPart(text)]),
            ],
            settings={"temperature": 0},
        )
        pieces: list[str] = []
        model = self.model  # a bad model id is a ConfigurationError, not a verdict
        try:
            async with model.stream(request) as response:
                async for chunk in response:
                    if isinstance(chunk, TextDeltaChunk):
                        pieces.append(chunk.payload.text)
        except Exception as error:
            raise JudgeError(
                self._processor_id, f"call failed: {type(error).__name__}: {error}"
            ) from error
        answer = "".join(pieces)
        verdict = parse_verdict(answer)
        if verdict is None:
            quoted = answer if len(answer) <= _MAX_QUOTED else answer[:_MAX_QUOTED]
            raise JudgeError(self._processor_id, f"answered no JSON object: {quoted!r}")
        return verdict


def scores_of(verdict: dict[str, Any], key: str = "categories") -> dict[str, float]:
    """Category scores from a verdict, as ``{"name": score}``: the verdict may
    give ``{"categories": {"hate": 0.9}}`` or Mastra's
    ``{"categories": [{"category": "hate", "score": 0.9}]}``; entries that are
    not a name with a number are ignored (a judge may add noise)."""
    raw = verdict.get(key)
    out: dict[str, float] = {}
    if isinstance(raw, dict):
        items = list(raw.items())
    elif isinstance(raw, list):
        items = [
            (item.get("category", item.get("type")), item.get("score"))
            for item in raw
            if isinstance(item, dict)
        ]
    else:
        return out
    for name, score in items:
        if (
            isinstance(name, str)
            and isinstance(score, int | float)
            and not isinstance(score, bool)
        ):
            out[name] = float(score)
    return out
