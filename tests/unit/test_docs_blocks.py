"""Every shell and TOML block of README.md and docs/ against the real code.

* Each ``ledger ...`` / ``ledger-verify ...`` invocation in a shell block (after environment
  assignments, inside pipes, ``$(...)`` and line continuations) must parse against the real click
  command trees (``ledger.cli.main.main``, ``ledger_client.cli.main.main``): an unknown command
  or option, a missing required option or a value of the wrong type fails. Only a path that does
  not exist on this machine is forgiven (the docs name the operator's files).
* Each TOML block must load through the loader that reads it: ``ledger serve --config``'s
  settings model, or, for a ``[witness]`` table, ``ledger witness serve --config``'s.
* Each shell block says whether it runs: ``<!-- run -->`` above the fence (it is then executed
  with bash in a temporary folder, offline, and must exit 0), or ``<!-- not run: reason -->``.
* Synopsis lines in other blocks (``ledger-verify receipt FILE --key VKEY [--json]``) must name
  existing commands and options, and every repository file a page names in backticks exists.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from ledger.app.settings import load_settings, load_witness_settings
from ledger.cli.main import main as ledger_main
from ledger.core.errors import FormatError
from ledger_client.cli.main import main as verify_main

ROOT = Path(__file__).resolve().parents[2]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
PROGRAMS: dict[str, click.Command] = {"ledger": ledger_main, "ledger-verify": verify_main}
SHELL = frozenset({"sh", "shell", "bash", "console"})
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)")
MARK = re.compile(r"^\s*<!--\s*(run|not run:\s*(\S.*?))\s*-->\s*$")
COMMENT = re.compile(r"^\s*<!--.*-->\s*$")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SEPARATORS = frozenset({"|", "||", "&&", ";", "&", "|&"})


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block: where it starts, its info string, its text, the marks above it."""

    page: Path
    line: int
    lang: str
    text: str
    marks: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def read_blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, each with the HTML-comment marks right above its fence."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        fence, lang = opened.group(1), opened.group(2).lower()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        found.append(Block(page, i + 1, lang, "\n".join(lines[i + 1 : end]), _marks(lines, i)))
        i = end + 1
    return found


def _marks(lines: list[str], fence_index: int) -> tuple[str, ...]:
    marks: list[str] = []
    j = fence_index - 1
    while j >= 0 and (not lines[j].strip() or COMMENT.match(lines[j])):
        mark = MARK.match(lines[j])
        if mark is not None:
            marks.append(mark.group(1))
        j -= 1
    return tuple(marks)


ALL_BLOCKS = [block for page in PAGES for block in read_blocks(page)]
SHELL_BLOCKS = [b for b in ALL_BLOCKS if b.lang in SHELL]
TOML_BLOCKS = [b for b in ALL_BLOCKS if b.lang == "toml"]
OTHER_BLOCKS = [b for b in ALL_BLOCKS if b.lang not in SHELL and b.lang != "toml"]
RUNNABLE = [b for b in SHELL_BLOCKS if "run" in b.marks]


def _ids(block: Block) -> str:
    return block.where


# --- shell: which commands a block holds ----------------------------------------------------------


def command_lines(block: Block) -> list[str]:
    """The block's command lines, continuations joined (``console``: only the ``$ `` lines)."""
    lines = block.text.splitlines()
    out: list[str] = []
    current: str | None = None
    for line in lines:
        if current is not None:
            current = current[:-1] + " " + line
        elif block.lang == "console":
            if not line.startswith("$ "):
                continue
            current = line[2:]
        else:
            current = line
        if current.endswith("\\"):
            continue
        out.append(current)
        current = None
    if current is not None:
        out.append(current.rstrip("\\"))
    return out


def _substitutions(line: str) -> tuple[str, list[str]]:
    """``line`` with every ``$(...)`` replaced by a placeholder word, and the inner commands."""
    outer: list[str] = []
    inner: list[str] = []
    i = 0
    while i < len(line):
        if line.startswith("$(", i) and not line.startswith("$((", i):
            depth, j = 1, i + 2
            while j < len(line) and depth:
                depth += {"(": 1, ")": -1}.get(line[j], 0)
                j += 1
            inner.append(line[i + 2 : j - 1])
            outer.append("SUBSTITUTED")
            i = j
        else:
            outer.append(line[i])
            i += 1
    return "".join(outer), inner


