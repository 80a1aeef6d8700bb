"""``docs/mcp.md``'s example runs as written (from the repository's root)
and prints what the page says it prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def test_the_docs_example_runs_as_written(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    page = (ROOT / "docs" / "mcp.md").read_text()
    example, printed = re.findall(
        r"```python\n(.*?)```\n\n```text\n(.*?)```", page, re.S
    )[0]
    monkeypatch.chdir(ROOT)
    exec(compile(example, "docs/mcp.md", "exec"), {"__name__": "docs_mcp"})
    assert capsys.readouterr().out == printed
