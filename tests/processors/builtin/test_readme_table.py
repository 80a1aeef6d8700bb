"""The table of built-in processors (docs/builtin-processors.md, once the
README's): every example builds, and every exported built-in processor has a
row."""

from __future__ import annotations

import pathlib
import re

import procession.processors as processors
from procession.processors import Processor

README = pathlib.Path(__file__).resolve().parents[3] / "docs" / "builtin-processors.md"


def _rows() -> list[list[str]]:
    text = README.read_text()
    section = text.split("## What each one does", 1)[1].split("\n## ", 1)[0]
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| `")
    ]


def test_every_example_in_the_table_builds() -> None:
    namespace = vars(processors)
    built = []
    for name, _, example, _ in _rows():
        code = re.fullmatch(r"`([^`]+)`.*", example)
        assert code is not None, f"the example of {name} is not code: {example!r}"
        source = code.group(1)
        option = re.fullmatch(r"\w+=\[(.*)\]", source)
        if option is not None:  # an option list, e.g. error_processors=[...]
            source = option.group(1)
        built.append(eval(source, dict(namespace)))
    assert all(isinstance(p, Processor) for p in built)


def test_every_builtin_processor_has_a_row() -> None:
    named = {n.strip("`") for row in _rows() for n in row[0].split(", ")}
    # The built-ins' home is procession.processors: every processor it
    # exports but the base class.
    exported = {
        n
        for n in processors.__all__
        if isinstance(obj := getattr(processors, n), type)
        and issubclass(obj, Processor)
        and obj is not Processor
    }
    assert len(exported) >= 12  # all of them, not none
    assert exported <= named
