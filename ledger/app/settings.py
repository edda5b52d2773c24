"""Operator configuration: embedded defaults < TOML file < environment (``LEDGER_<FIELD>``) < flags.

Environment names are the field names upper-cased (``LEDGER_MAX_PENDING``,
``LEDGER_TLS_SERVER_CERT``); none collides with the client's ``LEDGER_SERVER``,
``LEDGER_TOKEN`` and ``LEDGER_TLS_CA/CERT/KEY``.

``ledger witness serve`` has a model of its own, ``WitnessServeSettings`` (its ``[witness]``
table, ``LEDGER_WITNESS_<FIELD>``), loaded the same way (``load_witness_settings``).

One pydantic-settings model (``Settings``) holds every option with its range and description;
``ledger config init`` writes a commented sample from it and the ``--help`` of ``ledger serve``
takes its help texts and defaults from it. The TOML file has one table per concern; every key
is optional (``TABLES`` maps ``table.key`` to a field):

    [log]
    origin = "ledger.example.com/agents/2026"   # change this: it names the log forever
    data_dir = "ledger-data"                    # RocksDB in <data_dir>/db, keys beside it
    key_file = "ledger-data/signer.key"         # created with a new data dir only (mode 0600)
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
    stream_linger_ms = 10                       # a stream's next small group gathers this long
    log_format = "text"                         # or "json" (JSON lines)
    allow_plaintext = false                     # plaintext beyond loopback needs this

    [tls]                                       # gRPC and HTTP over TLS; client_ca: mTLS
    cert = "server.pem"
    key = "server.key"
    client_ca = "ca.pem"

    [auth]
    tokens_file = "ledger-data/tokens.json"     # hashes only (``ledger token create``)
    reads = "open"                              # or "token": reads need a credential too
    rate_per_s = 5000                           # per identity (token bucket); 0: no limit
    burst = 10000
    failures = 20                               # failed authentications per address ...
    failure_window_s = 60                       # ... per window, then RESOURCE_EXHAUSTED
    [auth.mtls]                                 # client-certificate CN -> scopes
    "agent-b" = ["append"]

    [metrics]
    listen = ""                                 # /metrics on the tiles endpoint; HOST:PORT; "off"

    [storage]
    memtable_mb = 16                            # x2, charged to the block cache
    cache_mb = 32

    [tiles]                                     # C2SP tlog-tiles (docs/formats.md "Tiles")
    listen = ""                                 # "" = 127.0.0.1:<gRPC port + 1>; "off"
    dir = "ledger-tiles"                        # a static mirror (default: none)

    [object_store]                              # mirror mode: publish to S3-compatible storage
    url = "s3://my-log-bucket/ledger"           # credentials: the usual AWS variables/profile
    endpoint = "https://s3.example.net"         # any S3-compatible store; empty for AWS
    region = "us-east-1"
    mode = "mirror"                             # "primary": acknowledged once in the bucket
    writer = ""                                 # primary: name in the lock (default host name)
    lease_s = 10                                # primary: a standby takes over after this
    standby = false                             # primary: follow, take over (--standby)

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

    [limits]                                    # what a reader may hold (docs/operating.md)
    http_header_timeout_s = 10                  # every HTTP listener (tiles, /metrics): a
    http_body_timeout_s = 10                    #   request head or body slower than this
    http_max_connections = 256                  #   is closed; past these caps (per listener,
    http_max_per_address = 32                   #   per client address) connections get 503
    grpc_max_connections = 100                  # gRPC: more connections are closed at once
    grpc_idle_s = 300                           # GOAWAY after this long without a call
    grpc_max_age_s = 3600                       # GOAWAY at this age (0: never), then
    grpc_age_grace_s = 300                      #   this long for calls to finish
    grpc_keepalive_s = 60                       # ping quiet connections; 20 s to answer
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from ledger.app.settings_errors import (
    FieldProblem,
    Where,
    describe,
    nearest,
    parse_failure,
    unknown_key,
    unknown_table,
)
from ledger.core.checkpoint import CosignatureVerifier, Ed25519Verifier
from ledger.core.errors import FormatError

__all__ = [
    "DEFAULT_ORIGIN",
    "TABLES",
    "Settings",
    "TsaSettings",
    "WitnessLog",
    "WitnessServeSettings",
    "WitnessTarget",
    "load_settings",
    "load_witness_settings",
    "parse_listen",
]

DEFAULT_ORIGIN = "ledger.localhost/dev"
ENV_PREFIX = "LEDGER_"
Scope = Literal["append", "admin", "read"]


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); port 0..65535 (0 picks a free port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{value!r}: want HOST:PORT with a port in 0..65535")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (localhost, 127/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class TsaSettings(BaseModel):
    """One RFC 3161 time-stamping authority the anchorer asks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="name stored with each anchor")
    url: str = Field(pattern=r"^https?://", description="RFC 3161 endpoint (HTTP POST)")
    roots: tuple[Path, ...] = Field(min_length=1, description="trusted root certificates (PEM)")
    intermediates: tuple[Path, ...] = ()
    timeout_s: float = Field(10.0, gt=0, le=300, description="HTTP timeout, seconds")


