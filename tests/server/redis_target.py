"""The app the multi-replica tests serve in server processes of their own
(``python -m procession serve tests/server/redis_target.py:app``): one agent
on a slow scripted model (``PROCESSION_TEST_WORDS`` words, one every
``PROCESSION_TEST_EVERY_S`` seconds, per call), on the Redis bus at
``PROCESSION_TEST_REDIS_URL`` under ``PROCESSION_TEST_REDIS_PREFIX``, with a
lease of ``PROCESSION_TEST_LEASE_S`` seconds and a grace for unattended runs
of ``PROCESSION_TEST_GRACE_S`` (30)."""

from __future__ import annotations

import os
from typing import Any

from procession.chunks import TextDeltaChunk, TextDeltaPayload
from procession.runtime import Agent
from procession.server import RedisRunBus, create_app
from procession.testing import Delay, ScriptedModel

WORDS = int(os.environ.get("PROCESSION_TEST_WORDS", "40"))
EVERY_S = float(os.environ.get("PROCESSION_TEST_EVERY_S", "0.05"))


def slow_turn(words: int = WORDS, every_s: float = EVERY_S) -> list[Any]:
    """``words`` text deltas ``w0 `` ``w1 `` ..., each after ``every_s``."""
    items: list[Any] = []
    for i in range(words):
        items += [
            Delay(every_s),
            TextDeltaChunk(payload=TextDeltaPayload(id="t", text=f"w{i} ")),
        ]
    return items


def _app() -> Any:
    bus = RedisRunBus(
        os.environ["PROCESSION_TEST_REDIS_URL"],
        lease_s=float(os.environ.get("PROCESSION_TEST_LEASE_S", "1")),
        prefix=os.environ.get("PROCESSION_TEST_REDIS_PREFIX", "procession-test:"),
    )
    agent = Agent(
        id="helper",
        instructions="Be brief.",
        model=ScriptedModel([slow_turn() for _ in range(50)]),
    )
    grace_s = float(os.environ.get("PROCESSION_TEST_GRACE_S", "30"))
    return create_app([agent], bus=bus, keepalive_s=0, resume_grace_s=grace_s)


app = _app() if "PROCESSION_TEST_REDIS_URL" in os.environ else None
