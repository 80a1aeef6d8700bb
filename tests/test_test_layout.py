"""No test file is over 1,000 lines: a file that grows past it is split into
files named for the behaviour they test, so a reader finds a behaviour's tests
by the file's name and reads them in one sitting (issue 27 §5)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
MAX_LINES = 1_000


def _too_long(root: Path) -> dict[str, int]:
    """Each Python file under ``root`` over MAX_LINES lines, with its length."""
    lengths = {
        path.relative_to(root).as_posix(): len(path.read_text().splitlines())
        for path in sorted(root.rglob("*.py"))
    }
    return {name: n for name, n in lengths.items() if n > MAX_LINES}


def test_no_test_file_is_over_1000_lines() -> None:
    too_long = _too_long(TESTS)
    assert not too_long, (
        f"test files over {MAX_LINES} lines (split them by behaviour): {too_long}"
    )


def test_the_check_finds_a_file_over_1000_lines(tmp_path: Path) -> None:
    (tmp_path / "test_short.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "test_long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert _too_long(tmp_path) == {"sub/test_long.py": MAX_LINES + 1}