class WitnessTarget(BaseModel):
    """One witness the log asks to cosign its checkpoints (``ledger.log.witnessing``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="the witness's name (status, metrics)")
    url: str = Field(pattern=r"^https?://", description="its base URL: POST <url>/add-checkpoint")
    key: str = Field(description="its tlog-cosignature verifier key (type 0x04)")
    timeout_s: float = Field(10.0, gt=0, le=300, description="HTTP timeout, seconds")

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        try:
            CosignatureVerifier.from_key_string(value)
        except FormatError as exc:
            raise ValueError(str(exc)) from None
        return value


class Settings(BaseSettings):
    """The effective configuration of ``ledger serve`` and the operator commands."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, frozen=True, extra="forbid", validate_default=True
    )

    origin: str = Field(
        DEFAULT_ORIGIN,
        min_length=1,
        max_length=255,
        pattern=r"^[^\s]+$",
        description="the log's origin: the first line of every checkpoint; names the log forever",
    )
    data_dir: Path = Field(
        Path("ledger-data"), description="data directory: RocksDB in <data_dir>/db, mode 0700"
    )
    key_file: Path | None = Field(
        None, description="signer key file (default <data_dir>/signer.key; mode 0600)"
    )
    mark_file: Path | None = Field(
        None,
        description="published high-water mark, outside the data dir "
        "(default <data_dir>.high-water)",
    )
    checkpoint_interval_ms: int = Field(
        50, ge=1, le=60_000, description="publish a checkpoint at most this often (ms)"
    )
    listen: str = Field("127.0.0.1:6962", description="gRPC HOST:PORT (port 0 picks a free port)")
    max_pending: int = Field(
        200_000, ge=1, le=10_000_000, description="queued items before RESOURCE_EXHAUSTED"
    )
    max_request_mb: int = Field(
        2, ge=1, le=16, description="largest request (MiB); larger ones are refused by gRPC core"
    )
    max_concurrent_rpcs: int = Field(
        0, ge=0, le=100_000, description="server-wide call cap; 0: none (it costs unary rate)"
    )
    inflight_mb: int = Field(
        64, ge=1, le=4096, description="one budget (MiB) for every request held in memory"
    )
    stream_idle_s: float = Field(
        60.0, gt=0, le=86_400, description="close a stream idle for this long (seconds)"
    )
    stream_linger_ms: int = Field(
        10,
        ge=0,
        le=1_000,
        description="a stream's next group of under 1,000 items gathers for up to this long "
        "after its last commit (ms; 0: commit at once)",
    )
    log_format: Literal["text", "json"] = Field("text", description="server log lines")
    access_log: bool = Field(True, description="one log line per call (ledger.access)")
    allow_plaintext: bool = Field(
        False, description="serve plaintext beyond loopback (never do this on a network)"
    )
    tls_server_cert: Path | None = Field(None, description="server certificate chain (PEM)")
    tls_server_key: Path | None = Field(None, description="server private key (PEM, mode 0600)")
    tls_client_ca: Path | None = Field(
        None, description="CA of client certificates: set it to require mTLS"
    )
    tokens_file: Path | None = Field(
        None, description="token hashes (default <data_dir>/tokens.json)"
    )
    auth_reads: Literal["open", "token"] = Field(
        "open", description="'open': anyone may read; 'token': reads need a credential"
    )
    auth_mtls: dict[str, tuple[Scope, ...]] = Field(
        default_factory=dict, description="client-certificate common name -> scopes"
    )
    rate_per_s: float = Field(
        5000.0, ge=0, le=1_000_000, description="calls per second per identity; 0: unlimited"
    )
    burst: int = Field(10_000, ge=1, le=1_000_000, description="token-bucket size per identity")
    auth_failures: int = Field(
        20,
        ge=0,
        le=1_000_000,
        description="failed authentications per client address per window; then refused; 0: off",
    )
    auth_failure_window_s: float = Field(
        60.0, gt=0, le=86_400, description="window of the failed-authentication count (s)"
    )
    metrics_listen: str = Field(
        "",
        description="/metrics: empty = on the tiles HTTP endpoint; HOST:PORT = its own; 'off'",
    )
    memtable_mb: int = Field(16, ge=1, le=4096, description="RocksDB memtable size (MiB), x2")
    cache_mb: int = Field(32, ge=1, le=65536, description="RocksDB block cache (MiB)")
    anchor_interval_s: float = Field(
        300.0, ge=0, le=86_400, description="anchor every N seconds; 0 disables the schedule"
    )
    embedded_tsa: bool = Field(
        True, description="in-process development TSA (proves nothing to third parties)"
    )
    tsas: tuple[TsaSettings, ...] = Field((), description="independent RFC 3161 TSAs")
    tiles_listen: str = Field(
        "", description="tiles HTTP HOST:PORT; empty: 127.0.0.1 at gRPC port + 1; 'off': none"
    )
    tiles_dir: Path | None = Field(None, description="static tiles mirror folder (none: off)")
    object_store_url: str = Field(
        "", description="mirror mode: publish to s3://BUCKET[/PREFIX] (empty: off)"
    )
    object_store_endpoint: str = Field(
        "", description="S3-compatible endpoint http(s)://HOST[:PORT] (empty: AWS)"
    )
    object_store_region: str = Field("", description="the bucket's region (empty: us-east-1)")
    object_store_mode: Literal["mirror", "primary"] = Field(
        "mirror", description="mirror: local store first; primary: acknowledged once in the bucket"
    )
    object_store_writer: str = Field(
        "", description="primary mode: this writer's name in the lock (empty: host name)"
    )
    object_store_lease_s: float = Field(
        10.0, gt=0.2, le=3600, description="primary mode: lease a standby waits out (s)"
    )
    standby: bool = Field(False, description="primary mode: follow the bucket, take over later")
    clock_offset_ms: int = Field(
        0, ge=-86_400_000, le=86_400_000, description="fault tests: skew this server's wall clock"
    )
    witnesses: tuple[WitnessTarget, ...] = Field((), description="witnesses asked to cosign")
    witness_quorum: int = Field(
        0, ge=0, le=64, description="cosignatures a checkpoint needs (0: every witness)"
    )
    witness_start_timeout_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="at start, wait this long for the witnesses' view before signing anything",
    )
    witness_start_override: bool = Field(
        False,
        description="start read-write when too few witnesses answer at start (logged)",
    )
    http_header_timeout_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="HTTP: close a connection without a complete request head this long (s)",
    )
    http_body_timeout_s: float = Field(
        10.0, gt=0, le=3600, description="HTTP: cut a request whose body is slower than this (s)"
    )
    http_max_connections: int = Field(
        256, ge=1, le=100_000, description="HTTP: open connections per listener; more get 503"
    )
    http_max_per_address: int = Field(
        32, ge=1, le=100_000, description="HTTP: open connections from one address; more get 503"
    )
    grpc_max_connections: int = Field(
        100, ge=1, le=100_000, description="gRPC: open connections; more are closed at once"
    )
    grpc_idle_s: float = Field(
        300.0, gt=0, le=86_400, description="gRPC: GOAWAY to a connection with no call this long"
    )
    grpc_max_age_s: float = Field(
        3600.0, ge=0, le=864_000, description="gRPC: GOAWAY to a connection this old; 0: never"
    )
    grpc_age_grace_s: float = Field(
        300.0, ge=0, le=86_400, description="gRPC: time calls get to finish after that GOAWAY"
    )
    grpc_keepalive_s: float = Field(
        60.0, gt=0, le=86_400, description="gRPC: ping a quiet connection this often (s)"
    )

    @field_validator("object_store_url")
    @classmethod
    def _object_store_url(cls, value: str) -> str:
        if value and not value.startswith("s3://"):
            raise ValueError(f"{value!r}: want s3://BUCKET[/PREFIX]")
        return value

    @field_validator("object_store_endpoint")
    @classmethod
    def _object_store_endpoint(cls, value: str) -> str:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r}: want http(s)://HOST[:PORT]")
        return value

    @field_validator("tiles_listen")
    @classmethod
    def _tiles_listen(cls, value: str) -> str:
        if value not in ("", "off"):
            parse_listen(value)
        return value

    @model_validator(mode="after")
    def _quorum(self) -> Settings:
        if self.witness_quorum > len(self.witnesses):
            raise FieldProblem(
                "witness_quorum",
                f"{self.witness_quorum} needs 0..{len(self.witnesses)} "
                "(the number of witnesses configured; 0: all of them)",
            )
        return self

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        parse_listen(value)
        return value

    @field_validator("metrics_listen")
    @classmethod
    def _metrics_listen(cls, value: str) -> str:
        if value not in ("", "off"):
            parse_listen(value)
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags (init) > environment > TOML (``_FileSource``, set by ``load_settings``); the
        environment is left out while one layer alone is checked (``_FileSource.env``)."""
        if not _FileSource.env:
            return (init_settings, _FileSource(settings_cls))
        return (init_settings, env_settings, _FileSource(settings_cls))

    @property
    def signer_key_file(self) -> Path:
        """Where the signer key lives."""
        return self.key_file or self.data_dir / "signer.key"

    @property
    def high_water_file(self) -> Path:
        """The published high-water mark (``ledger.log.highwater``), outside the data dir."""
        return self.mark_file or self.data_dir.with_name(self.data_dir.name + ".high-water")

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

    @property
    def token_file(self) -> Path:
        """Where the token hashes live."""
        return self.tokens_file or self.data_dir / "tokens.json"

    @property
    def tls_enabled(self) -> bool:
        """Whether the servers speak TLS."""
        return self.tls_server_cert is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain values for ``ledger config show``."""
        out = self.model_dump(mode="json")
        out["key_file"] = str(self.signer_key_file)
        out["tokens_file"] = str(self.token_file)
        out["mark_file"] = str(self.high_water_file)
        return out

    def with_overrides(
        self, flags: Mapping[str, str] | None = None, /, **overrides: Any
    ) -> Settings:
        """A validated copy with the non-None overrides applied (flags win); an error names
        the flag (``flags``: setting -> flag where it is not ``--setting-name``)."""
        unknown = set(overrides) - set(Settings.model_fields)
        if unknown:
            raise FormatError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        values = self.model_dump()
        values.update({k: v for k, v in overrides.items() if v is not None})
        where = Where("flags", _KEY_OF, _SUBMODELS, flags=flags)
        return _validated(lambda: Settings.model_validate(values), where, env=False)


