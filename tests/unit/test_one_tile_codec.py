"""One home for the C2SP tlog-tiles constants and the entry-bundle codec: ``ledger/core/tiles.py``.

An AST walk over ``ledger/`` and ``client/`` fails on a tile constant assigned, or an
entry-bundle encoder/decoder defined, anywhere else, and on two tile classes with one name.
The second half feeds the checker sources that break each rule, so the check is seen to bite.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

from ledger.core import tiles

ROOT = Path(__file__).resolve().parents[2]
HOME = Path("ledger/core/tiles.py")
TREES = ("ledger", "client")

_CONSTANT = re.compile(
    r"_?(TILE_(HEIGHT|WIDTH|SIZE)|MAX_ENTRY\w*|(MAX_)?(ENTRY_)?BUNDLE_(SIZE|BYTES|WIDTH|ENTRIES)"
    r"|MAX_BUNDLE\w*)"
)
_CODEC = re.compile(
    r"_?((encode|decode|split|parse|pack|unpack|frame)_?(\w+_)?(bundle|entry|entries)\w*"
    r"|(\w+_)?bundle_(encode|decode|split|parse|entries|reader)|frame)"
)


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    else:
        return []
    names = []
    for target in targets:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                names.append(sub.id)
            elif isinstance(sub, ast.Attribute):
                names.append(sub.attr)
    return names


def violations(source: str, where: str) -> list[str]:
    """What ``source`` (at ``where``) does that only ``ledger/core/tiles.py`` may do."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.stmt):
            continue
        for name in _targets(node):
            if _CONSTANT.fullmatch(name):
                found.append(f"{where}:{node.lineno}: tile constant {name} assigned")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _CODEC.fullmatch(node.name):
            found.append(f"{where}:{node.lineno}: entry-bundle codec {node.name}() defined")
    return found


def _sources() -> list[Path]:
    paths = (p for tree in TREES for p in (ROOT / tree).rglob("*.py"))
    return sorted(p for p in paths if ".venv" not in p.parts)


def test_tile_constants_and_bundle_codec_live_in_one_module() -> None:
    found = []
    for path in _sources():
        rel = path.relative_to(ROOT)
        if rel != HOME:
            found += violations(path.read_text(encoding="utf-8"), str(rel))
    assert not found, "\n".join(found)


def test_the_home_module_holds_them() -> None:
    home = violations((ROOT / HOME).read_text(encoding="utf-8"), str(HOME))
    for want in ("TILE_HEIGHT", "TILE_WIDTH", "MAX_ENTRY", "encode_entry_bundle()"):
        assert any(want in line for line in home), want
    assert tiles.TILE_WIDTH == 1 << tiles.TILE_HEIGHT == 256


def test_each_tile_class_name_means_one_thing() -> None:
    names: Counter[str] = Counter()
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and "Tile" in node.name:
                names[node.name] += 1
    assert [name for name, count in names.items() if count > 1] == []


# --- the check bites --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "TILE_HEIGHT = 8",
        "TILE_WIDTH: int = 1 << 8",
        "_TILE_WIDTH = 256",
        "MAX_ENTRY = 0xFFFF",
        "MAX_BUNDLE_BYTES = 256 * 65537",
        "class C:\n    TILE_HEIGHT = 8",
        "def encode_bundle(leaves):\n    return b''",
        "def split_bundle(value):\n    return []",
        "def decode_entry_bundle(data, width):\n    return []",
        "def frame(leaf):\n    return leaf",
        "async def parse_bundle(data):\n    return []",
    ],
)
def test_the_check_bites(source: str) -> None:
    assert violations(source, "x.py")


@pytest.mark.parametrize(
    "source",
    [
        "TILE_CACHE = 'public, max-age=31536000, immutable'",
        "def get_entry_bundles(ids):\n    return []",
        "def receipt_bundle(x):\n    return x",
        "def bundle_key(index):\n    return b'B'",
        "width = tiles.TILE_WIDTH",
    ],
)
def test_the_check_leaves_other_names_alone(source: str) -> None:
    assert violations(source, "x.py") == []
