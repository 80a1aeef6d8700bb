"""A stream processor that holds text back and flushes it late: the text
the client reads after the chunk it was held for belongs to that step
(tests/runtime/test_agent_regressions.py, test_stream_end.py)."""

from __future__ import annotations

from typing import Any

from procession import Processor
from procession.chunks import TextDeltaChunk, TextDeltaPayload


class Batch(Processor):
    """Holds text deltas back and flushes them as one on ``flush_on``."""

    id = "batch"

    def __init__(self, flush_on: str) -> None:
        self.flush_on = flush_on

    def process_output_stream(self, args: Any) -> Any:
        part = args.part
        if isinstance(part, TextDeltaChunk):
            args.state.setdefault("held", []).append(part.payload.text)
            return None
        held = args.state.get("held")
        if part.type == self.flush_on and held:
            args.state["held"] = []
            flushed = TextDeltaChunk(
                payload=TextDeltaPayload(id="b", text="".join(held))
            )
            return [flushed, part]
        return part
