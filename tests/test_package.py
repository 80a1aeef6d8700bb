"""The package's public face and its layering."""

from __future__ import annotations

import ast
import importlib
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import procession

PACKAGE = pathlib.Path(procession.__file__).parent
PUBLIC_MODULES = [
    "procession",
    "procession.actors",
    "procession.chunks",
    "procession.memory",
    "procession.messages",
    "procession.models",
    "procession.processors",
    "procession.processors.builtin",
    "procession.providers",
    "procession.runtime",
    "procession.runtime.tools",
    "procession.telemetry",
    "procession.testing",
    "procession.testing.fake_provider",
    "procession.testing.strategies",
]
# Faces of a layer for the layers above it (not documented for users).
LAYER_FACES = ["procession.data", "procession.wire"]
# Imports of another room's private module that remain, each with its reason:
# - the kernel's view of the hook contract (call a hook, read a hook's result,
#   the failure policy, find a TripWire in a group) is not part of the processor
#   author's API;
# - the sequential reference runner interprets the pipeline's in-band markers,
#   which left the public API (the runtime drives them through RunControl);
# - the step loop runs a tool call (``execute_tool``), which is not part of the
#   tool author's API.
PRIVATE_IMPORTS_ALLOWED = {
    # procession.processors, the built-ins' one home, takes them from the
    # room's list (their room's face keeps only their configuration types).
    "procession.processors.builtin._home",
    "procession.processors._calling",
    "procession.processors._contract",
    "procession.processors._readers",
    "procession.actors._markers",
    "procession.runtime.tools._tool",
}


@pytest.mark.parametrize("name", PUBLIC_MODULES + LAYER_FACES)
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


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_class_names_a_public_home(name: str) -> None:
    """``__module__`` is a public module, so reprs and tracebacks never show a
    private path (``procession.ConfigurationError``, not ``procession._errors``)."""
    module = importlib.import_module(name)
    private = {
        attr: obj.__module__
        for attr in module.__all__
        if isinstance(obj := getattr(module, attr), type)
        and obj.__module__.startswith("procession")
        and any(part.startswith("_") for part in obj.__module__.split("."))
    }
    assert private == {}


# Issue 27 §3, one public home per name. The facade ``procession`` re-exports
# these from their home (every other name of the facade lives there itself:
# the error tree); no other public module may export a name it is not home to.
FACADE_HOMES = {
    "Agent": "procession.runtime",
    "AgentResult": "procession.runtime",
    "Message": "procession.messages",
    "MessageList": "procession.processors",
    "Processor": "procession.processors",
    "ProcessorViolation": "procession.processors",
    "RequestContext": "procession.processors",
    "SystemMessage": "procession.messages",
    "Tool": "procession.runtime.tools",
    "message_text": "procession.messages",
    "tool": "procession.runtime.tools",
}
# The documented faces at the edges, beside PUBLIC_MODULES.
EDGE_MODULES = ["procession.mcp", "procession.server"]
# A name a home shares with another public module on purpose: none (the
# built-ins' room keeps only their configuration types on its face).
ALSO_EXPORTED_BY: dict[str, set[str]] = {}


def _exporters() -> dict[tuple[str, int], set[str]]:
    """(name, id of the object) -> the public modules other than the facade
    whose ``__all__`` holds it."""
    found: dict[tuple[str, int], set[str]] = {}
    for name in PUBLIC_MODULES[1:] + EDGE_MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            key = (attr, id(getattr(module, attr)))
            found.setdefault(key, set()).add(name)
    return found


def test_each_public_name_has_one_home() -> None:
    twice = {}
    for (attr, _), modules in _exporters().items():
        for home, others in ALSO_EXPORTED_BY.items():
            if home in modules:
                modules = modules - others
        if len(modules) > 1:
            twice[attr] = sorted(modules)
    assert twice == {}, "exported from more than one public module"


def test_the_facade_re_exports_names_from_their_home() -> None:
    exporters = _exporters()
    for attr in procession.__all__:
        obj = getattr(procession, attr)
        home = FACADE_HOMES.get(attr, "procession")
        others = exporters.get((attr, id(obj)), set())
        if home == "procession":
            assert others == set(), f"{attr} lives in procession, not in {others}"
        else:
            assert others == {home}, f"{attr}: home {home}, exported by {others}"
            assert getattr(importlib.import_module(home), attr) is obj