# table -> TOML key -> field (``auth.mtls`` and ``anchor.tsa`` are tables in TOML)
TABLES: dict[str, dict[str, str]] = {
    "log": {
        "origin": "origin",
        "data_dir": "data_dir",
        "key_file": "key_file",
        "mark_file": "mark_file",
        "checkpoint_interval_ms": "checkpoint_interval_ms",
        "clock_offset_ms": "clock_offset_ms",
    },
    "server": {
        "listen": "listen",
        "max_pending": "max_pending",
        "max_request_mb": "max_request_mb",
        "max_concurrent_rpcs": "max_concurrent_rpcs",
        "inflight_mb": "inflight_mb",
        "stream_idle_s": "stream_idle_s",
        "stream_linger_ms": "stream_linger_ms",
        "log_format": "log_format",
        "allow_plaintext": "allow_plaintext",
        "access_log": "access_log",
    },
    "tls": {"cert": "tls_server_cert", "key": "tls_server_key", "client_ca": "tls_client_ca"},
    "auth": {
        "tokens_file": "tokens_file",
        "reads": "auth_reads",
        "mtls": "auth_mtls",
        "rate_per_s": "rate_per_s",
        "burst": "burst",
        "failures": "auth_failures",
        "failure_window_s": "auth_failure_window_s",
    },
    "metrics": {"listen": "metrics_listen"},
    "storage": {"memtable_mb": "memtable_mb", "cache_mb": "cache_mb"},
    "tiles": {"listen": "tiles_listen", "dir": "tiles_dir"},
    "object_store": {
        "url": "object_store_url",
        "endpoint": "object_store_endpoint",
        "region": "object_store_region",
        "mode": "object_store_mode",
        "writer": "object_store_writer",
        "lease_s": "object_store_lease_s",
        "standby": "standby",
    },
    "witnessing": {
        "quorum": "witness_quorum",
        "witness": "witnesses",
        "start_timeout_s": "witness_start_timeout_s",
        "start_override": "witness_start_override",
    },
    "anchor": {
        "interval_s": "anchor_interval_s",
        "embedded_tsa": "embedded_tsa",
        "tsa": "tsas",
    },
    "limits": {
        "http_header_timeout_s": "http_header_timeout_s",
        "http_body_timeout_s": "http_body_timeout_s",
        "http_max_connections": "http_max_connections",
        "http_max_per_address": "http_max_per_address",
        "grpc_max_connections": "grpc_max_connections",
        "grpc_idle_s": "grpc_idle_s",
        "grpc_max_age_s": "grpc_max_age_s",
        "grpc_age_grace_s": "grpc_age_grace_s",
        "grpc_keepalive_s": "grpc_keepalive_s",
    },
}
_KEY_OF = {field: (table, key) for table, keys in TABLES.items() for key, field in keys.items()}
_KEY_OF["witnesses"] = ("", "witness")  # written [[witness]] (or [[witnessing.witness]])
_SUBMODELS: dict[str, type[BaseModel]] = {"tsas": TsaSettings, "witnesses": WitnessTarget}
# what the client's commands read (``ledger_client.remote.connection``): not settings, not typos
_CLIENT_VARIABLES = frozenset(
    {"SERVER", "TOKEN", "TOKEN_FILE", "TLS_CA", "TLS_CERT", "TLS_KEY", "DEBUG"}
)


