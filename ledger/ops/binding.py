"""The data dir is bound to its log: origin and public key recorded when the dir is created.

``<data_dir>/log.json`` (mode 0600; rewritten only by ``rotate_key`` and access changes)::

    {"format": "decision-ledger/data-dir/v1", "origin": "...", "verifier_key": "<C2SP key>",
     "previous_keys": ["<C2SP key>", ...], "access": "open" | "closed",
     "access_events": [{"state": "closed", "at": <unix s>, "by": "...", "reason": "..."}, ...]}

The *access* state is the log's memory that it requires credentials: it is recorded as
``closed`` the first time a credential exists (``ledger token create``, or a server that sees a
token or an mTLS identity), and stays closed when the tokens file is deleted, the last token is
revoked or a backup is restored (restores keep the stricter state). Only ``ledger access open
--reason`` (``set_access``) reopens it, and every change is recorded with its time and reason.
``AccessWatch`` is the running server's view of it, re-read within a second.

``open_bound_signer`` is what ``ledger serve`` calls before anything else touches the disk: a
new data dir (no ``db``) is created 0700, with a key generated only if the key file does not
exist; an existing one must have its key file (never silently replaced), with the recorded
origin and key. Private key files readable by group or others are refused.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import FailedPreconditionError, FormatError
from ledger.fileio.keys import load_signer, write_signer
from ledger.fileio.private import check_private_file, write_private

__all__ = [
    "BINDING_FILE",
    "AccessEvent",
    "AccessWatch",
    "Binding",
    "bind_signer",
    "open_bound_signer",
    "read_binding",
    "rotate_key",
    "set_access",
    "write_binding",
]

BINDING_FILE = "log.json"
_FORMAT = "decision-ledger/data-dir/v1"
Access = Literal["open", "closed"]
_log = logging.getLogger("ledger.access")


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessEvent:
    """One change of the access state: what it became, when (unix s), by whom and why."""

    state: Access
    at: int
    by: str
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"state": self.state, "at": self.at, "by": self.by, "reason": self.reason}


def _access(value: object) -> Access:
    if value == "open":
        return "open"
    if value == "closed":
        return "closed"
    raise ValueError(f"access {value!r}, want 'open' or 'closed'")


@dataclass(frozen=True, slots=True, kw_only=True)
class Binding:
    """What a data dir is bound to: its origin, its current (and earlier) verifier keys and
    whether the log requires credentials (``access``, with the history of its changes)."""

    origin: str
    verifier_key: str
    previous_keys: tuple[str, ...] = ()
    access: Access = "open"
    access_events: tuple[AccessEvent, ...] = ()

    @property
    def closed(self) -> bool:
        """Whether the log requires credentials whatever the tokens file says."""
        return self.access == "closed"

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": _FORMAT,
                "origin": self.origin,
                "verifier_key": self.verifier_key,
                "previous_keys": list(self.previous_keys),
                "access": self.access,
                "access_events": [e.to_json() for e in self.access_events],
            },
            indent=2,
        )

    @classmethod
    def from_json(cls, text: str, where: Path) -> Binding:
        try:
            doc = json.loads(text)
            if doc.get("format") != _FORMAT:
                raise ValueError(f"format {doc.get('format')!r}, want {_FORMAT!r}")
            return cls(
                origin=str(doc["origin"]),
                verifier_key=str(doc["verifier_key"]),
                previous_keys=tuple(str(k) for k in doc.get("previous_keys", [])),
                access=_access(doc.get("access", "open")),
                access_events=tuple(
                    AccessEvent(
                        state=_access(e["state"]),
                        at=int(e["at"]),
                        by=str(e["by"]),
                        reason=str(e["reason"]),
                    )
                    for e in doc.get("access_events", [])
                ),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise FormatError(f"{where}: not a data-dir binding: {exc}") from None


def read_binding(data_dir: Path) -> Binding | None:
    """The binding of ``data_dir`` (None when it has none yet)."""
    path = data_dir / BINDING_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return Binding.from_json(raw.decode("utf-8"), path)
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not UTF-8 text (a binary file?)") from None


def _write_binding(data_dir: Path, binding: Binding) -> None:
    write_private(data_dir / BINDING_FILE, binding.to_json() + "\n")


def _is_new(data_dir: Path) -> bool:
    if data_dir.exists() and not data_dir.is_dir():
        raise FormatError(f"data dir {data_dir} exists and is not a directory")
    return not (data_dir / "db").exists() and not (data_dir / BINDING_FILE).exists()


def _check(binding: Binding, signer: Ed25519Signer, origin: str, key_file: Path) -> None:
    if binding.origin != origin:
        raise FailedPreconditionError(
            f"this data dir holds the log {binding.origin!r}, not {origin!r}: the origin names "
            "a log forever (start with its own origin, or use a new data dir)"
        )
    key = signer.verifier().key_string()
    if key != binding.verifier_key:
        raise FailedPreconditionError(
            f"key {key_file} ({key}) is not this log's key ({binding.verifier_key}); "
            "rotating keys is deliberate: `ledger rotate-key`"
        )


def open_bound_signer(
    data_dir: Path, key_file: Path, origin: str, *, create: bool = True
) -> tuple[Ed25519Signer, bool]:
    """The log's signer, checked against the binding; for a new data dir (and ``create``),
    create the dir (0700), the key (only if absent) and the binding. Says if a key was made."""
    if _is_new(data_dir):
        if not create:
            raise FailedPreconditionError(f"{data_dir} holds no log")
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        created = not key_file.exists()
        if created:
            write_signer(key_file, Ed25519Signer.generate(origin))
        check_private_file(key_file, "signer key")
        signer = load_signer(key_file)
        if signer.name != origin:
            raise FailedPreconditionError(
                f"key {key_file} is named {signer.name!r}, but the origin is {origin!r}"
            )
        _write_binding(data_dir, Binding(origin=origin, verifier_key=_vkey(signer)))
        return signer, created
    if not key_file.exists():
        recorded = read_binding(data_dir)
        known = f" (its verifier key is {recorded.verifier_key})" if recorded else ""
        raise FailedPreconditionError(
            f"signer key {key_file} is missing, but {data_dir} holds a log{known}: restore "
            "the key file; a new key would make new checkpoints fail against the published key"
        )
    check_private_file(key_file, "signer key")
    signer = load_signer(key_file)
    binding = read_binding(data_dir)
    if binding is None:  # a log created before bindings existed: bind it now
        binding = Binding(origin=signer.name, verifier_key=_vkey(signer))
        _check(binding, signer, origin, key_file)
        _write_binding(data_dir, binding)
    _check(binding, signer, origin, key_file)
    return signer, False


def bind_signer(data_dir: Path, signer: Ed25519Signer, origin: str) -> None:
    """For a signer given in code (tests, embedding): create a new data dir (0700) bound to it,
    or check an existing binding."""
    if signer.name != origin:
        raise FailedPreconditionError(
            f"the signer is named {signer.name!r}, but the origin is {origin!r}"
        )
    if _is_new(data_dir):
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_binding(data_dir, Binding(origin=origin, verifier_key=_vkey(signer)))
        return
    binding = read_binding(data_dir)
    if binding is None:
        binding = Binding(origin=origin, verifier_key=_vkey(signer))
        _write_binding(data_dir, binding)
    _check(binding, signer, origin, Path("(given signer)"))


def _vkey(signer: Ed25519Signer) -> str:
    return signer.verifier().key_string()


def rotate_key(data_dir: Path, key_file: Path, new_key: Path | None) -> Binding:
    """Deliberately rotate the log's key (stopped log): the current key file is kept as
    ``<key_file>.retired-<unix time>``, the new one (``new_key``, else a generated key) takes
    its place, and the binding records the new verifier key and the earlier ones."""
    binding = read_binding(data_dir)
    if binding is None:
        raise FailedPreconditionError(f"{data_dir} has no binding ({BINDING_FILE}): no log")
    if new_key is not None:
        check_private_file(new_key, "new signer key")
        signer = load_signer(new_key)
    else:
        signer = Ed25519Signer.generate(binding.origin)
    if signer.name != binding.origin:
        raise FailedPreconditionError(
            f"new key is named {signer.name!r}, but the log's origin is {binding.origin!r}"
        )
    if _vkey(signer) == binding.verifier_key:
        raise FailedPreconditionError("the new key is the current key")
    if key_file.exists():
        key_file.rename(key_file.with_name(f"{key_file.name}.retired-{int(time.time())}"))
    write_signer(key_file, signer)
    rotated = replace(
        binding,
        verifier_key=_vkey(signer),
        previous_keys=(*binding.previous_keys, binding.verifier_key),
    )
    _write_binding(data_dir, rotated)
    return rotated


def write_binding(data_dir: Path, binding: Binding) -> None:
    """Write ``binding`` as the data dir's (restores: the binding of the restored log)."""
    _write_binding(data_dir, binding)