@pytest.mark.parametrize(
    ("old", "home", "attr"),
    [
        ("procession.processors", "procession.messages", "Message"),
        ("procession.processors", "procession", "TripWire"),
        ("procession.runtime", "procession.models", "LanguageModel"),
        ("procession.runtime", "procession.runtime.tools", "tool"),
    ],
)
def test_a_name_that_left_a_face_is_a_warning_alias(
    old: str, home: str, attr: str
) -> None:
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"import it from {re.escape(home)}"):
        assert getattr(module, attr) is getattr(importlib.import_module(home), attr)
    assert attr not in module.__all__
    assert attr in dir(module)


def test_internal_names_are_not_public() -> None:
    import procession.processors
    import procession.runtime

    assert "HOOK_NAMES" not in procession.processors.__all__
    assert "execute_tool" not in procession.runtime.__all__
    with pytest.warns(DeprecationWarning, match="it is internal"):
        assert procession.runtime.execute_tool is not None


def test_errors_and_values_have_the_homes_users_import_them_from() -> None:
    assert procession.ConfigurationError.__module__ == "procession"
    assert procession.TripWire.__module__ == "procession"
    assert procession.chunks.TextDeltaChunk.__module__ == "procession.chunks"
    assert procession.messages.TextPart.__module__ == "procession.messages"
    assert repr(procession.ConfigurationError).startswith(
        "<class 'procession.ConfigurationError'"
    )


def test_the_old_providers_path_is_a_warning_alias() -> None:
    """``procession.runtime.providers`` (the README's path until 0.1) still
    works for one release, with a DeprecationWarning naming the new home."""
    from procession import providers

    old = importlib.import_module("procession.runtime.providers")
    with pytest.warns(DeprecationWarning, match=r"moved to procession\.providers"):
        assert old.AnthropicModel is providers.AnthropicModel
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = old.Nope


def _private_imports(path: pathlib.Path) -> set[str]:
    """Modules of another procession room whose private module ``path`` imports."""
    tree = ast.parse(path.read_text())
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    here = list(rel.parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = here[: len(here) - node.level + 1]
            target = [*base, *(node.module or "").split(".")]
        else:
            target = (node.module or "").split(".")
        private = [i for i, part in enumerate(target) if part.startswith("_")]
        if target[0] != "procession" or not private or private[0] < 2:
            continue  # not ours, not private, or a top-level module (_errors)
        if target[: private[0]] != here[: private[0]]:
            found.add(".".join(target))
    return found


def test_rooms_talk_through_each_others_faces() -> None:
    """A room imports another room's names from its ``__init__``, not from its
    private modules (the few allowed are listed above with their reason)."""
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(found - PRIVATE_IMPORTS_ALLOWED)
        for path in PACKAGE.rglob("*.py")
        if (found := _private_imports(path)) - PRIVATE_IMPORTS_ALLOWED
    }
    assert offenders == {}


def test_the_face_check_sees_a_private_import(tmp_path: pathlib.Path) -> None:
    """The check above can fail (the probe is written under tmp_path, never into
    the package)."""
    probe = tmp_path / "procession" / "actors" / "_probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("from ..data._chunks import TextDeltaChunk\n")
    tree = ast.parse(probe.read_text())
    node = tree.body[0]
    assert isinstance(node, ast.ImportFrom)
    assert node.module == "data._chunks"
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "procession"
    try:
        assert _private_imports(probe) == {"procession.data._chunks"}
    finally:
        PACKAGE = saved


