"""``ledger witness keygen | serve | evidence | state`` and ``ledger witnesses``: output and the
exit-2 paths (``serve`` itself runs in the integration tests)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from ledger.app.settings import load_witness_settings
from ledger.cli.main import main
from ledger.core.checkpoint import CosignatureSigner, CosignatureVerifier, Ed25519Signer
from ledger.fileio.keys import write_signer
from ledger.witness.state import Witness
from tests.witness_fixtures import ORIGIN, View


def test_keygen_makes_a_cosignature_key(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["witness", "keygen", "w.test", "--out", str(tmp_path / "k")])
    assert out.exit_code == 0, out.output
    verifier = CosignatureVerifier.from_key_string(out.output.splitlines()[0])
    assert verifier.name == "w.test" and (tmp_path / "k").stat().st_mode & 0o777 == 0o600
    again = CliRunner().invoke(main, ["witness", "keygen", "w.test", "--out", str(tmp_path / "k")])
    assert again.exit_code == 2 and "exists" in again.output


def test_serve_refuses_bad_input(tmp_path: Path) -> None:
    log_key = Ed25519Signer.generate(ORIGIN)
    write_signer(tmp_path / "log.key", log_key)  # a type 0x01 key is not a cosigner key
    vkey = log_key.verifier().key_string()
    runner = CliRunner()
    no_logs = runner.invoke(main, ["witness", "serve", "--key", str(tmp_path / "log.key")])
    assert no_logs.exit_code == 2 and "no log to witness" in no_logs.output
    wrong = runner.invoke(
        main,
        ["witness", "serve", "--key", str(tmp_path / "log.key"), "--log", vkey,
         "--state-dir", str(tmp_path / "s"), "--listen", "127.0.0.1:0"],
    )  # fmt: skip
    assert wrong.exit_code == 2 and "0x01" in wrong.output
    bad_log = runner.invoke(main, ["witness", "serve", "--log", "nonsense"])
    assert bad_log.exit_code == 2 and "error:" in bad_log.output


def test_config_file(tmp_path: Path) -> None:
    vkey = Ed25519Signer.generate(ORIGIN).verifier().key_string()
    config = tmp_path / "w.toml"
    config.write_text(
        f'[witness]\nkey_file = "w.key"\nlisten = "127.0.0.1:0"\n'
        f'[[witness.log]]\norigin = "{ORIGIN}"\nkeys = ["{vkey}"]\n'
    )
    settings = load_witness_settings(config)
    assert settings.listen == "127.0.0.1:0" and [log.origin for log in settings.logs] == [ORIGIN]
    config.write_text("[witness]\nport = 1\n")
    result = CliRunner().invoke(main, ["witness", "serve", "--config", str(config)])
    assert result.exit_code == 2 and "[witness] port: unknown key" in result.output


def test_evidence_and_state_commands(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    runner = CliRunner()
    empty = runner.invoke(main, ["witness", "evidence", "--state-dir", str(tmp_path)])
    assert empty.exit_code == 0 and "0 item(s)" in empty.output
    witness = Witness(
        folder=tmp_path,
        signer=CosignatureSigner.generate("w.test"),
        logs={ORIGIN: [signer.verifier()]},
        clock=lambda: 1.0,
    )
    honest, forked = View(signer, "a"), View(signer, "b")
    honest.grow(3)
    forked.grow(3)
    witness.add_checkpoint(honest.request(0))
    witness.add_checkpoint(forked.request(3))
    witness.close()
    shown = runner.invoke(main, ["witness", "evidence", "--state-dir", str(tmp_path)])
    assert shown.exit_code == 0 and "same-size-different-root" in shown.output
    assert honest.log.checkpoint(3).note.splitlines()[2] in shown.output
    state = runner.invoke(main, ["witness", "state", "--state-dir", str(tmp_path)])
    assert json.loads(state.output)[ORIGIN]["size"] == 3
    missing = runner.invoke(main, ["witnesses", "--data-dir", str(tmp_path / "nope")])
    assert missing.exit_code == 1 and "cannot read" in missing.output
