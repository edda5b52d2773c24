"""Operator configuration: embedded defaults < TOML file < command-line flags.

The TOML file has one table per concern; every key is optional:

    [log]
    origin = "ledger.example.com/agents/2026"   # change this: it names the log forever
    data_dir = "ledger-data"                    # RocksDB in <data_dir>/db, keys beside it
    key_file = "ledger-data/signer.key"         # created on first start (mode 0600)
    checkpoint_interval_ms = 50

    [server]
    listen = "127.0.0.1:6962"
    max_pending = 200000
    log_format = "text"                         # or "json" (JSON lines)

    [storage]
    memtable_mb = 16                            # x2, charged to the block cache
    cache_mb = 32

    [tiles]                                     # C2SP tlog-tiles (README "Tiles")
    listen = ""                                 # "" = 127.0.0.1:<gRPC port + 1>; "off"
    dir = "ledger-tiles"                        # a static mirror (default: none)

    [anchor]
    interval_s = 300                            # 0 disables the in-server schedule
    embedded_tsa = true                         # a development TSA in-process: proves nothing
    [[anchor.tsa]]                              # independent TSAs (repeatable)
    name = "freetsa"
    url = "https://freetsa.org/tsr"
    roots = ["freetsa-root.pem"]
    intermediates = []
    timeout_s = 10

    [witnessing]
    quorum = 2                                  # k of the n witnesses below (0: all of them)
    [[witness]]                                 # c2sp.org/tlog-witness witnesses (repeatable)
    name = "witness-1"
    url = "http://127.0.0.1:7380"               # POST <url>/add-checkpoint
    key = "witness-1+abcd1234+BA..."            # its tlog-cosignature verifier key (type 0x04)
    timeout_s = 10
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ledger.checkpoint import CosignatureVerifier
from ledger.errors import FormatError

__all__ = ["DEFAULT_ORIGIN", "Settings", "TsaSettings", "WitnessTarget", "load_settings"]

DEFAULT_ORIGIN = "ledger.localhost/dev"


@dataclass(frozen=True, slots=True, kw_only=True)
class TsaSettings:
    """One RFC 3161 time-stamping authority the anchorer asks."""

    name: str
    url: str
    roots: tuple[Path, ...]
    intermediates: tuple[Path, ...] = ()
    timeout_s: float = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class WitnessTarget:
    """One witness the log asks to cosign its checkpoints (``ledger.witnessing``)."""

    name: str
    url: str
    key: str  # tlog-cosignature verifier key string
    timeout_s: float = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """The effective configuration of ``ledger serve`` / ``ledger anchor``."""

    origin: str = DEFAULT_ORIGIN
    data_dir: Path = Path("ledger-data")
    key_file: Path | None = None  # default: <data_dir>/signer.key
    checkpoint_interval_ms: int = 50
    listen: str = "127.0.0.1:6962"
    max_pending: int = 200_000
    log_format: str = "text"
    memtable_mb: int = 16
    cache_mb: int = 32
    anchor_interval_s: float = 300.0
    embedded_tsa: bool = True
    tiles_listen: str = ""  # "": 127.0.0.1, next to the gRPC port; "off": no HTTP endpoint
    tiles_dir: Path | None = None
    tsas: tuple[TsaSettings, ...] = field(default=())
    witnesses: tuple[WitnessTarget, ...] = field(default=())
    witness_quorum: int = 0  # 0: every configured witness

    @property
    def signer_key_file(self) -> Path:
        """Where the signer key lives."""
        return self.key_file or self.data_dir / "signer.key"

    @property
    def db_dir(self) -> Path:
        """The RocksDB directory."""
        return self.data_dir / "db"

    def tiles_address(self, grpc_port: int) -> str | None:
        """Where the tiles endpoint listens (None: off); by default 127.0.0.1 at the gRPC port
        + 1 (port 0 when the gRPC port was picked by the OS)."""
        if self.tiles_listen == "off":
            return None
        if self.tiles_listen:
            return self.tiles_listen
        return f"127.0.0.1:{grpc_port + 1 if self.listen.endswith(':' + str(grpc_port)) else 0}"

    def to_dict(self) -> dict[str, Any]:
        """Plain values for ``ledger config show``."""
        out = asdict(self)
        out["key_file"] = str(self.signer_key_file)
        plain: dict[str, Any] = _plain(out)
        return plain

    def with_overrides(self, **overrides: Any) -> Settings:
        """A copy with the non-None overrides applied (flags win over the file)."""
        known = {f.name for f in fields(self)}
        unknown = set(overrides) - known
        if unknown:
            raise FormatError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


_TABLES: dict[str, dict[str, tuple[str, type]]] = {
    "log": {
        "origin": ("origin", str),
        "data_dir": ("data_dir", Path),
        "key_file": ("key_file", Path),
        "checkpoint_interval_ms": ("checkpoint_interval_ms", int),
    },
    "server": {
        "listen": ("listen", str),
        "max_pending": ("max_pending", int),
        "log_format": ("log_format", str),
    },
    "storage": {"memtable_mb": ("memtable_mb", int), "cache_mb": ("cache_mb", int)},
    "tiles": {"listen": ("tiles_listen", str), "dir": ("tiles_dir", Path)},
    "anchor": {
        "interval_s": ("anchor_interval_s", float),
        "embedded_tsa": ("embedded_tsa", bool),
    },
    "witnessing": {"quorum": ("witness_quorum", int)},
}


def _convert(where: str, value: Any, kind: type) -> Any:
    if kind is Path:
        if not isinstance(value, str):
            raise FormatError(f"{where}: want a path string, got {value!r}")
        return Path(value)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise FormatError(f"{where}: want {kind.__name__}, got {value!r}")
    return value


def _tsa(i: int, raw: Any) -> TsaSettings:
    where = f"anchor.tsa[{i}]"
    if not isinstance(raw, dict) or not {"name", "url", "roots"} <= raw.keys():
        raise FormatError(f"{where}: want a table with name, url and roots")
    extra = raw.keys() - {"name", "url", "roots", "intermediates", "timeout_s"}
    if extra:
        raise FormatError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
    return TsaSettings(
        name=_convert(f"{where}.name", raw["name"], str),
        url=_convert(f"{where}.url", raw["url"], str),
        roots=tuple(Path(_convert(f"{where}.roots", r, str)) for r in raw["roots"]),
        intermediates=tuple(
            Path(_convert(f"{where}.intermediates", r, str)) for r in raw.get("intermediates", [])
        ),
        timeout_s=_convert(f"{where}.timeout_s", raw.get("timeout_s", 10.0), float),
    )


def _witness(i: int, raw: Any) -> WitnessTarget:
    where = f"witness[{i}]"
    if not isinstance(raw, dict) or not {"name", "url", "key"} <= raw.keys():
        raise FormatError(f"{where}: want a table with name, url and key")
    extra = raw.keys() - {"name", "url", "key", "timeout_s"}
    if extra:
        raise FormatError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
    key = _convert(f"{where}.key", raw["key"], str)
    try:
        CosignatureVerifier.from_key_string(key)
    except FormatError as exc:
        raise FormatError(f"{where}.key: {exc}") from None
    return WitnessTarget(
        name=_convert(f"{where}.name", raw["name"], str),
        url=_convert(f"{where}.url", raw["url"], str),
        key=key,
        timeout_s=_convert(f"{where}.timeout_s", raw.get("timeout_s", 10.0), float),
    )


def load_settings(path: Path | None) -> Settings:
    """Embedded defaults, overlaid with the TOML file at ``path`` when given."""
    if path is None:
        return Settings()
    try:
        doc = tomllib.loads(path.read_text())
    except OSError as exc:
        raise FormatError(f"cannot read config {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(f"config {path} is not valid TOML: {exc}") from None
    values: dict[str, Any] = {}
    for table, raw in doc.items():
        if table == "witness" and isinstance(raw, list):
            values["witnesses"] = tuple(_witness(i, w) for i, w in enumerate(raw))
            continue
        if table not in _TABLES or not isinstance(raw, dict):
            raise FormatError(f"config {path}: unknown table [{table}]")
        for key, value in raw.items():
            if table == "anchor" and key == "tsa":
                values["tsas"] = tuple(_tsa(i, t) for i, t in enumerate(value))
                continue
            if key not in _TABLES[table]:
                raise FormatError(f"config {path}: unknown key {table}.{key}")
            name, kind = _TABLES[table][key]
            values[name] = _convert(f"{table}.{key}", value, kind)
    settings = Settings().with_overrides(**values)
    if not 0 <= settings.witness_quorum <= len(settings.witnesses):
        raise FormatError(
            f"config {path}: witnessing.quorum {settings.witness_quorum} needs "
            f"0..{len(settings.witnesses)} (the number of [[witness]] entries; 0: all)"
        )
    return settings