class _FileSource(PydanticBaseSettingsSource):
    """The TOML layer: the flattened values ``load_settings`` read (none by default)."""

    values: ClassVar[dict[str, Any]] = {}
    env: ClassVar[bool] = True

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self.values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.values)


def _flatten(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for table, raw in doc.items():
        if table == "witness" and isinstance(raw, list):  # [[witness]], as [[witnessing.witness]]
            values["witnesses"] = raw
            continue
        if table not in TABLES:
            raise FormatError(unknown_table(path, table, raw, TABLES))
        if not isinstance(raw, dict):
            raise FormatError(f"{path}: {table}: want a table [{table}], not a value")
        for key, value in raw.items():
            if key not in TABLES[table]:
                raise FormatError(unknown_key(path, table, key, TABLES))
            values[TABLES[table][key]] = value
    return values


_S = TypeVar("_S", bound=BaseSettings)


def _validated(build: Callable[[], _S], where: Where, *, env: bool) -> _S:
    """Build settings; a problem becomes one line naming where the value came from (``env``:
    whether ``Settings`` reads the environment for this build)."""
    _FileSource.env = env
    try:
        return build()
    except ValidationError as exc:
        raise FormatError(describe(exc, where)) from None
    except SettingsError as exc:  # a LEDGER_* value that is not JSON where JSON is wanted
        raise FormatError(parse_failure(exc, where)) from None
    finally:
        _FileSource.env = True


def _check_variables(prefix: str, known: Iterable[str], fields: Iterable[str]) -> None:
    """A ``prefix*`` variable that is none of ``known``, but close to one of the ``fields``'
    variables, is a typo: refused with the nearest name (others are left alone)."""
    names = {field.upper() for field in fields}
    skip = names | {name.upper() for name in known}
    for variable in sorted(os.environ):
        name = variable.upper().removeprefix(prefix)
        if not variable.upper().startswith(prefix) or name in skip:
            continue
        match = nearest(name, names, cutoff=0.8)
        if match is not None:
            raise FormatError(
                f"environment variable {variable}: not a setting (did you mean {prefix}{match}?)"
            )


def _set_in_environment(prefix: str, fields: Iterable[str]) -> frozenset[str]:
    return frozenset(f for f in fields if prefix + f.upper() in os.environ)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise FormatError(f"{path}: cannot read the configuration: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not UTF-8 text (a binary file?)") from None
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(f"{path}: not valid TOML: {exc}") from None


def load_settings(path: Path | None) -> Settings:
    """Embedded defaults < the TOML file at ``path`` (when given) < ``LEDGER_*`` variables.

    Each layer is checked alone first, so an error names the file and key or the variable.
    """
    values: dict[str, Any] = {}
    if path is not None:
        values = _flatten(_read_toml(path), path)
    witness_variables = {"WITNESS_" + field for field in WITNESS_KEYS.values()}
    _check_variables(ENV_PREFIX, _CLIENT_VARIABLES | witness_variables, Settings.model_fields)
    in_file = Where("file", _KEY_OF, _SUBMODELS, path=path)
    _FileSource.values = values
    try:
        _validated(lambda: Settings.model_validate(values), in_file, env=False)
        from_env = _set_in_environment(ENV_PREFIX, Settings.model_fields)
        in_env = Where("environment", _KEY_OF, _SUBMODELS, present=from_env, fallback=in_file)
        return _validated(Settings, in_env, env=True)
    finally:
        _FileSource.values = {}


# --- ``ledger witness serve`` --------------------------------------------------------------------
#
# The witness's own settings, with the same layers and error style as ``Settings``: embedded
# defaults < the TOML file (one ``[witness]`` table) < ``LEDGER_WITNESS_<FIELD>`` < flags.
#
#     [witness]
#     key_file = "witness.key"          # a tlog-cosignature (type 0x04) signer key
#     state_dir = "witness-data"
#     listen = "127.0.0.1:7380"
#     body_timeout_s = 10               # a request body slower than this gets 408
#     header_timeout_s = 10             # a connection without a request head this long: closed
#     max_connections = 256             # in all; more are answered 503
#     max_per_address = 32              # from one client address; more are answered 503
#     [[witness.log]]                   # every log this witness cosigns (repeatable)
#     origin = "ledger.example.com/agents/2026"
#     keys = ["ledger.example.com/agents/2026+1234abcd+AQ..."]

WITNESS_ENV_PREFIX = "LEDGER_WITNESS_"
# TOML key of the [witness] table -> field
WITNESS_KEYS: dict[str, str] = {
    "key_file": "key_file",
    "state_dir": "state_dir",
    "listen": "listen",
    "body_timeout_s": "body_timeout_s",
    "header_timeout_s": "header_timeout_s",
    "max_connections": "max_connections",
    "max_per_address": "max_per_address",
    "log": "logs",
}
_WITNESS_KEY_OF = {field: ("witness", key) for key, field in WITNESS_KEYS.items()}


class WitnessLog(BaseModel):
    """A log the witness cosigns (``[[witness.log]]``): its origin and verifier keys (0x01)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    origin: str = Field(min_length=1, description="the log's origin")
    keys: tuple[str, ...] = Field(min_length=1, description="the log's verifier key strings")

    @field_validator("keys")
    @classmethod
    def _keys(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for text in value:
            try:
                Ed25519Verifier.from_key_string(text)
            except FormatError as exc:
                raise ValueError(str(exc)) from None
        return value


_WITNESS_SUBMODELS: dict[str, type[BaseModel]] = {"logs": WitnessLog}


class _WitnessFileSource(_FileSource):
    """The TOML layer of ``WitnessServeSettings``."""

    values: ClassVar[dict[str, Any]] = {}


class WitnessServeSettings(BaseSettings):
    """The effective configuration of ``ledger witness serve``."""

    model_config = SettingsConfigDict(
        env_prefix=WITNESS_ENV_PREFIX, frozen=True, extra="forbid", validate_default=True
    )

    key_file: Path = Field(
        Path("witness.key"), description="cosigner key file (type 0x04, `ledger witness keygen`)"
    )
    state_dir: Path = Field(
        Path("witness-data"), description="state folder (state journal, evidence)"
    )
    listen: str = Field("127.0.0.1:7380", description="HOST:PORT (port 0 picks a free port)")
    logs: tuple[WitnessLog, ...] = Field((), description="the logs this witness cosigns")
    body_timeout_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="seconds a request body may take to arrive; slower bodies get 408",
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="seconds a connection may take to send a request head (also between "
        "requests); slower connections are closed",
    )
    max_connections: int = Field(
        256, ge=1, le=100_000, description="open connections in all; more are answered 503"
    )
    max_per_address: int = Field(
        32, ge=1, le=100_000, description="open connections from one address; more get 503"
    )

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        parse_listen(value)
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags (init) > environment > TOML (set by ``load_witness_settings``)."""
        return (init_settings, env_settings, _WitnessFileSource(settings_cls))

    def with_overrides(
        self, flags: Mapping[str, str] | None = None, /, **overrides: Any
    ) -> WitnessServeSettings:
        """A validated copy with the non-None overrides applied (flags win); an error names
        the flag (``flags``: setting -> flag where it is not ``--setting-name``)."""
        unknown = set(overrides) - set(WitnessServeSettings.model_fields)
        if unknown:
            raise FormatError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        values = self.model_dump()
        values.update({k: v for k, v in overrides.items() if v is not None})
        where = Where("flags", _WITNESS_KEY_OF, _WITNESS_SUBMODELS, flags=flags)
        return _validated(lambda: WitnessServeSettings.model_validate(values), where, env=False)


class _WitnessFileOnly(WitnessServeSettings):
    """The TOML layer alone over the defaults: a file's errors name the file, never a variable."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The values given, nothing else."""
        return (init_settings,)


def _flatten_witness(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    tables = {"witness": WITNESS_KEYS}
    for name, value in doc.items():
        if name != "witness":
            raise FormatError(unknown_table(path, name, value, tables))
    table = doc.get("witness")
    if not isinstance(table, dict):
        raise FormatError(f"{path}: want one [witness] table")
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in WITNESS_KEYS:
            raise FormatError(unknown_key(path, "witness", key, tables))
        values[WITNESS_KEYS[key]] = value
    return values


def load_witness_settings(path: Path | None) -> WitnessServeSettings:
    """Embedded defaults < the ``[witness]`` table of the TOML file at ``path`` (when given) <
    ``LEDGER_WITNESS_*`` variables; flags go on with ``with_overrides``. Each layer is checked
    alone first, so an error names the file and key or the variable."""
    fields = WitnessServeSettings.model_fields
    in_file = Where("file", _WITNESS_KEY_OF, _WITNESS_SUBMODELS, path=path)
    values: dict[str, Any] = {}
    if path is not None:
        values = _flatten_witness(_read_toml(path), path)
        _validated(lambda: _WitnessFileOnly.model_validate(values), in_file, env=False)
    log_variables = {name.upper().removeprefix("WITNESS_") for name in Settings.model_fields}
    _check_variables(WITNESS_ENV_PREFIX, log_variables, fields)
    in_env = Where(
        "environment",
        _WITNESS_KEY_OF,
        _WITNESS_SUBMODELS,
        env_prefix=WITNESS_ENV_PREFIX,
        present=_set_in_environment(WITNESS_ENV_PREFIX, fields),
        fallback=in_file,
    )
    _WitnessFileSource.values = values
    try:
        return _validated(WitnessServeSettings, in_env, env=True)
    finally:
        _WitnessFileSource.values = {}
