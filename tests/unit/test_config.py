"""Configuration: ranges, precedence (defaults < TOML < environment < flags), the sample."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.app.settings import Settings, load_settings
from ledger.app.settings_sample import sample_toml
from ledger.core.checkpoint import CosignatureSigner
from ledger.core.errors import FormatError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ledger.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("[server]\nmax_pending = -5\n", "ledger.toml: [server] max_pending: "),
        ("[log]\ncheckpoint_interval_ms = 0\n", "ledger.toml: [log] checkpoint_interval_ms: "),
        ('[server]\nlog_format = "yaml"\n', "ledger.toml: [server] log_format: "),
        ('[server]\nlisten = "127.0.0.1:99999"\n', "ledger.toml: [server] listen: "),
        ('[server]\nlisten = "nonsense"\n', "ledger.toml: [server] listen: "),
        ('[metrics]\nlisten = "x:-1"\n', "ledger.toml: [metrics] listen: "),
        ("[storage]\ncache_mb = 0\n", "ledger.toml: [storage] cache_mb: "),
        ('[auth]\nreads = "maybe"\n', "ledger.toml: [auth] reads: "),
        ('[auth.mtls]\n"a" = ["write"]\n', "ledger.toml: [auth.mtls] a[0]: "),
        (
            '[[anchor.tsa]]\nname = "x"\nurl = "ftp://x"\nroots = ["r.pem"]\n',
            "ledger.toml: [[anchor.tsa]] #1 url: ",
        ),
    ],
)
def test_out_of_range_values_are_refused_naming_the_key(
    tmp_path: Path, toml: str, named: str
) -> None:
    with pytest.raises(FormatError, match=re.escape(named)):
        load_settings(write(tmp_path, toml))


def test_unknown_keys_tables_and_binary_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(
        FormatError, match=re.escape("[server] max_pendin: unknown key (did you mean max_pending?)")
    ):
        load_settings(write(tmp_path, "[server]\nmax_pendin = 5\n"))
    with pytest.raises(
        FormatError, match=re.escape("[srv]: unknown table (did you mean [server]?)")
    ):
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
    with pytest.raises(FormatError, match=r"^environment variable LEDGER_MAX_PENDING: "):
        load_settings(path)


def test_client_variables_do_not_collide_with_server_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("LEDGER_SERVER", "LEDGER_TOKEN", "LEDGER_TLS_CA", "LEDGER_TLS_CERT"):
        monkeypatch.setenv(name, "not a server setting")
    assert load_settings(None) == Settings()


def test_flags_are_validated_too() -> None:
    with pytest.raises(FormatError, match=r"^option --max-pending: "):
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


def _error(load: Callable[[], object]) -> str:
    with pytest.raises(FormatError) as caught:
        load()
    message = str(caught.value)
    assert "config None" not in message and ": ?:" not in message and "\n" not in message
    return message


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('[server]\nlisten = "nope"\n', "[server] listen: 'nope': want HOST:PORT"),
        ('[tiles]\nlisten = "nope"\n', "[tiles] listen: 'nope': want HOST:PORT"),
        ('[auth.mtls]\n"cn" = ["write"]\n', "[auth.mtls] cn[0]: Input should be"),
        ("[witnessing]\nquorum = 3\n", "[witnessing] quorum: 3 needs 0..0"),
        (
            '[[anchor.tsa]]\nname = "a"\nurl = "ftp://x"\nroots = ["r.pem"]\n',
            "[[anchor.tsa]] #1 url: String should match",
        ),
        (
            '[[anchor.tsa]]\nname = "a"\nurl = "http://x"\nroots = ["r.pem"]\n'
            '[[anchor.tsa]]\nname = "b"\nurl = "http://x"\nroot = ["r.pem"]\n',
            "[[anchor.tsa]] #2 root: unknown key (did you mean roots?)",
        ),
        ('[[witness]]\nname = "w"\nurl = "http://x"\n', "[[witness]] #1 key: Field required"),
    ],
)
def test_file_errors_name_the_file_and_the_key(tmp_path: Path, toml: str, expected: str) -> None:
    path = write(tmp_path, toml)
    assert _error(lambda: load_settings(path)).startswith(f"{path}: {expected}")


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("[server]\nlisen = 1\n", "[server] lisen: unknown key (did you mean listen?)"),
        ("[sever]\nlisten = 1\n", "[sever]: unknown table (did you mean [server]?)"),
        ("[auth]\nmax_pending = 1\n", "[auth] max_pending: unknown key (did you mean [server] "),
        ('listen = "x"\n', "listen: a key outside any table (did you mean [server] listen?)"),
        ("[log]\nzzz = 1\n", "[log] zzz: unknown key"),
    ],
)
def test_unknown_keys_get_the_nearest_known_key(tmp_path: Path, toml: str, expected: str) -> None:
    path = write(tmp_path, toml)
    assert _error(lambda: load_settings(path)).startswith(f"{path}: {expected}")


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("LEDGER_LISTEN", "bad", "environment variable LEDGER_LISTEN: 'bad': want HOST:PORT"),
        ("LEDGER_MAX_PENDING", "abc", "environment variable LEDGER_MAX_PENDING: Input should"),
        ("LEDGER_AUTH_MTLS", "{", "environment variable LEDGER_AUTH_MTLS: not valid JSON"),
        ("LEDGER_WITNESS_QUORUM", "2", "environment variable LEDGER_WITNESS_QUORUM: 2 needs"),
        (
            "LEDGER_MAX_PENDNG",
            "5",
            "environment variable LEDGER_MAX_PENDNG: not a setting "
            "(did you mean LEDGER_MAX_PENDING?)",
        ),
    ],
)
def test_environment_errors_name_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(variable, value)
    assert _error(lambda: load_settings(None)).startswith(expected)
    # with a valid file too, the variable is named, not the file
    path = write(tmp_path, "[server]\nmax_pending = 10\n")
    assert _error(lambda: load_settings(path)).startswith(expected)


def test_flag_errors_name_the_flag() -> None:
    flags = {"tls_server_cert": "--tls-cert"}
    message = _error(lambda: Settings().with_overrides(flags, listen="bad"))
    assert message.startswith("option --listen: 'bad': want HOST:PORT"), message
    message = _error(lambda: Settings().with_overrides(flags, witness_quorum=1))
    assert message.startswith("option --witness-quorum: 1 needs 0..0"), message


def test_a_cross_check_names_the_layer_that_set_the_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = CosignatureSigner.generate("w1.test").verifier().key_string()
    entry = f'[[witness]]\nname = "w"\nurl = "http://h:1"\nkey = "{key}"\n'
    path = write(tmp_path, f"[witnessing]\nquorum = 1\n{entry}")
    assert load_settings(path).witness_quorum == 1
    monkeypatch.setenv("LEDGER_WITNESSES", "[]")  # valid alone; the file's quorum now is not
    message = _error(lambda: load_settings(path))
    assert message.startswith(f"{path}: [witnessing] quorum: 1 needs 0..0"), message
