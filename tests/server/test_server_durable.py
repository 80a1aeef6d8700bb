"""``create_app(durable=...)`` refuses, at start, agents whose durable runs
would have nowhere to live (no storage, or an in-memory SQLite database): a
durable run never silently runs as a plain one. Across processes:
``test_server_durable_replicas.py``."""

from __future__ import annotations

import pytest

from procession import Agent, ConfigurationError
from procession.memory import Memory, SqliteStorage
from procession.runtime import Durable
from procession.server import create_app
from procession.testing import ScriptedModel


def test_a_durable_app_needs_storage_other_processes_read(tmp_path: object) -> None:
    bare = Agent(id="bare", model=ScriptedModel(["hi"]))
    with pytest.raises(ConfigurationError, match=r"agent 'bare' runs durable runs"):
        create_app([bare], durable=True)
    in_memory = Agent(
        id="mem",
        model=ScriptedModel(["hi"]),
        memory=Memory(storage=SqliteStorage(":memory:")),
    )
    with pytest.raises(ConfigurationError, match=r"agent 'mem' .* in-memory SQLite"):
        create_app([in_memory], durable=Durable(lease_s=2))
    # An agent durable by itself is held to the same rule by any app.
    own = Agent(id="own", model=ScriptedModel(["hi"]), durable=True)
    with pytest.raises(ConfigurationError, match=r"agent 'own' runs durable runs"):
        create_app([own])
    with pytest.raises(ConfigurationError, match=r"durable must be True, False"):
        create_app([bare], durable="yes")  # type: ignore[arg-type]
    # Not durable: nothing asked of the storage.
    assert create_app([bare]).durable is None
