"""Operator configuration: embedded defaults < TOML file < command-line flags.

The TOML file has one table per concern; every key is optional:

    [log]
    origin = "ledger.example.com/agents/2026"   # change this: it names the log forever
    data_dir = "ledger-data"                    # RocksDB in <data_dir>/db, keys beside it
    key_file = "ledger-data/signer.key"         # created on first start (mode 0600)
    mark_file = "ledger-data.high-water"        # published high-water mark: keep it outside
                                                # the data dir (default: beside it)
    checkpoint_interval_ms = 50

    [server]
    listen = "127.0.0.1:6962"
    max_pending = 200000
    max_request_mb = 2                          # larger requests are refused by gRPC core
    max_concurrent_rpcs = 0                     # 0: no server-wide cap; else RESOURCE_EXHAUSTED
    inflight_mb = 64                            # one budget for every request held in memory
    stream_idle_s = 60                          # a stream with no message this long is closed
    log_format = "text"                         # or "json" (JSON lines)

    [storage]
    memtable_mb = 16                            # x2, charged to the block cache
    cache_mb = 32

    [anchor]
    interval_s = 300                            # 0 disables the in-server schedule
    embedded_tsa = true                         # a development TSA in-process: proves nothing
    [[anchor.tsa]]                              # independent TSAs (repeatable)
    name = "freetsa"
    url = "https://freetsa.org/tsr"
    roots = ["freetsa-root.pem"]
    intermediates = []
    timeout_s = 10
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ledger.errors import FormatError

__all__ = ["DEFAULT_ORIGIN", "Settings", "TsaSettings", "load_settings"]

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
class Settings:
    """The effective configuration of ``ledger serve`` / ``ledger anchor``."""

    origin: str = DEFAULT_ORIGIN
    data_dir: Path = Path("ledger-data")
    key_file: Path | None = None  # default: <data_dir>/signer.key
    mark_file: Path | None = None  # default: <data_dir>.high-water, beside the data dir
    checkpoint_interval_ms: int = 50
    listen: str = "127.0.0.1:6962"
    max_pending: int = 200_000
    max_request_mb: int = 2
    max_concurrent_rpcs: int = 0
    inflight_mb: int = 64
    stream_idle_s: float = 60.0
    log_format: str = "text"
    memtable_mb: int = 16
    cache_mb: int = 32
    anchor_interval_s: float = 300.0
    embedded_tsa: bool = True
    tsas: tuple[TsaSettings, ...] = field(default=())

    @property
    def signer_key_file(self) -> Path:
        """Where the signer key lives."""
        return self.key_file or self.data_dir / "signer.key"

    @property
    def high_water_file(self) -> Path:
        """The published high-water mark (``ledger.highwater``), outside the data dir."""
        return self.mark_file or self.data_dir.with_name(self.data_dir.name + ".high-water")

    @property
    def db_dir(self) -> Path:
        """The RocksDB directory."""
        return self.data_dir / "db"

    def to_dict(self) -> dict[str, Any]:
        """Plain values for ``ledger config show``."""
        out = asdict(self)
        out["key_file"] = str(self.signer_key_file)
        out["mark_file"] = str(self.high_water_file)
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
        "mark_file": ("mark_file", Path),
        "checkpoint_interval_ms": ("checkpoint_interval_ms", int),
    },
    "server": {
        "listen": ("listen", str),
        "max_pending": ("max_pending", int),
        "max_request_mb": ("max_request_mb", int),
        "max_concurrent_rpcs": ("max_concurrent_rpcs", int),
        "inflight_mb": ("inflight_mb", int),
        "stream_idle_s": ("stream_idle_s", float),
        "log_format": ("log_format", str),
    },
    "storage": {"memtable_mb": ("memtable_mb", int), "cache_mb": ("cache_mb", int)},
    "anchor": {
        "interval_s": ("anchor_interval_s", float),
        "embedded_tsa": ("embedded_tsa", bool),
    },
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
    return Settings().with_overrides(**values)
