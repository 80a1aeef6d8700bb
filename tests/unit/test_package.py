"""The package's public face and its layering."""

from __future__ import annotations

import ast
import importlib
import pathlib
import re

import pytest

import procession

PACKAGE = pathlib.Path(procession.__file__).parent
PUBLIC_MODULES = [
    "procession",
    "procession.processors",
    "procession.actors",
    "procession.chunks",
    "procession.testing",
    "procession.testing.fake_provider",
    "procession.testing.strategies",
    "procession.runtime",
    "procession.runtime.providers",
]
LAYERS = ["processors", "actors", "runtime"]  # bottom to top


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_sorted_complete_and_importable(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert list(exported) == sorted(exported)
    assert len(set(exported)) == len(exported)
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names missing {attr!r}"
    public = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_") and not isinstance(v, type(module))
    }
    public -= {"annotations"}
    assert public <= set(exported), f"{name} exposes {public - set(exported)}"


def _imports(path: pathlib.Path) -> set[str]:
    """The procession subpackages a module imports (absolute or relative)."""
    tree = ast.parse(path.read_text())
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    here = list(rel.parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                target = [*base, *(node.module or "").split(".")]
            else:
                target = (node.module or "").split(".")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "procession" and len(parts) > 1:
                    found.add(parts[1])
            continue
        else:
            continue
        if target and target[0] == "procession" and len(target) > 1:
            found.add(target[1])
    return found


@pytest.mark.parametrize("layer", LAYERS)
def test_imports_only_go_down(layer: str) -> None:
    """runtime -> actors -> processors; nothing imports upward."""
    above = set(LAYERS[LAYERS.index(layer) + 1 :]) | {"testing", "chunks"}
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(_imports(path) & above)
        for path in (PACKAGE / layer).rglob("*.py")
        if _imports(path) & above
    }
    assert offenders == {}


def test_the_layering_check_sees_an_upward_import(tmp_path: pathlib.Path) -> None:
    """The check above can fail: a relative import of ..runtime is found."""
    module = PACKAGE / "processors" / "_probe_for_layer_test.py"
    module.write_text("from ..runtime import x\n")
    try:
        assert "runtime" in _imports(module)
    finally:
        module.unlink()


def test_readme_pipeline_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's pipeline example runs as written and prints what it says."""
    readme = (PACKAGE.parent / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    example = next(b for b in blocks if "open_output_pipeline" in b)
    exec(compile(example, "README.md", "exec"), {"__name__": "readme_example"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "text-delta the [REDACTED] is "
    assert lines[1] == "text-delta 42 "
    assert lines[2].startswith("tripwire TripwirePayload(reason='forbidden content'")
    assert lines[-1] == "tripwire"


def test_readme_agent_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's agent example runs as written and prints what it says."""
    readme = (PACKAGE.parent / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    example = next(b for b in blocks if "Agent(" in b)
    exec(compile(example, "README.md", "exec"), {"__name__": "readme_agent"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("step-retry StepRetryPayload(step_number=0")
    assert any(
        line.startswith("tool-result ") and "'ssn': '[REDACTED]'" in line
        for line in lines
    )
    assert (
        "text-delta TextDeltaPayload(id='text-1', text='Your order A-1 has shipped.'"
        in "\n".join(lines)
    )
    assert lines[-2] == "Your order A-1 has shipped. stop 1"
    assert lines[-1] == "other block-secrets"
