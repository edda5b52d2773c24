"""The operator commands' command lines: dev certificates, tokens, config init, --help."""

from __future__ import annotations

import json
import stat
import tomllib
from pathlib import Path

import click
from click.testing import CliRunner
from cryptography import x509

from ledger.cli.main import main


def test_dev_cert_writes_a_ca_a_server_and_clients(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["tls", "dev-cert", "--out", str(tmp_path / "t"),
                                    "--client", "agent-b"])  # fmt: skip
    assert out.exit_code == 0, out.output
    made = json.loads(out.stdout)
    server = x509.load_pem_x509_certificate(Path(made["server_cert"]).read_bytes())
    ca = x509.load_pem_x509_certificate(Path(made["ca"]).read_bytes())
    assert server.issuer == ca.subject
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    for key in (made["server_key"], made["clients"][0]["key"]):
        assert stat.S_IMODE(Path(key).stat().st_mode) == 0o600


def test_tokens_are_printed_once_and_listed_without_the_secret(tmp_path: Path) -> None:
    runner = CliRunner()
    data = ["--data-dir", str(tmp_path)]
    made = runner.invoke(main, ["token", "create", "--scope", "append", "--name", "a", *data])
    assert made.exit_code == 0, made.output
    token = made.stdout.strip()
    assert token.startswith("dl_")
    listed = runner.invoke(main, ["token", "list", *data])
    assert "a\t" in listed.stdout and token not in listed.output
    assert token not in (tmp_path / "tokens.json").read_text()
    bad = runner.invoke(main, ["token", "create", "--scope", "root", "--name", "b", *data])
    assert bad.exit_code == 2
    gone = runner.invoke(main, ["token", "revoke", "a", *data])
    assert gone.exit_code == 0 and "revoked a" in gone.stdout
    again = runner.invoke(main, ["token", "revoke", "a", *data])
    assert again.exit_code == 1 and "no token named 'a'" in again.output


def test_config_init_writes_a_sample_that_loads(tmp_path: Path) -> None:
    target = tmp_path / "ledger.toml"
    assert CliRunner().invoke(main, ["config", "init", "--out", str(target)]).exit_code == 0
    assert all(v == {} for v in tomllib.loads(target.read_text()).values())
    assert "# max_pending = 200000" in target.read_text()
    again = CliRunner().invoke(main, ["config", "init", "--out", str(target)])
    assert again.exit_code == 2 and "exists" in again.output


def test_every_option_has_help_and_shows_its_default() -> None:
    """Help text on every option; defaults shown (``show_default`` for the whole CLI)."""
    from ledger_client.cli.main import main as verify_main

    missing = []

    def walk(group: click.Group, path: list[str]) -> None:
        assert (group.context_settings or {}).get("show_default", True), path
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                walk(command, [*path, name])
                continue
            for param in command.params:
                if isinstance(param, click.Option) and not param.help:
                    missing.append(" ".join([*path, name, param.opts[0]]))

    walk(main, ["ledger"])
    walk(verify_main, ["ledger-verify"])
    assert main.context_settings["show_default"] and verify_main.context_settings["show_default"]
    assert missing == []
