"""The ``procession`` command: ``procession demo`` (the demo itself is in
``_demo.py``) and ``procession serve`` (agents over HTTP, or MCP over stdio).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

import trio

from ._demo import ServedDemoModel, demo_agent, run_demo
from ._errors import ConfigurationError
from ._secrets import redact
from ._version import version
from .memory import Memory, SqliteStorage
from .models import resolve_model
from .runtime import Agent

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="procession",
        description="procession: LLM agents whose streams flow through supervised "
        "trio processor actors. 'procession demo' streams three short conversations "
        "through a visible chain of processors, offline.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser(
        "demo",
        help="stream three short conversations through processors (offline)",
        description="Stream three short support conversations of a returning user "
        "through a redactor, a guardrail that trips, a quality check that retries "
        "and a tool-result scanner, with memory in SQLite. Runs on an embedded "
        "scripted model unless --model names another.",
    )
    demo.add_argument(
        "--color",
        choices=["auto", "always", "never"],
        default="auto",
        help="colour the output: auto (on a terminal, unless NO_COLOR is set), "
        "always or never",
    )
    demo.add_argument(
        "--mode",
        choices=["adaptive", "fused", "actors"],
        default="adaptive",
        help="how the output processors run: adaptive (fused, a task of its own "
        "for a processor seen to wait), fused (awaited calls in one task) or "
        "actors (a task per processor); all print the same",
    )
    demo.add_argument(
        "--model",
        default="scripted",
        help="'scripted' (the default: embedded, offline, free) or a "
        "provider/model id such as anthropic/claude-sonnet-4-5 (a real, billed "
        "API call; needs its package and API key)",
    )
    serve = sub.add_parser(
        "serve",
        help="serve agents over HTTP (Mastra and AI SDK protocols)",
        description="Serve an agent, a list of agents or an app from "
        "procession.server.create_app over HTTP (hypercorn's trio worker). With "
        "no target, serves the demo's support agent on its scripted model. Bearer "
        "tokens come from $PROCESSION_SERVER_TOKENS (comma-separated).",
    )
    serve.add_argument(
        "target",
        nargs="?",
        help="module:attr or path/file.py:attr naming an Agent, a list of agents "
        "or an app (default: the demo's agent, offline)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1")
    serve.add_argument("--port", type=int, default=4111, help="default 4111")
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback --host with no bearer token configured",
    )
    serve.add_argument(
        "--mcp",
        action="store_true",
        help="speak MCP over stdin and stdout instead of HTTP: each agent is the "
        "tool ask_<agent id>, for an MCP client that starts the server itself "
        "(Claude Desktop, an IDE); needs the mcp extra",
    )
    serve.add_argument(
        "--bus",
        default=os.environ.get("PROCESSION_BUS_URL") or None,
        help="redis://host:port/db: resumable runs in Redis Streams, shared "
        "with the other servers on that Redis (default $PROCESSION_BUS_URL; "
        "none: runs end with their client)",
    )
    serve.add_argument(
        "--durable",
        action="store_true",
        help="every run is durable: kept in its agent's storage (a SQLite file "
        "or PostgreSQL) and checkpointed at every step; this server takes over "
        "the runs of servers that died, and hands its own over when it stops "
        "(see docs/durable-runs.md)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="the lowest level logged to stderr (default info)",
    )
    serve.add_argument(
        "--no-access-log",
        action="store_true",
        help="no line per request (method, route, status, duration, run id)",
    )
    serve.add_argument(
        "--workers",
        default="1",
        help="N or auto (the cores): N processes sharing the listening socket, "
        "each with its own runs and its own limit on concurrent runs; resume "
        "across them needs --bus (default 1: one process, no supervisor)",
    )
    serve.add_argument(
        "--gc-threshold",
        type=int,
        default=None,
        metavar="N",
        help="the garbage collector's first threshold once the app is loaded, "
        "after freezing what start-up left (default "
        "procession.server.GC_THRESHOLD; Python's is 700; 0 leaves the "
        "collector as it is): see procession.server.tune_gc",
    )
    # A worker of --workers N: index/count/listen_fd/parent_fd (internal).
    serve.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    return parser


def _configure_logging(args: argparse.Namespace) -> None:
    """procession's log records of level ``--log-level`` and above (other
    libraries' from WARNING) to stderr, one line each; the access log
    (``procession.access``) unless ``--no-access-log``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.addHandler(handler)
    # Other libraries (hypercorn, the mcp SDK) say only what goes wrong;
    # procession's own records from --log-level up.
    root.setLevel(logging.WARNING)
    logging.getLogger("procession").setLevel(args.log_level.upper())
    if args.no_access_log:
        logging.getLogger("procession.access").setLevel(logging.WARNING)


