"""Loading and running a benchmark script (``benchmarks/<name>.py``) with tiny
sizes, for the tests that keep the benchmarks from rotting."""

from __future__ import annotations

import contextlib
import importlib.util
import pathlib
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

SCRIPT = (
    pathlib.Path(__file__).resolve().parents[1]
    / "benchmarks"
    / "pipeline_throughput.py"
)


@contextlib.contextmanager
def loaded(name: str) -> Iterator[ModuleType]:
    """``benchmarks/<name>.py`` as a module, registered while the block runs
    (attrs classes in it resolve their annotations through ``sys.modules``)."""
    path = SCRIPT.parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def run_quick(name: str, *extra: str) -> tuple[ModuleType, Any]:
    """The module and the rows of ``benchmarks/<name>.py``'s
    ``main(["--quick", *extra])``."""
    with loaded(name) as module:
        return module, module.main(["--quick", *extra])
