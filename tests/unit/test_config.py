"""Configuration: ranges, precedence (defaults < TOML < environment < flags), the sample."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from ledger.app.settings import Settings, load_settings
from ledger.app.settings_sample import sample_toml
from ledger.core.errors import FormatError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ledger.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("[server]\nmax_pending = -5\n", "server.max_pending"),
        ("[log]\ncheckpoint_interval_ms = 0\n", "log.checkpoint_interval_ms"),
        ('[server]\nlog_format = "yaml"\n', "server.log_format"),
        ('[server]\nlisten = "127.0.0.1:99999"\n', "server.listen"),
        ('[server]\nlisten = "nonsense"\n', "server.listen"),
        ('[metrics]\nlisten = "x:-1"\n', "metrics.listen"),
        ("[storage]\ncache_mb = 0\n", "storage.cache_mb"),
        ('[auth]\nreads = "maybe"\n', "auth.reads"),
        ('[auth.mtls]\n"a" = ["write"]\n', "auth.mtls"),
        ('[[anchor.tsa]]\nname = "x"\nurl = "ftp://x"\nroots = ["r.pem"]\n', "anchor.tsa"),
    ],
)
def test_out_of_range_values_are_refused_naming_the_key(
    tmp_path: Path, toml: str, named: str
) -> None:
    with pytest.raises(FormatError, match=re.escape(named)):
        load_settings(write(tmp_path, toml))


def test_unknown_keys_tables_and_binary_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match=r"unknown key server\.max_pendin"):
        load_settings(write(tmp_path, "[server]\nmax_pendin = 5\n"))
    with pytest.raises(FormatError, match=r"unknown table \[srv\]"):
        load_settings(write(tmp_path, "[srv]\n"))
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(FormatError, match="not UTF-8"):
        load_settings(binary)


def test_precedence_defaults_toml_environment_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "[server]\nmax_pending = 10\n[log]\ncheckpoint_interval_ms = 7\n")
    assert load_settings(None).max_pending == 200_000
    assert load_settings(path).max_pending == 10
    monkeypatch.setenv("LEDGER_MAX_PENDING", "20")
    loaded = load_settings(path)
    assert loaded.max_pending == 20 and loaded.checkpoint_interval_ms == 7
    assert loaded.with_overrides(max_pending=30, origin=None).max_pending == 30
    monkeypatch.setenv("LEDGER_MAX_PENDING", "-1")
    with pytest.raises(FormatError, match="environment: LEDGER_MAX_PENDING"):
        load_settings(path)


def test_client_variables_do_not_collide_with_server_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("LEDGER_SERVER", "LEDGER_TOKEN", "LEDGER_TLS_CA", "LEDGER_TLS_CERT"):
        monkeypatch.setenv(name, "not a server setting")
    assert load_settings(None) == Settings()


def test_flags_are_validated_too() -> None:
    with pytest.raises(FormatError, match=r"flags: server\.max_pending"):
        Settings().with_overrides(max_pending=0)
    with pytest.raises(FormatError, match="unknown setting"):
        Settings().with_overrides(nope=1)


def test_every_setting_has_a_description_and_a_toml_key() -> None:
    from ledger.app.settings import TABLES

    keys = {field for table in TABLES.values() for field in table.values()}
    for name, info in Settings.model_fields.items():
        assert info.description, name
        assert name in keys, name


def test_the_sample_uncommented_is_the_defaults(tmp_path: Path) -> None:
    sample = sample_toml()
    assert all(v == {} for v in tomllib.loads(sample).values())  # every key commented out
    from ledger.app.settings import TABLES

    lines, table = [], ""
    for line in sample.splitlines():
        if line.startswith("["):
            table = line.strip("[]")
            lines.append(line)
        elif (m := re.match(r"^# ([a-z_]+) = [^.]", line)) and m.group(1) in TABLES[table]:
            lines.append(line.removeprefix("# "))
    path = write(tmp_path, "\n".join(lines) + "\n")
    assert load_settings(path) == Settings()
