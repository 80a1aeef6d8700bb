"""Every code block of the README and of ``docs/`` says what it is, and the ones
that can be run are run as written.

The conventions (``docs/index.md`` states them for readers):

* Every fenced block names its language: ``python``, ``text``, ``sh``, ``js`` or
  ``json``.
* A ``python`` block is a complete program, run as written in a fresh
  interpreter from the repository's root (warnings are errors, no API key in
  the environment), unless its first line says otherwise:

  * ``# fragment...``: a piece of a program, not run; it must still parse
    (top-level ``await`` allowed) and its imports must import;
  * ``# test_<name>.py``: a pytest file, run with pytest alone; every test in
    it must pass.

* A complete program (or a ``sh`` block) followed by a ``text`` block (blank
  lines between them only) must print exactly that: line by line, blank lines
  and trailing spaces aside, where ``…`` stands for any text within a line, and
  a line of ``…`` alone for any lines.
* A program that reads ``os.environ["DATABASE_URL"]`` needs PostgreSQL: it gets
  ``$PROCESSION_TEST_POSTGRES_DSN`` (as the memory tests do) and its
  ``schema_name`` is dropped before and after; without that variable it is
  skipped with the reason, except under CI (``CI=true``), where it fails.
* The ``sh`` blocks of a page that call ``curl`` on ``localhost:4111`` are run in
  order against a fresh ``procession serve`` (the demo's agent, offline); the
  ``procession`` commands of ``sh`` blocks must parse with the CLI's options.
* A ``js`` block whose first line is ``// from <path>`` is an excerpt: each of
  its lines is a line of that file.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LANGUAGES = {"python", "text", "sh", "js", "json"}
FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^`\n]*)$")
TEST_FILE = re.compile(r"# (test_\w+\.py)$")
# A service an example needs: the variable it reads, where the tests find the
# service, and how to start one by hand.
SERVICES = {
    "DATABASE_URL": ("PROCESSION_TEST_POSTGRES_DSN", "PostgreSQL", "bash .ci/pg --"),
}


@attrs.frozen
class Block:
    page: Path
    line: int
    language: str
    text: str
    output: str | None
    """The ``text`` block right after this one, if any: what it prints."""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def first_line(self) -> str:
        return self.text.split("\n", 1)[0]


def _blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, each with the ``text`` block after it."""
    lines = page.read_text().split("\n")
    found: list[tuple[int, str, str, int]] = []  # line, info, text, end line
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent = opening["indent"]
        end = next(
            j for j in range(i + 1, len(lines)) if lines[j].rstrip() == indent + "```"
        )
        body = [line.removeprefix(indent) for line in lines[i + 1 : end]]
        found.append((i + 1, opening["info"].strip(), "\n".join(body) + "\n", end))
        i = end + 1
    blocks = []
    for k, (line, info, text, end) in enumerate(found):
        after = found[k + 1] if k + 1 < len(found) else None
        output = None
        if (
            after is not None
            and after[1] == "text"
            and all(not lines[j].strip() for j in range(end + 1, after[0] - 1))
        ):
            output = after[2]
        blocks.append(Block(page, line, info, text, output))
    return blocks


ALL_BLOCKS = [block for page in PAGES for block in _blocks(page)]


def _of(language: str) -> list[Block]:
    return [b for b in ALL_BLOCKS if b.language == language]


def _params(blocks: list[Block]) -> list[object]:
    return [pytest.param(b, id=b.where) for b in blocks]


PROGRAMS = [
    b
    for b in _of("python")
    if not b.first_line.startswith("# fragment") and not TEST_FILE.match(b.first_line)
]
FRAGMENTS = [b for b in _of("python") if b.first_line.startswith("# fragment")]
TEST_FILES = [b for b in _of("python") if TEST_FILE.match(b.first_line)]


