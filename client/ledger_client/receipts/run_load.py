"""Reading run files: the one reader of ``ledger-verify run``, ``lineage``, ``report``,
``disclose --digest`` and the index (``index``, ``query``).

Pure of grpc, rocksdict and aiohttp; reads files only. A run is a folder of ``*.json`` files
(one item each) or a JSON-lines file; each item is ``{"record": <decision record or null>,
"receipt": <receipt>}`` (``record`` may be left out or null when the receipt carries it).

Strict, the same for every command: each item is parsed with ``ledger.core.jcs.loads_strict``
(``safe_numbers``: duplicate member names, NaN/Infinity, lone surrogates, integers outside
+-(2**53 - 1) and nesting deeper than ``MAX_DEPTH`` are refused), every field is validated
(``Receipt.from_json_obj``, ``DecisionRecord.from_json_obj``), an unknown member, a missing
receipt or record, or an item larger than ``MAX_ITEM_BYTES`` (``ledger.core.limits``: a record
at the size limit beside its receipt) is refused, and the first problem
raises ``FormatError`` naming the file (and line) and every unknown member. A record or
receipt of a newer schema version raises ``UnsupportedSchemaError`` ("unsupported schema
version N, upgrade ledger-verify"), never taken for a damaged item. What the verifier refuses,
the index refuses.

Fast: the record beside a receipt that also carries it is validated once when both are the very
same JSON (same members, values and JSON types), so an index of 200,000 receipts pays one
parse and one validation per record; lines are read by ``loads_exact`` (``loads_strict``, as
strict) and each record's digest is hashed from the JSON it was read from (``RunItem.read``).
"""

from __future__ import annotations

import json
import marshal
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from ledger.core import accel
from ledger.core.errors import FormatError, InvalidRecordError, UnsupportedSchemaError
from ledger.core.jcs import Json, loads_exact
from ledger.core.limits import MAX_ITEM_BYTES
from ledger.records.decision import DecisionRecord
from ledger_client.receipts.receipt import Receipt
from ledger_client.receipts.run_verify import RunItem

__all__ = ["MAX_ITEM_BYTES", "load_run", "run_item"]

_SAME = accel.same_json  # None: ``_same_json_plain`` compares
_ITEM_MEMBERS = frozenset({"record", "receipt"})


def _same_json(a: Json, b: Json) -> bool:
    """Whether ``a`` and ``b`` are the same JSON value, JSON types included (``1``, ``1.0``
    and ``true`` differ; member order does not matter): the compiled ``accel.same_json`` when
    it answers, else its twin ``_same_json_plain``."""
    answer = None if _SAME is None else _SAME(a, b)
    return _same_json_plain(a, b) if answer is None else answer


def _same_json_plain(a: Json, b: Json) -> bool:
    """``_same_json`` in Python."""
    if a is b:
        return True
    if a != b:  # Python equality is looser (1 == 1.0 == true), never stricter
        return False
    # Equal as Python values: the same JSON when marshal writes them alike (it keeps every
    # type and the member order, as a writer gives both copies), else compare the JSON texts
    # with sorted members.
    if marshal.dumps(a) == marshal.dumps(b):
        return True
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _receipt(obj: Json, given: Json) -> tuple[Receipt, DecisionRecord | None]:
    """The receipt of an item and the record beside it (None: none given), each record
    validated once when the receipt carries the very record given beside it."""
    same = (
        isinstance(obj, dict)
        and obj.get("record") is not None
        and given is not None
        and not obj.get("disclosures")
        and _same_json(obj["record"], given)
    )
    if same and isinstance(obj, dict):
        try:
            record = DecisionRecord.from_json_obj(given, checked=True)
            return Receipt.from_json_obj(obj, checked=True, record=record), record
        except FormatError:
            pass  # refused either way: the reading below names the problem as it always has
    receipt = Receipt.from_json_obj(obj, checked=True)
    beside = None if given is None else DecisionRecord.from_json_obj(given, checked=True)
    return receipt, beside


