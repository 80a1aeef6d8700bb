"""``TokenLimiter``: keep a call's input and its streamed output within a token
budget, with a pluggable counter."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final, Literal

from ..._errors import ConfigurationError
from ...data import DataChunk, Message, TextDeltaChunk, TextDeltaPayload, message_text
from .._contract import ProcessInputArgs, Processor, ProcessOutputStreamArgs

__all__ = ["TokenCounter", "TokenLimiter", "estimate_tokens"]

TokenCounter = Callable[[str], int]
"""How many tokens a text is: ``counter(text) -> int``."""

_CHARS_PER_TOKEN: Final = 4
_MESSAGE_OVERHEAD: Final = 4
"""Tokens each message costs beyond its text (role and framing; Mastra
counts 3.8)."""


def estimate_tokens(text: str) -> int:
    """The default counter: one token per four characters, rounded up (a fast
    heuristic, close for English; exact counts need the model's tokenizer,
    e.g. ``tiktoken``'s, passed as ``counter``: it downloads its encoding on
    first use, so it fails offline)."""
    return math.ceil(len(text) / _CHARS_PER_TOKEN)


class TokenLimiter(Processor):
    """Keeps a call within ``limit`` tokens (Mastra's ``TokenLimiterProcessor``).

    * Input (``process_input``): the newest messages that fit in ``limit``
      minus the system messages' tokens are kept, the older ones dropped; if
      none fits, a tripwire.
    * Output stream: text deltas are counted; past ``limit``, ``strategy``
      ``"truncate"`` (default) stops the text (other chunks pass) and emits one
      transient ``data-token-limit-reached`` chunk ``{processorId, limit,
      tokens}``; ``"abort"`` ends the run with the tripwire ``Token limit of
      <limit> exceeded (current: <n>)``.

    ``counter``: a callable ``text -> tokens``; default ``estimate_tokens``
    (four characters a token). With the default, the output is counted on the
    whole text so far and cut at the exact character, so every split of the
    text gives the same output; a custom counter is summed per delta (Mastra's
    ``countMode="cumulative"``) and the delta that crosses the limit is dropped
    whole. Cost: a length (or one counter call) per delta.
    """

    id = "token-limiter"

    def __init__(
        self,
        limit: int,
        *,
        strategy: Literal["truncate", "abort"] = "truncate",
        counter: TokenCounter | None = None,
    ) -> None:
        if not isinstance(limit, int) or limit < 1:
            raise ConfigurationError(
                f"TokenLimiter: limit must be a positive integer, got {limit!r}"
            )
        if strategy not in ("truncate", "abort"):
            raise ConfigurationError(
                f"strategy must be 'truncate' or 'abort', got {strategy!r}"
            )
        self.limit = limit
        self.strategy = strategy
        self.counter: TokenCounter = counter or estimate_tokens
        self._key = f"{self.id}:used"

    # input ------------------------------------------------------------------------

    def process_input(self, args: ProcessInputArgs) -> list[Message] | None:
        """The newest messages within the budget (``None``: all fit)."""
        count = self.counter
        system = sum(count(m.content) + _MESSAGE_OVERHEAD for m in args.system_messages)
        budget = self.limit - system
        if budget <= 0:
            args.abort(
                "TokenLimiter: System messages alone exceed token limit",
                metadata={"systemTokens": system, "limit": self.limit},
            )
        kept: list[Message] = []
        used = 0
        for message in reversed(args.messages):
            cost = count(message_text(message)) + _MESSAGE_OVERHEAD
            if used + cost > budget:
                break
            used += cost
            kept.append(message)
        if args.messages and not kept:
            args.abort(
                "TokenLimiter: No messages fit within the remaining token budget",
                metadata={"limit": self.limit, "budget": budget},
            )
        if len(kept) == len(args.messages):
            return None
        return list(reversed(kept))

    # output -----------------------------------------------------------------------

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        """Count text deltas; stop or trip past the limit."""
        part = args.part
        if part.__class__ is not TextDeltaChunk:
            return part
        assert isinstance(part, TextDeltaChunk)
        state = args.state
        used = state.get(self._key)
        if used is None or used[2] != args.retry_count:
            used = state[self._key] = [0, False, args.retry_count]  # chars or tokens
        if used[1]:
            return None  # the limit was reached: the text stops here
        text = part.payload.text
        if self.counter is estimate_tokens:
            chars = used[0] + len(text)
            tokens = math.ceil(chars / _CHARS_PER_TOKEN)
            room = self.limit * _CHARS_PER_TOKEN - used[0]
            used[0] = chars
        else:
            tokens = used[0] + self.counter(text)
            room = 0
            used[0] = tokens
        if tokens <= self.limit:
            return part
        if self.strategy == "abort":
            args.abort(f"Token limit of {self.limit} exceeded (current: {tokens})")
        used[1] = True
        if args.writer is not None:
            args.writer.custom_nowait(
                DataChunk(
                    type="data-token-limit-reached",
                    data={
                        "processorId": self.id,
                        "limit": self.limit,
                        "tokens": tokens,
                    },
                    transient=True,
                )
            )
        if room <= 0:
            return None
        payload = part.payload
        return TextDeltaChunk(
            payload=TextDeltaPayload(
                id=payload.id,
                text=text[:room],
                provider_metadata=payload.provider_metadata,
                extra=payload.extra,
            ),
            run_id=part.run_id,
            from_=part.from_,
            metadata=part.metadata,
            extra=part.extra,
        )