def matches(expected: str, printed: str) -> bool:
    """``printed`` is ``expected``, blank lines and trailing spaces aside,
    ``…`` standing for any text within a line and ``…`` alone for any lines."""
    pattern = []
    for line in expected.split("\n"):
        line = line.rstrip()
        if not line:
            continue
        if line == "…":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            pattern.append("[^\n]*?".join(map(re.escape, line.split("…"))) + r"\n")
    text = "".join(line.rstrip() + "\n" for line in printed.split("\n") if line.strip())
    return re.fullmatch("".join(pattern), text) is not None


def _environment() -> dict[str, str]:
    """The tests' environment, this checkout first on the path, no API key."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return env


def _service(variable: str) -> str:
    """The URL of the service behind ``variable``, or a skip saying why."""
    source, name, start = SERVICES[variable]
    url = os.environ.get(source)
    if url:
        return url
    message = f"this example needs {name}: {source} is not set ({start} ...)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {message}", pytrace=False)
    pytest.skip(message)


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _check_output(block: Block, printed: str) -> None:
    if block.output is not None:
        assert matches(block.output, printed), (
            f"{block.where} should print:\n{block.output}\nit printed:\n{printed}"
        )


# --- the blocks -------------------------------------------------------------------


def test_the_pages_have_examples_of_every_kind() -> None:
    """The collection finds what the pages hold (so the tests below can fail)."""
    assert len(PROGRAMS) >= 15
    assert sum(b.output is not None for b in PROGRAMS) >= 15
    assert FRAGMENTS
    assert TEST_FILES
    assert any(b.page.name == "README.md" for b in PROGRAMS)


@pytest.mark.parametrize("block", _params(ALL_BLOCKS))
def test_every_block_names_its_language(block: Block) -> None:
    assert block.language in LANGUAGES, (
        f"{block.where}: a fence with info {block.language!r}; use one of "
        f"{sorted(LANGUAGES)} (a Python block must be ```python to be run)"
    )


@pytest.mark.parametrize("block", _params(PROGRAMS))
def test_a_complete_program_runs_as_written(block: Block, tmp_path: Path) -> None:
    env = _environment()
    schemas: list[str] = []
    for variable in SERVICES:
        if f'os.environ["{variable}"]' in block.text:
            env[variable] = _service(variable)
            schemas = re.findall(r'schema_name="(\w+)"', block.text)
            assert schemas, (
                f"{block.where}: a PostgreSQL example keeps its tables in a "
                f'schema of its own (schema_name="..."), which the test drops'
            )
    for schema in schemas:
        _drop_schema(env["DATABASE_URL"], schema)
    program = tmp_path / f"{block.page.stem}_{block.line}.py"
    program.write_text(block.text)
    try:
        done = subprocess.run(
            [sys.executable, "-W", "error", "-X", "dev", str(program)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        for schema in schemas:
            _drop_schema(env["DATABASE_URL"], schema)
    assert done.returncode == 0, f"{block.where} failed:\n{done.stderr}"
    assert done.stderr == "", f"{block.where} wrote to stderr:\n{done.stderr}"
    _check_output(block, done.stdout)


@pytest.mark.parametrize("block", _params(FRAGMENTS))
def test_a_fragment_parses_and_its_imports_import(block: Block) -> None:
    tree = compile(
        block.text,
        block.where,
        "exec",
        flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
        dont_inherit=True,
    )
    imports: list[ast.stmt] = [
        n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)
    ]
    module = ast.Module(body=imports, type_ignores=[])
    exec(compile(module, block.where, "exec"), {})


@pytest.mark.parametrize("block", _params(TEST_FILES))
def test_a_test_file_passes_with_pytest_alone(block: Block, tmp_path: Path) -> None:
    match = TEST_FILE.match(block.first_line)
    assert match is not None
    (tmp_path / match[1]).write_text(block.text)
    tests = len(re.findall(r"^(?:async )?def test_", block.text, flags=re.M))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", match[1]],
        cwd=tmp_path,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(rf"\b{tests} passed\b", done.stdout), done.stdout
    assert tests > 0


JS_EXCERPT = re.compile(r"// from (\S+)$")


@pytest.mark.parametrize(
    "block", _params([b for b in _of("js") if JS_EXCERPT.match(b.first_line)])
)
def test_a_javascript_excerpt_is_in_its_file(block: Block) -> None:
    match = JS_EXCERPT.match(block.first_line)
    assert match is not None
    source = {line.strip() for line in (ROOT / match[1]).read_text().split("\n")}
    missing = [
        line
        for line in block.text.split("\n")[1:]
        if line.strip() and line.strip() not in source
    ]
    assert missing == [], f"{block.where}: not in {match[1]}: {missing}"


# --- the shell blocks ---------------------------------------------------------------


def _commands(block: Block) -> Iterator[str]:
    """The commands of a ``sh`` block: continuation lines, and lines inside a
    quoted string, joined."""
    command = ""
    for line in block.text.replace("\\\n", " ").split("\n"):
        command += line
        try:
            shlex.split(command, comments=True)
        except ValueError:  # a quote still open
            command += "\n"
            continue
        yield command
        command = ""
    assert not command, f"{block.where}: a quote is never closed"


@pytest.mark.parametrize("block", _params(_of("sh")))
def test_the_procession_commands_parse(block: Block) -> None:
    from procession._cli import _parser

    for command in _commands(block):
        for part in re.split(r"&&|\|", command.split(" #", 1)[0]):
            words = shlex.split(part)
            if words[:1] != ["procession"]:
                continue
            parsed = _parser().parse_args(words[1:])
            target = getattr(parsed, "target", None)
            if target and target.startswith("examples/"):
                assert (ROOT / target.split(":")[0]).is_file(), block.where


CURL_PAGES = sorted(
    {b.page for b in _of("sh") if "curl" in b.text and "localhost:4111" in b.text}
)


@pytest.mark.parametrize(
    "page", [pytest.param(p, id=str(p.relative_to(ROOT))) for p in CURL_PAGES]
)
def test_the_curl_examples_against_procession_serve(page: Path) -> None:
    """In page order against one fresh default server: what one block starts (a
    run that waits), a later one may answer."""
    server = subprocess.Popen(
        [sys.executable, "-m", "procession", "serve", "--port", "0"],
        cwd=ROOT,
        env=_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        announced = server.stdout.readline()
        base = re.search(r" on http://([\d.]+:\d+)", announced)
        assert base is not None, announced
        for block in _of("sh"):
            if block.page != page or "curl" not in block.text:
                continue
            done = subprocess.run(
                ["bash", "-c", block.text.replace("localhost:4111", base[1])],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert done.returncode == 0, f"{block.where}: {done.stderr}"
            assert done.stdout, f"{block.where} printed nothing"
            _check_output(block, done.stdout)
    finally:
        server.terminate()
        server.wait(timeout=30)
        if server.stdout is not None:
            server.stdout.close()


def test_the_curl_pages_are_found() -> None:
    assert {p.name for p in CURL_PAGES} >= {"approval.md", "server.md"}


# --- the README ----------------------------------------------------------------------


def test_ci_runs_the_readmes_test_command() -> None:
    """``.ci/run`` calls exactly the README's test command."""
    ci = (ROOT / ".ci" / "run").read_text()
    [ci_command] = re.findall(r"""^phase "tests" bash -c '(.+)'$""", ci, flags=re.M)
    readme = [b.text.strip() for b in _blocks(ROOT / "README.md") if b.language == "sh"]
    assert ci_command in readme


def test_the_readmes_links_lead_somewhere() -> None:
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert len(local) >= 10
    assert [t for t in local if not (ROOT / t).exists()] == []


@pytest.mark.parametrize(
    ("expected", "printed", "same"),
    [
        ("a\n\nb\n", "a  \nb\n\n", True),
        ("a\nb\n", "a\nc\n", False),
        ("a\nb\n", "a\nx\nb\n", False),
        ("a\n…\nb\n", "a\nx\ny\nb\n", True),
        ("a\n…\nb\n", "a\nb\n", True),
        ("run-… done\n", "run-12ab done\n", True),
        ("run-… done\n", "run-12ab\ndone\n", False),
        ("a\n", "a\nb\n", False),
    ],
)
def test_the_output_match(expected: str, printed: str, same: bool) -> None:
    assert matches(expected, printed) is same
