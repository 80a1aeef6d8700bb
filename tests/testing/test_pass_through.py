"""``PassThrough`` / ``SyncPassThrough`` change nothing, in every mode."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from procession.actors import open_output_pipeline
from procession.chunks import text_delta
from procession.testing import PassThrough, SyncPassThrough


async def test_pass_throughs_deliver_every_chunk_unchanged() -> None:
    chunks = [text_delta(f"{i} ") for i in range(10)]

    async def source() -> AsyncIterator[Any]:
        for chunk in chunks:
            yield chunk

    for mode in ("adaptive", "fused", "actors"):
        processors: list[PassThrough | SyncPassThrough] = [
            PassThrough(0),
            SyncPassThrough(1),
            PassThrough(2),
        ]
        assert [p.id for p in processors] == ["pass-0", "pass-1", "pass-2"]
        async with open_output_pipeline(processors, source(), mode=mode) as stream:
            assert [c async for c in stream] == chunks