def invocations(line: str) -> Iterator[tuple[str, list[str]]]:
    """(program, arguments) of every ``ledger``/``ledger-verify`` call in one shell line."""
    outer, inner = _substitutions(line)
    for nested in inner:
        yield from invocations(nested)
    lexer = shlex.shlex(outer, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    segment: list[str] = []
    for token in [*lexer, ";"]:
        if token in SEPARATORS:
            yield from _program(segment)
            segment = []
        else:
            segment.append(token)


def _program(words: list[str]) -> Iterator[tuple[str, list[str]]]:
    words = _without_redirections(words)
    while words and (ASSIGNMENT.match(words[0]) or words[0] in ("export", "exec", "time")):
        words = words[1:]
    if words and Path(words[0]).name in PROGRAMS:
        yield Path(words[0]).name, words[1:]


def _without_redirections(words: list[str]) -> list[str]:
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word and set(word) <= set("<>&") and set(word) & set("<>"):
            skip = True
        else:
            kept.append(word)
    return kept


# --- shell: parsing an invocation against the click tree ------------------------------------------


def parse_invocation(program: str, args: list[str]) -> None:
    """Parse ``program args`` as click would run it; a ClickException says what is wrong."""
    command, name = PROGRAMS[program], program
    parent: click.Context | None = None
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        while True:
            try:
                ctx = command.make_context(name, list(args), parent=parent)
            except click.exceptions.Exit as done:  # --help, --version
                assert done.exit_code == 0
                return
            except click.BadParameter as exc:
                if "does not exist" not in exc.format_message():
                    raise
                return  # a path of the operator's machine; the names parsed up to here
            if not isinstance(command, click.Group):
                return
            rest = [*getattr(ctx, "_protected_args", ()), *ctx.args]
            if not rest:
                raise click.UsageError(f"{name}: a subcommand is missing")
            found_name, found, args = command.resolve_command(ctx, rest)
            assert found is not None and found_name is not None
            command, name, parent = found, found_name, ctx


def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("LEDGER_"):
            monkeypatch.delenv(key)


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=_ids)
def test_shell_block_invocations_parse(block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
    _clean_environment(monkeypatch)
    for line in command_lines(block):
        for program, args in invocations(line):
            try:
                parse_invocation(program, args)
            except click.ClickException as exc:
                pytest.fail(f"{block.where}: {program} {shlex.join(args)}: {exc.format_message()}")


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=_ids)
def test_shell_block_says_whether_it_runs(block: Block) -> None:
    assert len(block.marks) == 1, (
        f"{block.where}: put <!-- run --> or <!-- not run: reason --> above this block"
    )


@pytest.mark.parametrize("block", RUNNABLE, ids=_ids)
def test_runnable_block_runs(block: Block, tmp_path: Path) -> None:
    assert block.lang != "console", f"{block.where}: a console block shows output; it cannot run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.text],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, f"{block.where}:\n{done.stdout}\n{done.stderr}"


# --- TOML ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("block", TOML_BLOCKS, ids=_ids)
def test_toml_block_loads(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _clean_environment(monkeypatch)
    path = tmp_path / "config.toml"
    path.write_text(block.text + "\n")
    try:
        doc = tomllib.loads(block.text)
    except tomllib.TOMLDecodeError as exc:
        pytest.fail(f"{block.where}: not valid TOML: {exc}")
    try:
        if isinstance(doc.get("witness"), dict):  # ``ledger witness serve --config``
            load_witness_settings(path)
        else:  # ``ledger serve --config``
            load_settings(path)
    except Exception as exc:
        pytest.fail(f"{block.where}: {exc}")


# --- synopses -----------------------------------------------------------------------------------


def synopsis_lines(block: Block) -> Iterator[str]:
    for line in block.text.splitlines():
        words = line.split()
        if words and words[0] in PROGRAMS:
            yield line


def check_synopsis(line: str) -> None:
    """The command path of a synopsis line exists and every ``--option`` it names is real."""
    words = line.split("#", 1)[0].split()
    command: click.Command = PROGRAMS[words[0]]
    for word in words[1:]:
        if not isinstance(command, click.Group) or word not in command.commands:
            break
        command = command.commands[word]
    assert not isinstance(command, click.Group), f"{line!r}: names no command of {words[0]}"
    known = {opt for param in command.params for opt in param.opts} | {"--help"}
    for option in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line.split("#", 1)[0]):
        assert option in known, f"{line!r}: {command.name} has no option {option}"


@pytest.mark.parametrize("block", OTHER_BLOCKS, ids=_ids)
def test_synopsis_lines_name_real_commands(block: Block) -> None:
    for line in synopsis_lines(block):
        try:
            check_synopsis(line)
        except AssertionError as exc:
            pytest.fail(f"{block.where}: {exc}")


# --- paths ---------------------------------------------------------------------------------------

