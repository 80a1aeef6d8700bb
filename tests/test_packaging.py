"""The built wheel is the product: it holds every module, the typing marker, the
licence and the console script, and the demo runs from it."""

from __future__ import annotations

import email
import pathlib
import subprocess
import sys
import sysconfig
import zipfile

import procession

ROOT = pathlib.Path(procession.__file__).resolve().parents[1]


def test_the_wheel_is_complete_and_the_demo_runs_from_it(
    tmp_path: pathlib.Path,
) -> None:
    """Builds the wheel offline (~10 s), then runs the demo from it alone: the
    interpreter starts without ``site`` (``-S``), so the editable install of
    the checkout is invisible and only the wheel's files and the core
    dependencies' directory are on ``sys.path``."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("procession-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = email.message_from_bytes(archive.read(info))
        entry_points = archive.read(
            next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        ).decode()
        archive.extractall(tmp_path / "site")
    assert "procession/py.typed" in names
    assert "procession/server/page.html" in names  # the chat page (GET /)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert metadata["License-Expression"] == "MIT"
    assert "Typing :: Typed" in (metadata.get_all("Classifier") or [])
    assert "procession = procession._cli:main" in entry_points
    assert "procession = procession.testing._pytest_plugin" in entry_points
    packaged = {n for n in names if n.startswith("procession/") and n.endswith(".py")}
    in_tree = {str(p.relative_to(ROOT)) for p in (ROOT / "procession").rglob("*.py")}
    assert packaged == in_tree
    site_packages = sysconfig.get_paths()["purelib"]
    code = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; "
        "import procession; assert procession.__file__.startswith(sys.argv[1]); "
        "from procession._cli import main; "
        "raise SystemExit(main(['demo', '--color', 'never']))"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", code, str(tmp_path / "site"), site_packages],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "model: scripted (offline)"
    assert "conversation 2: finish=other, blocked by regex-filter" in done.stdout