def set_access(
    data_dir: Path, state: Access, *, by: str, reason: str, now: Callable[[], float] = time.time
) -> tuple[Binding, bool]:
    """Record the access state ``state`` in the binding, with the event (who, why, when); says
    whether it changed (setting the current state again records nothing)."""
    binding = read_binding(data_dir)
    if binding is None:
        raise FailedPreconditionError(f"{data_dir} has no binding ({BINDING_FILE}): no log")
    if binding.access == state:
        return binding, False
    if not reason.strip():
        raise FormatError("give a reason: it is recorded in the binding")
    event = AccessEvent(state=state, at=int(now()), by=by, reason=reason.strip())
    changed = replace(binding, access=state, access_events=(*binding.access_events, event))
    _write_binding(data_dir, changed)
    return changed, True


class AccessWatch:
    """A running server's view of the binding's access state: re-read when the file changes
    (checked at most once a second), a change logged once on ``ledger.access``."""

    def __init__(self, data_dir: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._dir = data_dir
        self._clock = clock
        self._lock = threading.Lock()
        self._checked = float("-inf")
        self._stamp: tuple[int, int] | None = None
        self._closed = False
        self._reload()

    def closed(self) -> bool:
        """Whether the binding records the log as closed."""
        now = self._clock()
        if now - self._checked >= 1.0:
            with self._lock:
                self._checked = now
                self._reload()
        return self._closed

    def close(self, reason: str) -> None:
        """Record ``closed`` (a credential was seen): from now on the log stays closed."""
        with self._lock:
            try:
                _, changed = set_access(self._dir, "closed", by="ledger serve", reason=reason)
            except FileNotFoundError:
                return
            self._stamp = None
            self._reload()
        if changed:
            _log.warning("access closed and recorded in %s: %s", self._dir / BINDING_FILE, reason)

    def _reload(self) -> None:
        path = self._dir / BINDING_FILE
        try:
            st = path.stat()
        except FileNotFoundError:
            return  # keep the last state seen: deleting the binding does not reopen the log
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        binding = read_binding(self._dir)
        if binding is None:
            return
        self._stamp = stamp
        was, self._closed = self._closed, binding.closed
        last = binding.access_events[-1] if binding.access_events else None
        if was and not self._closed and last is not None:
            _log.warning(
                "access reopened to anonymous callers (%s at %d: %s)",
                last.by,
                last.at,
                last.reason,
            )
