"""Every ``pytest.raises`` in the tests states ``match=``: a test that
expects an error says which one, so it cannot pass on a different error of
the same type (issue 27 §5). An exception that carries no message
(``trio.WouldBlock``, ``StopAsyncIteration``) is matched as such:
``match=r"^$"``."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _raises_without_match(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "raises"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "pytest"
        and not any(keyword.arg == "match" for keyword in node.keywords)
    ]


def test_every_pytest_raises_states_match() -> None:
    found = {
        f"{path.relative_to(TESTS)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        for line in _raises_without_match(path)
    }
    assert not found, f"pytest.raises without match=: {sorted(found)}"


def test_the_check_finds_a_raises_without_match(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import pytest\n"
        "def test_a():\n"
        "    with pytest.raises(ValueError):\n"
        "        int('x')\n"
        "    with pytest.raises(ValueError, match='invalid'):\n"
        "        int('x')\n"
    )
    assert _raises_without_match(sample) == [3]
