"""The demo's support agent, served over HTTP with memory on SQLite.

    procession serve examples/support.py:agent
    # then open http://127.0.0.1:4111/ (the chat page), or:
    curl -N -X POST localhost:4111/api/agents/support-agent/stream \\
         -H 'content-type: application/json' \\
         -d '{"messages": "Where is my order A-1042?",
              "memory": {"thread": "t-1", "resource": "ada"}}'

The model is scripted (no API key, no network): a question about an order
calls the ``lookup_order`` tool, gives a thin answer that ``quality-check``
sends back for a retry, then a good one whose e-mail address the built-in
``pii-detector`` hides; a question about the router trips the built-in
``regex-filter``. Conversations are kept in ``support-memory.db`` (or
``$PROCESSION_SUPPORT_DB``); every call names its thread and resource.
"""

from __future__ import annotations

import os

from procession._demo import ServedDemoModel, demo_agent
from procession.memory import Memory, SqliteStorage

agent = demo_agent(
    ServedDemoModel(),
    memory=Memory(
        storage=SqliteStorage(
            os.environ.get("PROCESSION_SUPPORT_DB", "support-memory.db")
        )
    ),
)