def _lint_imports(root: pathlib.Path) -> subprocess.CompletedProcess[str]:
    """import-linter's own command on the package under ``root``."""
    return subprocess.run(
        [str(pathlib.Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_layer_contracts_hold() -> None:
    """The layers of DESIGN.md, as the contracts in pyproject.toml state them."""
    result = _lint_imports(PACKAGE.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_the_layer_contracts_see_an_upward_import(tmp_path: pathlib.Path) -> None:
    """The contracts can fail: a copy of the package in which the data layer
    imports the runtime is rejected, naming the import."""
    shutil.copytree(PACKAGE, tmp_path / "procession", ignore=_pycache)
    shutil.copy(PACKAGE.parent / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "procession" / "data" / "_probe.py").write_text(
        "from ..runtime import Agent\n"
    )
    result = _lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "procession.data._probe -> procession.runtime" in result.stdout


def _pycache(directory: str, names: list[str]) -> list[str]:
    return [n for n in names if n == "__pycache__"]


def test_readme_pipeline_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The pipeline example (docs/processors.md, once the README's) runs as
    written and prints what it says."""
    readme = (PACKAGE.parent / "docs" / "processors.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    example = next(b for b in blocks if "open_output_pipeline" in b)
    exec(compile(example, "README.md", "exec"), {"__name__": "readme_example"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "text-delta the [REDACTED] is "
    assert lines[1] == "text-delta 42 "
    assert lines[2].startswith("tripwire TripwirePayload(reason='forbidden content'")
    assert lines[-1] == "tripwire"


def test_readme_agent_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The agent example (docs/getting-started.md, once the README's) runs as
    written and prints what it says."""
    readme = (PACKAGE.parent / "docs" / "getting-started.md").read_text()
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


def test_readme_approval_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The person-in-the-loop example (docs/approval.md, once the README's)
    runs as written."""
    readme = (PACKAGE.parent / "docs" / "approval.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    example = next(b for b in blocks if "approve_tool_call" in b)
    exec(compile(example, "README.md", "exec"), {"__name__": "readme_approval"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "suspended delete_record"
    assert lines[1:3] == ["tool-result", "step-finish"]
    assert lines[-1] == "finish"


# Coroutines whose checkpoint behaviour is not API: the demo's own example
# processors and tool (shown to users as examples, documented in prose there).
CHECKPOINT_DOC_EXEMPT = {
    "_demo.py:issue_refund",
    "_demo.py:lookup_order",
    "_demo.py:process_output_stream",
    "_demo.py:process_output_step",
    "_demo.py:process_tool_result",
}
_ASYNC_PROTOCOL = {"__anext__", "__aenter__", "__aexit__"}


def _public_coroutines() -> list[tuple[str, ast.AsyncFunctionDef]]:
    """Every public ``async def`` of the package (module level or in a public
    class; async iterator and context manager methods count as public)."""
    found: list[tuple[str, ast.AsyncFunctionDef]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        scopes: list[tuple[ast.AST, bool]] = [(tree, True)]
        while scopes:
            scope, public = scopes.pop()
            for node in ast.iter_child_nodes(scope):
                if isinstance(node, ast.ClassDef):
                    scopes.append((node, public and not node.name.startswith("_")))
                elif (
                    isinstance(node, ast.AsyncFunctionDef)
                    and public
                    and (not node.name.startswith("_") or node.name in _ASYNC_PROTOCOL)
                ):
                    found.append((f"{path.relative_to(PACKAGE)}:{node.name}", node))
    return found


def test_every_public_coroutine_says_how_it_checkpoints() -> None:
    """As trio's do: each public coroutine's docstring says whether it
    checkpoints and what cancellation does."""
    coroutines = _public_coroutines()
    assert len(coroutines) > 30  # the walk really finds them
    silent = sorted(
        where
        for where, node in coroutines
        if where not in CHECKPOINT_DOC_EXEMPT
        and not re.search(r"checkpoint|cancel", ast.get_docstring(node) or "", re.I)
    )
    assert silent == []


def test_the_version_is_read_from_the_metadata_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A metadata lookup scans ``sys.path``; the server's request span and
    every run's telemetry ask for the version."""
    from procession._version import version

    lookups: list[str] = []

    def lookup(name: str) -> str:
        lookups.append(name)
        return "1.2.3"

    try:
        with monkeypatch.context() as patched:
            patched.setattr(importlib.metadata, "version", lookup)
            version.cache_clear()
            assert [version() for _ in range(3)] == ["1.2.3"] * 3
            assert lookups == ["procession"]
    finally:
        version.cache_clear()
    assert version() == procession.__version__
