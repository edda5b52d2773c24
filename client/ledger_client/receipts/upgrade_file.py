"""Upgrading a receipts file in place: one receipt, or every receipt of a run file.

What ``ledger receipt upgrade`` (over gRPC, anchors included) and ``ledger-verify
receipt-upgrade`` (over tiles) share; the upgrade of one receipt is theirs (``upgrade``).
Pure of grpc; reads and writes files only.

* A **receipt file** is one receipt object (``decision-ledger/receipt/v1``).
* A **run file** is JSON lines ``{"record": <record or null>, "receipt": <receipt>}``, as
  ``ledger_run(..., receipts=PATH)`` writes it (``ledger_client.receipts.run_load``). Every
  line's receipt is upgraded; each line's ``record`` member is kept exactly as it was. A line
  whose receipt is ``null`` (the log had not covered the run) must be completed first with
  ``ledger receipt run``. A run folder (``*.json``) is refused: give its files one by one.

The file is told apart by its first JSON value: a receipt object, or an item with ``receipt``
and ``record``. Nothing is written unless every receipt was upgraded; the result replaces
``out`` (default: the file itself) atomically (``ledger.fileio.durable.write_file``: temporary
file, fsync, rename, fsync of the folder), so a crash leaves the old file or the new one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ledger.core.errors import FormatError, InvalidRecordError, UnsupportedSchemaError
from ledger.core.jcs import Json, canonical_bytes, loads_strict
from ledger.fileio.durable import write_file
from ledger_client.receipts.receipt import Receipt

__all__ = ["UpgradedFile", "upgrade_file"]

_ITEM_FIELDS = {"record", "receipt"}


@dataclass(frozen=True, slots=True, kw_only=True)
class UpgradedFile:
    """What ``upgrade_file`` wrote: the file, its kind, and every receipt after the upgrade."""

    out: Path
    kind: str  # "receipt" or "run"
    receipts: tuple[Receipt, ...]

    @property
    def anchored(self) -> int:
        """How many receipts now carry an anchor (their own checkpoint's or a previous one's)."""
        return sum(1 for r in self.receipts if r.anchors or (r.previous and r.previous.anchors))

    def to_json_obj(self) -> dict[str, Json]:
        sizes = sorted({r.tree_size for r in self.receipts})
        return {
            "out": str(self.out),
            "kind": self.kind,
            "records": len(self.receipts),
            "anchored": self.anchored,
            "tree_sizes": list(sizes),
        }


def _parse(data: bytes, source: str) -> Json:
    try:
        return loads_strict(data, safe_numbers=True)
    except InvalidRecordError as exc:
        raise FormatError(f"{source}: {exc}") from None


def _is_item(obj: Json) -> bool:
    return isinstance(obj, dict) and "receipt" in obj and not isinstance(obj["receipt"], str)


def _item(obj: Json, source: str) -> tuple[Json, Receipt]:
    if not isinstance(obj, dict) or not _is_item(obj):
        raise FormatError(f"{source}: expected an object with 'record' and 'receipt'")
    unknown = sorted(set(obj) - _ITEM_FIELDS)
    if unknown:
        raise FormatError(f"{source}: unknown field(s) {', '.join(map(repr, unknown))}")
    if obj["receipt"] is None:
        raise FormatError(
            f"{source}: no receipt yet (the log had not covered the run): complete the file "
            "with `ledger receipt run --spool SPOOL --out FILE` first"
        )
    try:
        return obj.get("record"), Receipt.from_json_obj(obj["receipt"], checked=True)
    except UnsupportedSchemaError as exc:
        raise exc.at(source) from None
    except FormatError as exc:
        raise FormatError(f"{source}: {exc}") from None


def _line(record: Json, receipt: Receipt) -> bytes:
    return canonical_bytes({"record": record, "receipt": receipt.to_json_obj()}) + b"\n"


def _run_lines(data: bytes, name: str) -> list[tuple[int, Json, Receipt]]:
    lines = []
    for number, raw in enumerate(data.splitlines(), 1):
        if raw.strip():
            source = f"{name}:{number}"
            record, receipt = _item(_parse(raw, source), source)
            lines.append((number, record, receipt))
    if not lines:
        raise FormatError(f"{name}: no records found")
    return lines


def _starts_with_item(data: bytes) -> bool:
    """Whether the first line is a run item (else: the file is one receipt, maybe indented)."""
    first = next((line for line in data.splitlines() if line.strip()), b"")
    try:
        return _is_item(loads_strict(first, safe_numbers=True))
    except InvalidRecordError:
        return False


def upgrade_file(
    path: str | Path, upgrade: Callable[[Receipt], Receipt], *, out: str | Path | None = None
) -> UpgradedFile:
    """Upgrade the receipt file or run file ``path`` (module docstring) with ``upgrade`` and
    write the result to ``out`` (default: ``path``) atomically.

    Raises ``FormatError`` (the file and line named) for input that does not parse, and
    whatever ``upgrade`` raises (nothing is written then)."""
    source = Path(path)
    if source.is_dir():
        raise FormatError(f"{source}: a run folder; upgrade its receipt files one by one")
    data = source.read_bytes()
    target = source if out is None else Path(out)
    if not _starts_with_item(data):
        try:
            receipt = Receipt.from_json_obj(_parse(data, source.name), checked=True)
        except UnsupportedSchemaError as exc:  # its own exit code: never "does not parse"
            raise exc.at(source.name) from None
        except FormatError as exc:
            raise FormatError(f"{source.name}: {exc}") from None
        upgraded = upgrade(receipt)
        write_file(target, upgraded.to_json().encode("utf-8"))
        return UpgradedFile(out=target, kind="receipt", receipts=(upgraded,))
    done = []
    for _, record, receipt in _run_lines(data, source.name):
        done.append((record, upgrade(receipt)))
    write_file(target, b"".join(_line(record, receipt) for record, receipt in done))
    return UpgradedFile(out=target, kind="run", receipts=tuple(r for _, r in done))
