"""Outcomes of the verifying subcommands, ``--json``, hash parsing.

Exit codes (their values in ``clikit.errors``), set in one place (``finish``): 0 valid,
1 invalid (well-formed input whose claim fails), 2 usage error or input that does not parse,
3 anchors pending (TSA roots given, everything verified, but a receipt carries no anchor yet;
never valid, never invalid), 4 unsupported schema version
(input newer than this tool; never reported as invalid).
"""

from __future__ import annotations

import json
import re
import secrets
import sys
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, NoReturn

import click

from ledger.core.errors import (
    AnchorsPendingError,
    FormatError,
    LedgerError,
    TimestampError,
    UnsupportedSchemaError,
    VerificationError,
)
from ledger_client.clikit import encoding
from ledger_client.clikit.errors import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PENDING,
    EXIT_UNSUPPORTED,
    EXIT_USAGE,
)

EXIT_VALID, EXIT_INVALID = EXIT_OK, EXIT_FAILED

HASH_HELP = "32-byte hash, hex or base64"
UNSUPPORTED = "unsupported_schema_version"  # the ``status`` of that outcome in ``--json``
PENDING = "anchors_pending"  # likewise


@dataclass(slots=True)
class Outcome:
    """What one subcommand found: printed for people, or as one JSON object with ``--json``."""

    check: str
    details: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    # placeholder string in ``details`` -> the JSON text written in its place (``SharedJson``),
    # or the pieces of that text, written one after another (a long answer, never joined);
    # a placeholder inside such a text is not replaced
    spliced: Mapping[str, str | list[str]] = field(default_factory=dict)


class SharedJson:
    """One JSON value many places of an answer share, encoded once (``lineage --db`` gives
    thousands of records the same stored verdict): ``put(value)`` returns a placeholder string
    to store instead, which ``finish`` replaces with the value's sorted-key JSON text. The
    placeholder carries a random 128-bit token, so no string of the answer can spell it."""

    def __init__(self) -> None:
        self._token = secrets.token_hex(16)
        self._by_id: dict[int, str] = {}
        self.texts: dict[str, str | list[str]] = {}

    def put(self, value: object) -> str:
        found = self._by_id.get(id(value))
        if found is None:
            found = f"\x00shared-{self._token}-{len(self._by_id)}"
            self._by_id[id(value)] = found
            self.texts[json.dumps(found)] = json.dumps(value, sort_keys=True)
        return found

    def put_text(self, name: str, text: str | list[str]) -> str:
        """A placeholder for JSON text written already (or its pieces, written one after
        another, never joined: a long answer), named ``name`` in the placeholder."""
        mark = f"\x00{name}-{self._token}"
        self.texts[json.dumps(mark)] = text
        return mark


def finish(check: str, as_json: bool, run: Callable[[], Outcome]) -> NoReturn:
    """Run a check and exit with the code the CLI promises; the only place exit codes are set."""
    try:
        outcome = run()
    except AnchorsPendingError as exc:
        pending = {"valid": False, "check": check, "status": PENDING, "error": str(exc)}
        _emit(as_json, pending, f"ANCHORS PENDING: {exc}")
        sys.exit(EXIT_PENDING)
    except VerificationError as exc:
        payload: dict[str, Any] = {"valid": False, "check": check, "error": str(exc)}
        if isinstance(exc, TimestampError):
            payload["failed_check"] = exc.check
        _emit(as_json, payload, f"INVALID: {exc}")
        sys.exit(EXIT_INVALID)
    except UnsupportedSchemaError as exc:
        payload = {"valid": False, "check": check, "status": UNSUPPORTED, "error": str(exc)}
        _emit(as_json, {**payload, "schema_version": exc.version}, f"UNSUPPORTED: {exc}")
        sys.exit(EXIT_UNSUPPORTED)
    except (FormatError, click.BadParameter, OSError) as exc:
        message = exc.format_message() if isinstance(exc, click.BadParameter) else str(exc)
        _emit(as_json, {"valid": False, "check": check, "error": message}, f"error: {message}")
        sys.exit(EXIT_USAGE)
    except LedgerError as exc:  # anything else we raise on purpose is a usage problem
        _emit(as_json, {"valid": False, "check": check, "error": str(exc)}, f"error: {exc}")
        sys.exit(EXIT_USAGE)
    payload = {"valid": True, "check": outcome.check, **outcome.details}
    human = "\n".join([f"OK: {outcome.check} verified", *outcome.lines])
    _emit(as_json, payload, human, outcome.spliced)
    sys.exit(EXIT_VALID)


def _emit(
    as_json: bool,
    payload: dict[str, Any],
    human: str,
    spliced: Mapping[str, str | list[str]] | None = None,
) -> None:
    if as_json:
        # as ``click.echo`` writes it: ASCII JSON holds no ANSI code to strip (19 MB: 0.1 s)
        text, done, pieces = json.dumps(payload, sort_keys=True), 0, []
        if spliced:  # each placeholder (in the skeleton, not in a spliced value) replaced
            for found in re.finditer("|".join(map(re.escape, spliced)), text):
                pieces.append(text[done : found.start()])
                value = spliced[found.group()]
                pieces += [value] if isinstance(value, str) else value
                done = found.end()
        pieces += (text[done:], "\n")
        _write_joined(pieces)
    elif payload["valid"]:
        click.echo(human)
    else:
        click.echo(human, err=True)


def _write_joined(pieces: list[str], size: int = 1 << 16) -> None:
    """The pieces to stdout, joined into writes of at most ``size`` characters (a longer piece
    alone; stdout may be unbuffered, ``PYTHONUNBUFFERED``: each write a system call). A pipe's
    size: a chunk (and its encoded bytes) stays below the allocator's mmap threshold, so its
    memory is reused rather than mapped and faulted in afresh for every chunk (19 MB: 8,700
    page faults). Where each chunk ends is found from the pieces' running lengths (in C:
    ``lineage --db`` writes some 50,000 pieces)."""
    write, ends, at = sys.stdout.write, list(accumulate(map(len, pieces))), 0
    while at < len(pieces):
        done = ends[at - 1] if at else 0
        cut = max(bisect_right(ends, done + size, lo=at), at + 1)
        write("".join(pieces[at:cut]))
        at = cut
    sys.stdout.flush()


def parse_hash(value: str, what: str) -> bytes:
    """Parse a hash given as hex or base64 (a click usage error when neither)."""
    try:
        return encoding.decode_hash(value)
    except FormatError as exc:
        raise click.BadParameter(f"{what}: {exc}") from None


def parse_hashes(values: Sequence[str], what: str) -> list[bytes]:
    return [parse_hash(v, f"{what} {i}") for i, v in enumerate(values)]


json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