def _serve(args: argparse.Namespace) -> int:
    """``procession serve``: runs until SIGINT / SIGTERM; 2 for a target,
    an address or a --workers it refuses. With ``--workers N`` > 1, this
    process supervises N workers (``procession.server.serve_workers``), each
    this command again with ``--worker``."""
    from .server import (
        GC_THRESHOLD,
        WorkerSpec,
        check_bind,
        check_workers,
        create_app,
        load_target,
        parse_workers,
        serve,
        serve_worker,
        serve_workers,
        tune_gc,
    )

    try:
        spec = WorkerSpec.parse(args.worker) if args.worker else None
        if spec is not None:
            spec.watch_parent()  # before the app loads: a dead parent ends it
        workers = parse_workers(args.workers)
        gc_threshold = GC_THRESHOLD if args.gc_threshold is None else args.gc_threshold
        if gc_threshold < 0:
            raise ConfigurationError(
                f"--gc-threshold must be 0 (leave the collector as it is) or a "
                f"positive number of objects, got {gc_threshold}"
            )
        if args.mcp and args.bus:
            raise ConfigurationError("--bus is for HTTP; --mcp serves over stdio")
        if args.mcp and workers > 1:
            raise ConfigurationError("--workers is for HTTP; --mcp serves over stdio")
        if args.target:
            app = load_target(args.target, bus=args.bus, durable=args.durable)
        elif args.durable:
            raise ConfigurationError(
                "--durable needs agents whose storage other processes read (a "
                "SQLite file, PostgreSQL): the demo's agent keeps its memory in "
                "this process; serve your agents (module:attr) with --durable"
            )
        else:
            # Memory in an in-process SQLite database: the README's curl with
            # memory works (gone when the server stops; each worker its own).
            memory = Memory(storage=SqliteStorage(":memory:"))
            app = create_app(
                [demo_agent(ServedDemoModel(), memory=memory)], bus=args.bus
            )
        if not args.mcp:
            check_bind(args.host, has_tokens=app.auth_required, insecure=args.insecure)
            check_workers(app, workers)
    except ConfigurationError as exc:
        print(f"procession serve: {redact(str(exc))}", file=sys.stderr)
        return 2
    if args.mcp:
        return _serve_mcp(list(app.agents.values()))
    _configure_logging(args)
    if gc_threshold:
        tune_gc(gc_threshold)

    def announce(urls: list[str], detail: str = "") -> None:
        ids = ", ".join(app.agents)
        print(
            f"procession serve: {ids} on {' '.join(urls)} "
            f"(auth {'on' if app.auth_required else 'off'}{detail}); "
            f"POST /api/agents/{{agentId}}/stream, POST /api/chat; Ctrl-C stops",
            flush=True,
        )

    if spec is not None:
        orphaned = trio.run(
            serve_worker,
            app,
            spec,
            lambda sock, task_status: serve(
                app,
                host=args.host,
                insecure=args.insecure,
                sock=sock,
                task_status=task_status,
            ),
        )
        if orphaned:  # nobody waits for this process: no teardown
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        return 0
    if workers > 1:

        def command(spec: WorkerSpec) -> list[str]:
            argv = [sys.executable, "-m", "procession", "serve"]
            argv += [args.target] if args.target else []
            argv += ["--host", args.host, "--worker", str(spec)]
            argv += ["--insecure"] if args.insecure else []
            argv += ["--bus", args.bus] if args.bus else []
            argv += ["--durable"] if args.durable else []
            argv += ["--log-level", args.log_level]
            argv += ["--no-access-log"] if args.no_access_log else []
            argv += ["--gc-threshold", str(gc_threshold)]
            return argv

        try:
            return serve_workers(
                args.host,
                args.port,
                workers,
                command,
                lambda url, pids: announce(
                    [url], f", {workers} workers: pids {' '.join(map(str, pids))}"
                ),
            )
        except OSError as exc:
            print(
                f"procession serve: cannot listen on {args.host}:{args.port}: {exc}",
                file=sys.stderr,
            )
            return 2

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            urls = await nursery.start(
                lambda task_status: serve(
                    app,
                    host=args.host,
                    port=args.port,
                    insecure=args.insecure,
                    task_status=task_status,
                )
            )
            announce(urls)

    try:
        trio.run(run)
    except Exception as exc:
        failure = _lone_failure(exc)
        if isinstance(failure, ConfigurationError):  # e.g. no server extra
            print(f"procession serve: {redact(str(failure))}", file=sys.stderr)
        elif isinstance(failure, OSError):  # the address is taken, or not ours
            print(
                f"procession serve: cannot listen on {args.host}:{args.port}: "
                f"{failure.strerror or failure}",
                file=sys.stderr,
            )
        else:
            raise
        return 2
    return 0


def _lone_failure(exc: BaseException) -> BaseException:
    """The one exception inside ``exc``'s nested groups, or ``exc``."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _serve_mcp(agents: list[Agent]) -> int:
    """``procession serve --mcp``: the agents as MCP tools over stdio, until
    the client closes stdin; stdout carries only the protocol, so the
    start-up line goes to stderr."""
    from .mcp import agent_tool_name, serve_stdio

    try:
        import mcp  # noqa: F401 - only whether the extra is installed
    except ImportError as exc:
        print(
            "procession serve: --mcp needs the mcp extra: "
            f'pip install "procession[mcp]" ({exc})',
            file=sys.stderr,
        )
        return 2
    ids = ", ".join(agent_tool_name(a.id) for a in agents)
    print(f"procession serve: MCP over stdio; tools {ids}", file=sys.stderr, flush=True)
    trio.run(serve_stdio, agents)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The ``procession`` command. Exits 0 on success, 1 when a conversation
    ended in an error (shown) or the output pipe closed early, 2 for bad
    arguments or a model that cannot be built."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "serve":
        return _serve(args)
    try:
        model = None if args.model == "scripted" else resolve_model(args.model)
    except ConfigurationError as exc:
        print(f"procession demo: {exc}", file=sys.stderr)
        return 2
    try:
        results = trio.run(
            lambda: run_demo(colour=args.color, mode=args.mode, model=model)
        )
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader left (``procession demo | head``): the Python docs' recipe,
        # so the interpreter's own flush at exit does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    failed = [r for r in results if r.error is not None]
    for result in failed:
        print(
            f"procession demo: a run ended in an error: {result.error}",
            file=sys.stderr,
        )
    return 1 if failed else 0
