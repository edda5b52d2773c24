"""The object-store settings, addresses and command lines without a store: bad input is one
clear line (exit 2), and the conformance verdict's rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.app.settings import load_settings
from ledger.cli.main import main as ledger_main
from ledger.core.errors import FormatError
from ledger.objstore.bucket import BucketAddress
from ledger.objstore.conformance import ConformanceReport, Round


def test_bucket_addresses() -> None:
    address = BucketAddress.parse("s3://logs/a/b/", endpoint="http://127.0.0.1:8333/")
    assert (address.bucket, address.prefix, address.endpoint) == (
        "logs",
        "a/b/",
        "http://127.0.0.1:8333",
    )
    assert address.region == "us-east-1" and address.url == "s3://logs/a/b/"
    assert BucketAddress.parse("s3://logs").prefix == ""
    for bad in ("https://logs/a", "s3://", "s3://UPPER/x", "logs/a"):
        with pytest.raises(FormatError):
            BucketAddress.parse(bad)
    with pytest.raises(FormatError, match="endpoint"):
        BucketAddress.parse("s3://logs", endpoint="127.0.0.1:8333")


def test_object_store_settings(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text('[object_store]\nurl = "s3://logs/x"\nendpoint = "http://h:1"\n')
    settings = load_settings(good)
    assert settings.object_store_url == "s3://logs/x"
    assert settings.object_store_endpoint == "http://h:1"
    bad = tmp_path / "bad.toml"
    bad.write_text('[object_store]\nurl = "https://logs/x"\n')
    with pytest.raises(FormatError, match="s3://BUCKET"):
        load_settings(bad)
    typo = tmp_path / "typo.toml"
    typo.write_text('[object_store]\nbucket = "s3://logs/x"\n')
    with pytest.raises(FormatError, match="bucket"):
        load_settings(typo)


def test_commands_refuse_bad_input_in_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(ledger_main, ["objstore", "check"])
    assert missing.exit_code == 2 and "--bucket" in missing.output
    bad = runner.invoke(ledger_main, ["objstore", "check", "--bucket", "http://x/y"])
    assert bad.exit_code == 2 and "s3://BUCKET" in bad.output
    assert "Traceback" not in bad.output
    args = ["tiles", "export", "--data-dir", str(tmp_path), "--out", str(tmp_path / "o")]
    both = runner.invoke(ledger_main, [*args, "--bucket", "s3://b/x"])
    assert both.exit_code == 2 and "either --out" in both.output


def _round(winners: int, *, stored: bool = True, errors: tuple[str, ...] = ()) -> Round:
    return Round(mode="create", winners=winners, losers=63 - winners + 1, errors=errors,
                 stored_is_winner=stored, seconds=0.1)  # fmt: skip


def test_a_round_passes_with_exactly_one_winner_whose_body_is_stored() -> None:
    assert _round(1).passed
    assert not _round(0).passed and not _round(2).passed
    assert not _round(1, stored=False).passed
    assert not _round(1, errors=("writer 3: timed out",)).passed
    swap = Round(mode="swap", winners=1, losers=63, errors=(), stored_is_winner=True, seconds=1)
    report = ConformanceReport(address="s3://b/", writers=64, rounds=[_round(1), swap])
    assert report.passed
    assert not ConformanceReport(address="s3://b/", writers=64, rounds=[_round(1)]).passed
    report.rounds.append(_round(2))
    assert not report.passed and "1 of 3 rounds failed" in report.detail()
