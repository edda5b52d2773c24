"""``ledger witness serve`` settings in the settings model (``WitnessServeSettings``): defaults <
the ``[witness]`` TOML table < ``LEDGER_WITNESS_*`` < flags, errors naming the file and key or
the variable; and the log layer's witnessing built from plain values (no ``ledger.app``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.app.settings import WitnessServeSettings, load_witness_settings
from ledger.cli.main import main
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import FormatError
from tests import processes

ORIGIN = "example.com/witnessed"


@pytest.fixture
def vkey() -> str:
    return Ed25519Signer.generate(ORIGIN).verifier().key_string()


@pytest.fixture(autouse=True)
def _no_witness_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KEY_FILE", "STATE_DIR", "LISTEN", "LOGS"):
        monkeypatch.delenv(f"LEDGER_WITNESS_{name}", raising=False)


def _config(tmp_path: Path, vkey: str, listen: str = "127.0.0.1:7001") -> Path:
    path = tmp_path / "w.toml"
    path.write_text(
        f'[witness]\nkey_file = "w.key"\nlisten = "{listen}"\n'
        f'[[witness.log]]\norigin = "{ORIGIN}"\nkeys = ["{vkey}"]\n'
    )
    return path


def test_defaults_then_toml_then_environment_then_flags(
    tmp_path: Path, vkey: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    defaults = load_witness_settings(None)
    assert (defaults.key_file, defaults.state_dir, defaults.listen, defaults.logs) == (
        Path("witness.key"), Path("witness-data"), "127.0.0.1:7380", ()
    )  # fmt: skip
    path = _config(tmp_path, vkey)
    from_file = load_witness_settings(path)
    assert from_file.listen == "127.0.0.1:7001" and from_file.key_file == Path("w.key")
    assert [(log.origin, log.keys) for log in from_file.logs] == [(ORIGIN, (vkey,))]
    monkeypatch.setenv("LEDGER_WITNESS_LISTEN", "127.0.0.1:7002")
    monkeypatch.setenv("LEDGER_WITNESS_STATE_DIR", str(tmp_path / "env-state"))
    from_env = load_witness_settings(path)
    assert from_env.listen == "127.0.0.1:7002" and from_env.state_dir == tmp_path / "env-state"
    assert from_env.key_file == Path("w.key")  # the file still holds what env does not set
    flagged = from_env.with_overrides(listen="127.0.0.1:7003", key_file=None)
    assert flagged.listen == "127.0.0.1:7003" and flagged.key_file == Path("w.key")
    logs = json.dumps([{"origin": "other.example/log", "keys": [vkey]}])
    monkeypatch.setenv("LEDGER_WITNESS_LOGS", logs)
    assert [log.origin for log in load_witness_settings(path).logs] == ["other.example/log"]


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ('[witness]\nlisten = "nowhere"\n', "[witness] listen: 'nowhere': want HOST:PORT"),
        ("[witness]\nport = 1\n", "[witness] port: unknown key"),
        ("[witness]\nlisen = 1\n", "[witness] lisen: unknown key (did you mean listen?)"),
        ("[witness]\nstate_dir = 3\n", "[witness] state_dir: "),
        ('[[witness.log]]\norigin = ""\nkeys = ["x"]\n', "[[witness.log]] #1 origin: "),
        ('[[witness.log]]\norigin = "o"\nkeys = ["nonsense"]\n', "[[witness.log]] #1 keys: "),
        ('[[witness.log]]\norigin = "o"\n', "[[witness.log]] #1 keys: Field required"),
        (
            '[[witness.log]]\norign = "o"\nkeys = []\n',
            "[[witness.log]] #1 orign: unknown key (did ",
        ),
        ('[server]\nlisten = "127.0.0.1:1"\n', "[server]: unknown table"),
        ('[witnes]\nlisten = "127.0.0.1:1"\n', "[witnes]: unknown table (did you mean [witness]?)"),
    ],
)
def test_file_errors_name_the_file_and_key(tmp_path: Path, toml: str, named: str) -> None:
    path = tmp_path / "w.toml"
    path.write_text(toml)
    with pytest.raises(FormatError) as info:
        load_witness_settings(path)
    assert str(info.value).startswith(f"{path}: {named}"), str(info.value)


def test_environment_errors_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_WITNESS_LISTEN", "no-port")
    with pytest.raises(
        FormatError, match=r"^environment variable LEDGER_WITNESS_LISTEN: 'no-port': want HOST:PORT"
    ):
        load_witness_settings(None)
    monkeypatch.delenv("LEDGER_WITNESS_LISTEN")
    with pytest.raises(FormatError, match=r"^option --listen: "):
        WitnessServeSettings().with_overrides(listen="127.0.0.1:99999")


def test_the_command_reads_the_environment(
    tmp_path: Path, vkey: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ledger witness serve`` takes the environment layer (it read only its TOML before)."""
    monkeypatch.setenv("LEDGER_WITNESS_LISTEN", "not-an-address")
    out = CliRunner().invoke(main, ["witness", "serve", "--log", vkey])
    assert out.exit_code == 2, out.output
    assert "error: environment variable LEDGER_WITNESS_LISTEN: " in out.output
    assert "Traceback" not in out.output
    monkeypatch.setenv("LEDGER_WITNESS_LISTEN", "127.0.0.1:0")
    monkeypatch.setenv("LEDGER_WITNESS_STATE_DIR", str(tmp_path / "s"))
    monkeypatch.setenv("LEDGER_WITNESS_KEY_FILE", str(tmp_path / "env.key"))
    from_env = CliRunner().invoke(main, ["witness", "serve", "--log", vkey])
    assert from_env.exit_code == 2 and "env.key" in from_env.output, from_env.output
    flag = ["witness", "serve", "--log", vkey, "--key", str(tmp_path / "flag.key")]
    flag_wins = CliRunner().invoke(main, flag)
    assert flag_wins.exit_code == 2 and "flag.key" in flag_wins.output, flag_wins.output


def test_witnessing_builds_from_plain_values_without_the_app_layer() -> None:
    code = (
        "import sys, ledger.log.witnessing as w\n"
        "bad = {m for m in sys.modules if m.startswith(('ledger.app', 'pydantic'))}\n"
        "assert not bad, sorted(bad)\n"
        "e = w.WitnessEndpoint(name='n', url='http://h:1', key='k')\n"
        "assert e.timeout_s == 10.0"
    )
    processes.run([sys.executable, "-c", code], check=True, timeout=60)