def run_item(obj: Json, source: str, *, exact: bool = False) -> RunItem:
    """One item from its JSON (parsed by ``loads_strict(..., safe_numbers=True)``; ``exact``:
    by ``loads_exact``, which said so)."""
    if not isinstance(obj, dict) or "receipt" not in obj:
        raise FormatError(f"{source}: expected an object with 'receipt' and optional 'record'")
    unknown = [] if obj.keys() <= _ITEM_MEMBERS else sorted(set(obj) - _ITEM_MEMBERS)
    if unknown:
        names = ", ".join(map(repr, unknown))
        raise FormatError(
            f"{source}: unknown field{'s' if len(unknown) > 1 else ''} {names} "
            "(only 'record' and 'receipt')"
        )
    if obj["receipt"] is None:
        raise FormatError(
            f"{source}: no receipt yet (the log had not covered the run): complete the file "
            "with `ledger receipt run --spool SPOOL --out FILE`"
        )
    try:
        receipt, given = _receipt(obj["receipt"], obj.get("record"))
    except UnsupportedSchemaError as exc:
        raise exc.at(source) from None
    except FormatError as exc:
        raise FormatError(f"{source}: {exc}") from None
    record = receipt.record if given is None else given
    if record is None:
        raise FormatError(f"{source}: no record (neither beside the receipt nor in it)")
    inner = obj["receipt"]  # the JSON ``record`` was read from: its digest is hashed from it
    plain = obj.get("record") if given is not None else cast(dict[str, Json], inner)["record"]
    return RunItem.read(source, record, receipt, plain, exact=exact)


def _parse(data: bytes, source: str) -> tuple[Json, bool]:
    try:
        return loads_exact(data, safe_numbers=True)
    except InvalidRecordError as exc:
        raise FormatError(f"{source}: {exc}") from None


def _read_item_file(path: Path) -> bytes:
    with path.open("rb") as stream:
        data = stream.read(MAX_ITEM_BYTES + 1)
    if len(data) > MAX_ITEM_BYTES:
        raise FormatError(f"run item {path} is larger than {MAX_ITEM_BYTES} bytes")
    return data


def _lines_in(name: str, data: bytes) -> Iterator[RunItem]:
    """``_lines_of`` over a file's bytes already read (``load_run``'s ``data``): the same lines,
    numbers, items and refusals. A line is read without its newline (JSON whitespace: the same
    value); a line refused is read again with it, so the message is the one ``_lines_of``
    gives."""
    lines = data.split(b"\n")
    tail = lines.pop()  # after the last newline: nothing, or a last line without one
    for number, body in enumerate(lines, 1):
        if len(body) >= MAX_ITEM_BYTES:  # the line with its newline is longer than the limit
            raise FormatError(f"{name}:{number}: longer than {MAX_ITEM_BYTES} bytes")
        if body and not body.isspace():
            source = f"{name}:{number}"
            try:
                obj, exact = loads_exact(body, safe_numbers=True)
            except InvalidRecordError:
                obj, exact = _parse(body + b"\n", source)
            yield run_item(obj, source, exact=exact)
    if tail:
        number = len(lines) + 1
        if len(tail) > MAX_ITEM_BYTES:
            raise FormatError(f"{name}:{number}: longer than {MAX_ITEM_BYTES} bytes")
        if not tail.isspace():
            source = f"{name}:{number}"
            obj, exact = _parse(tail, source)
            yield run_item(obj, source, exact=exact)


def _lines_of(path: Path) -> Iterator[RunItem]:
    name = path.name
    with path.open("rb") as stream:
        for number, line in enumerate(stream, 1):
            if len(line) > MAX_ITEM_BYTES:
                raise FormatError(f"{name}:{number}: longer than {MAX_ITEM_BYTES} bytes")
            if not line.isspace():  # as `line.strip()`, without copying the line
                source = f"{name}:{number}"
                obj, exact = _parse(line, source)
                yield run_item(obj, source, exact=exact)


def load_run(path: str | Path, data: bytes | None = None) -> list[RunItem]:
    """The items of a run folder (``*.json``, one item each) or JSON-lines file (module
    docstring); ``FormatError`` names the first item refused, ``OSError`` an unreadable file.
    ``data``: the JSON-lines file's bytes, already read by the caller (the index hashes them),
    read as the file would be."""
    where = Path(path)
    if data is not None:
        items = list(_lines_in(where.name, data))
    elif where.is_dir():
        files = sorted(where.glob("*.json"))
        items = []
        for f in files:
            obj, exact = _parse(_read_item_file(f), f.name)
            items.append(run_item(obj, f.name, exact=exact))
    else:
        items = list(_lines_of(where))
    if not items:
        raise FormatError(f"{path}: no records found")
    return items