FILE_NAMED = re.compile(
    r"`((?:ledger|ledger_client|client|tests|tools|proto)/[\w/.-]+\.(?:py|json|proto))`"
)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_files_the_docs_name_exist(page: Path) -> None:
    for name in FILE_NAMED.findall(page.read_text(encoding="utf-8")):
        path = ROOT / ("client/" + name if name.startswith("ledger_client/") else name)
        assert path.is_file(), f"{page.relative_to(ROOT)} names {name}, which does not exist"


# --- the checks themselves ----------------------------------------------------------------------


def _block(text: str, lang: str = "sh") -> Block:
    return Block(ROOT / "README.md", 1, lang, text, ())


def _failure(program: str, args: list[str]) -> str:
    with pytest.raises(click.ClickException) as caught:
        parse_invocation(program, args)
    return caught.value.format_message()


def test_the_errors_a_newcomer_hit_are_caught(tmp_path: Path) -> None:
    # `ledger restore --from` does not exist: it is `ledger restore from-backup --from`
    assert "--from" in _failure("ledger", ["restore", "--from", "b", "--data-dir", "d"])
    parse_invocation("ledger", ["restore", "from-backup", "--from", "/b", "--data-dir", "d"])
    # a [server] block that lost its header puts its keys under [tiles] a second time
    lost_header = tmp_path / "lost.toml"
    lost_header.write_text('[tiles]\nlisten = ""\ndir = "t"\nlisten = "127.0.0.1:6962"\n')
    with pytest.raises(FormatError, match="Cannot overwrite a value"):
        load_settings(lost_header)
    assert "no-such" in _failure("ledger", ["serve", "--no-such"])
    assert "No such command" in _failure("ledger-verify", ["recipt", "r.json"])
    assert "--key" in _failure("ledger-verify", ["receipt", "r.json"])  # required
    assert "N" in _failure("ledger-verify", ["inclusion", "--leaf-hash", "h", "--index", "N",
                                             "--size", "1", "--root", "r"])  # fmt: skip


def test_invocations_are_found_wherever_the_shell_puts_them() -> None:
    text = (
        'VKEY=$(ledger verifier-key --key k)  # a comment\n'
        'LEDGER_TOKEN=$(cat t) ledger anchor --wait | tee out.txt\n'
        'ledger receipt fetch \\\n  --leaf leaf.bin --out r.json > log.txt && ledger-verify x\n'
    )  # fmt: skip
    found = [inv for line in command_lines(_block(text)) for inv in invocations(line)]
    assert found == [
        ("ledger", ["verifier-key", "--key", "k"]),
        ("ledger", ["anchor", "--wait"]),
        ("ledger", ["receipt", "fetch", "--leaf", "leaf.bin", "--out", "r.json"]),
        ("ledger-verify", ["x"]),
    ]
    console = "$ ledger-verify run run.jsonl \\\n  --key K\nOK: run verified\n$ echo done"
    assert command_lines(_block(console, "console")) == [
        "ledger-verify run run.jsonl    --key K", "echo done"
    ]  # fmt: skip


def test_marks_and_synopses_are_read() -> None:
    page = "<!-- not run: needs a server -->\n\n```sh\nledger anchor\n```\n<!-- run -->\n```toml"
    lines = page.splitlines()
    assert _marks(lines, 2) == ("not run: needs a server",)
    assert _marks(lines, 6) == ("run",)
    check_synopsis("ledger-verify receipt FILE --key VKEY [--tsa-root PEM ...] [--json]")
    with pytest.raises(AssertionError, match="--no-such"):
        check_synopsis("ledger-verify receipt FILE --no-such")
    with pytest.raises(AssertionError, match="names no command"):
        check_synopsis("ledger restore --from DIR")


def test_storage_docs_say_what_the_store_does() -> None:
    """The group commit is an unsynced batch, then ``flush_wal(True)``: the docs say so, once."""
    code = (ROOT / "ledger" / "store" / "rocks.py").read_text()
    assert "self._db.write(wb, self._nosync)" in code and "self._db.flush_wal(True)" in code
    storage = (ROOT / "docs" / "formats.md").read_text().split("## Storage", 1)[1].split("\n## ")[0]
    assert "without sync" in storage and "flush_wal(True)" in storage
    for page in PAGES:
        text = " ".join(page.read_text().split())
        assert "WriteBatch` written with `sync=True`" not in text, page


def test_every_page_has_blocks_to_check() -> None:
    assert SHELL_BLOCKS and TOML_BLOCKS and RUNNABLE
    assert {b.page.name for b in SHELL_BLOCKS} >= {"README.md", "operating.md", "auditing.md"}
