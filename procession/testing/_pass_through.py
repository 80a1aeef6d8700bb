"""``PassThrough``: an output processor that changes nothing, the baseline every
processor benchmark measures against."""

from __future__ import annotations

from typing import Any

from ..processors import ProcessOutputStreamArgs

__all__ = ["PassThrough", "SyncPassThrough"]


class PassThrough:
    """Returns every chunk unchanged from an ``async`` stream hook (what a
    typical processor's hook costs the pipeline). ``id`` is ``pass-<index>``,
    so several in one list do not collide."""

    def __init__(self, index: int = 0) -> None:
        self.id = f"pass-{index}"

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        """The chunk, unchanged. Does not checkpoint."""
        return args.part


class SyncPassThrough:
    """``PassThrough`` with a plain (sync) hook, the cheapest a hook can be."""

    def __init__(self, index: int = 0) -> None:
        self.id = f"pass-{index}"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        return args.part
