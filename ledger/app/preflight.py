"""Checks that run before ``ledger serve`` touches the disk: can we listen where we are told,
and is plaintext acceptable there.

``check_listen`` binds (and releases) a socket on the address with the options the servers use,
so a busy port, an address of another host or a name that does not resolve is reported before a
data dir, a key or a TSA state is created. ``check_mark_location``: the high-water mark must
not sit inside the data dir (a backup or restore of the data dir would carry it back, and it
would prove nothing); it returns warnings, which ``ledger.app.compose`` logs, when the mark
sits beside the data dir or on tmpfs or overlay. The default mark path
``<data_dir>.high-water`` *is* beside the data dir; we keep that default (moving it would
silently orphan every existing mark) and warn, because a snapshot of the parent folder carries
the mark back with the data: configure ``[log] mark_file`` on another volume, and configure
witnesses, which are the only check that catches a whole-host snapshot restore
(``ledger.log.evidence``). Plaintext gRPC is for loopback development: a
listener beyond loopback needs ``[tls]`` or the explicit ``[server] allow_plaintext = true``.
``check_file_limit``: the connection caps of ``[limits]`` plus a reserve for the store and the
writer (``FILES_RESERVE``) must fit the process's descriptor limit (``ulimit -n``); the soft
limit is raised towards the hard one when it is short, and a warning names the formula when
even that is not enough (docs/operating.md "Connection limits").
"""

from __future__ import annotations

import errno
import resource
import socket
from pathlib import Path

from ledger.app.settings import Settings, is_loopback, parse_listen
from ledger.core.errors import FailedPreconditionError, FormatError

__all__ = [
    "FILES_RESERVE",
    "check_file_limit",
    "check_listen",
    "check_mark_location",
    "check_plaintext",
    "files_needed",
]

VOLATILE_FS = ("tmpfs", "overlay", "ramfs")
FILES_RESERVE = 256  # RocksDB (WAL, table files, LOCK, LOG), the mark, the key, the TSA, spares
EMBEDDED_TSA_CONNECTIONS = 32  # ``ledger.tsa.server.MAX_CONNECTIONS``


def files_needed(settings: Settings, table_files: int = 0) -> int:
    """Descriptors the caps allow readers to hold, plus what the log keeps for itself
    (docs/operating.md "Connection limits"): gRPC connections + HTTP connections per listener x
    listeners (tiles, a metrics endpoint of its own) + the embedded TSA's + ``FILES_RESERVE``
    + the files in the RocksDB folder (``table_files``; RocksDB keeps its table files open)."""
    listeners = (settings.tiles_listen != "off") + (settings.metrics_listen not in ("", "off"))
    tsa = EMBEDDED_TSA_CONNECTIONS if settings.embedded_tsa else 0
    http = settings.http_max_connections * listeners
    return settings.grpc_max_connections + http + tsa + FILES_RESERVE + table_files


def _table_files(db_dir: Path) -> int:
    try:
        return sum(1 for _ in db_dir.iterdir())
    except OSError:  # not created yet
        return 0


def check_file_limit(settings: Settings) -> list[str]:
    """Raise the soft RLIMIT_NOFILE towards the hard one when the caps need more; a warning
    when the hard limit is short too."""
    needed = files_needed(settings, _table_files(settings.db_dir))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return []
    raised = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
    if raised > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    if soft >= needed:
        return []
    return [
        f"the connection limits and the log's own files (RocksDB's, a reserve of "
        f"{FILES_RESERVE}) need {needed} file descriptors, but the process may open {soft} "
        "(ulimit -n): raise the limit or lower [limits] grpc_max_connections / "
        "http_max_connections, or readers can exhaust what the writer needs"
    ]


def _filesystem(path: Path) -> str | None:
    """The type of the file system holding ``path`` (from /proc/self/mounts; None: unknown)."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    best, kind = -1, None
    target = str(path)
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        mount = fields[1].replace("\\040", " ")
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) > best:
            best, kind = len(mount), fields[2]
    return kind


def check_mark_location(settings: Settings) -> list[str]:
    """Refuse a mark inside the data dir; return the warnings (beside it, on tmpfs/overlay),
    which the caller logs once the data dir and key are known good."""
    data = settings.data_dir.resolve()
    mark = settings.high_water_file.resolve()
    if mark.is_relative_to(data):
        raise FailedPreconditionError(
            f"the high-water mark {mark} is inside the data dir {data}: a restored copy of the "
            "data dir would carry its own mark back; set [log] mark_file outside it"
        )
    warnings = []
    if mark.parent == data.parent:
        warnings.append(
            f"the high-water mark {mark} sits beside the data dir {data}: a snapshot of "
            f"{data.parent} carries it back together with the data; set [log] mark_file on "
            "another volume, and configure witnesses (only they catch a whole-host snapshot "
            "restore)"
        )
    kind = _filesystem(mark.parent)
    if kind in VOLATILE_FS:
        warnings.append(
            f"the high-water mark {mark} is on {kind}: it does not outlive the machine or "
            "container; set [log] mark_file on persistent storage"
        )
    return warnings


def check_listen(listen: str, what: str) -> None:
    """Raise a one-line error unless ``listen`` (HOST:PORT) can be bound right now."""
    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        raise FormatError(f"{what} {exc}") from None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise FormatError(f"{what} {listen!r}: cannot resolve {host!r}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise FailedPreconditionError(
                    f"{what} {listen}: the port is in use (is another server running?)"
                ) from None
            if exc.errno == errno.EADDRNOTAVAIL:
                raise FailedPreconditionError(
                    f"{what} {listen}: {host} is not an address of this host"
                ) from None
            raise FailedPreconditionError(f"{what} {listen}: {exc.strerror}") from None


def check_plaintext(settings: Settings, *, tls_enabled: bool) -> None:
    """Refuse plaintext beyond loopback unless explicitly allowed."""
    host, _ = parse_listen(settings.listen)
    if tls_enabled or is_loopback(host) or settings.allow_plaintext:
        return
    raise FailedPreconditionError(
        f"listen {settings.listen} is beyond loopback: configure [tls] cert and key "
        "(`ledger tls dev-cert` for development), or set [server] allow_plaintext = true"
    )
