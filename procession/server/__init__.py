"""Serve agents over HTTP: a framework-free ASGI 3 app, two wire protocols.

``create_app(agents=[...])`` returns an ASGI app; serve it with hypercorn's
trio worker (``await serve(app)`` inside ``trio.run``, or
``hypercorn --worker-class trio module:app``) or ``procession serve
module:attr``. uvicorn runs asyncio only and cannot serve it; Starlette or
FastAPI (on hypercorn's trio worker) can mount it.

Routes:

* Mastra (``@mastra/client-js``): ``GET /api/agents``, ``GET
  /api/agents/{agentId}``, ``POST /api/agents/{agentId}/stream`` (SSE of
  Mastra chunks, ``data: [DONE]`` at the end), ``POST
  /api/agents/{agentId}/generate`` (JSON), ``POST
  /api/agents/{agentId}/runs/{runId}/cancel``.
  With resume on, ``GET /api/agents/{agentId}/runs/{runId}/stream`` replays
  and follows a run.
* AI SDK UI message stream v1 (``useChat``): ``POST /api/chat`` (the only
  agent) and ``POST /api/agents/{agentId}/chat``; ``GET /api/chat/{id}/stream``
  resumes the chat's live run (204 when nothing is running).
* Memory: ``GET /api/memory/threads?resourceId=...``, ``GET
  /api/memory/threads/{threadId}`` and ``GET
  /api/memory/threads/{threadId}/messages``, the resource's own threads only.
* MCP (streamable HTTP, stateless): ``/api/mcp`` serves each agent as the
  tool ``ask_<agent id>`` (``create_app(mcp=...)``: on when the ``mcp`` extra
  is installed), behind the same tokens; a call acts for its token's
  resource. The app's lifespan opens the agents' ``MCPTools``.
* ``GET /``: a small chat page (no build step) showing what processors did.

Resume (``create_app(resume=True)``) keeps runs behind a ``RunBus``;
``InProcessRunBus`` is the one-process implementation, ``RedisRunBus``
(``create_app(bus="redis://...")``, ``procession serve --bus``; the ``redis``
extra) the one for several server processes: resume and cancel on any
replica, a lease per run, runs of a dead replica marked failed. A run paused
for approval and answered (on any replica) goes on under the same run: its
continuation is published under the run's key (the chat's, for a chat), so
the run's followers on every replica read it, its frame ids numbered on from
the pause (a follower that read the pause reconnects with its last id).
Each request is an
OpenTelemetry span when a recording provider exists, the run's
``invoke_agent`` span its child.

``serve_workers`` / ``serve_worker`` are ``procession serve --workers N``: N
processes accepting on one socket (``parse_workers`` reads the option,
``check_workers`` refuses what one process would hold alone, ``WorkerSpec``
is what a worker is told).

Needs the ``server`` extra for ``serve`` (hypercorn); the app itself needs
only the core install.
"""

from .._faces import fixup_module_metadata as _fixup_module_metadata
from ._app import ProcessionApp as ProcessionApp
from ._bus import InProcessRunBus as InProcessRunBus
from ._bus import ReplayGap as ReplayGap
from ._bus import RunBus as RunBus
from ._bus import RunBusError as RunBusError
from ._bus import RunLog as RunLog
from ._bus import RunPublisher as RunPublisher
from ._bus import RunSubscription as RunSubscription
from ._bus_redis import RedisRunBus as RedisRunBus
from ._create import create_app as create_app
from ._mastra import DONE_FRAME as DONE_FRAME
from ._mastra import KEEPALIVE_FRAME as KEEPALIVE_FRAME
from ._mastra import agent_info as agent_info
from ._mastra import generate_body as generate_body
from ._mastra import mastra_frame as mastra_frame
from ._resume import BUS_ERROR_NAME as BUS_ERROR_NAME
from ._resume import GAP_ERROR_NAME as GAP_ERROR_NAME
from ._resume import RUN_LOST_ERROR_NAME as RUN_LOST_ERROR_NAME
from ._security import TOKENS_ENV as TOKENS_ENV
from ._security import Cors as Cors
from ._security import Token as Token
from ._security import check_bind as check_bind
from ._serve import GC_THRESHOLD as GC_THRESHOLD
from ._serve import load_target as load_target
from ._serve import serve as serve
from ._serve import tune_gc as tune_gc
from ._ui_stream import UI_STREAM_HEADERS as UI_STREAM_HEADERS
from ._ui_stream import UiStreamEncoder as UiStreamEncoder
from ._ui_stream import ui_chunks as ui_chunks
from ._ui_stream import ui_frame as ui_frame
from ._workers import WorkerSpec as WorkerSpec
from ._workers import check_workers as check_workers
from ._workers import parse_workers as parse_workers
from ._workers import serve_worker as serve_worker
from ._workers import serve_workers as serve_workers

__all__ = [
    "BUS_ERROR_NAME",
    "Cors",
    "DONE_FRAME",
    "GC_THRESHOLD",
    "GAP_ERROR_NAME",
    "InProcessRunBus",
    "KEEPALIVE_FRAME",
    "ProcessionApp",
    "RUN_LOST_ERROR_NAME",
    "RedisRunBus",
    "ReplayGap",
    "RunBus",
    "RunBusError",
    "RunLog",
    "RunPublisher",
    "RunSubscription",
    "TOKENS_ENV",
    "Token",
    "UI_STREAM_HEADERS",
    "UiStreamEncoder",
    "WorkerSpec",
    "agent_info",
    "check_bind",
    "check_workers",
    "create_app",
    "generate_body",
    "load_target",
    "mastra_frame",
    "parse_workers",
    "serve",
    "serve_worker",
    "serve_workers",
    "tune_gc",
    "ui_chunks",
    "ui_frame",
]

_fixup_module_metadata(__name__, globals())
