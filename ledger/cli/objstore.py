"""``ledger objstore check``: does an S3-compatible store's conditional write hold under
contention? Run it before pointing ``[object_store]`` or ``ledger tiles export --bucket`` at a
store: they refuse a bucket without a passing check (``ledger.objstore.conformance``).

Exit codes: 0 the store passed, 1 it failed or did not answer, 2 usage.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ledger.core.errors import FormatError, LedgerError

if TYPE_CHECKING:
    from ledger.objstore.bucket import BucketAddress

__all__ = ["bucket_address", "objstore_group"]


@click.group("objstore")
def objstore_group() -> None:
    """S3-compatible object storage: check a store before the log relies on it."""


def bucket_address(
    config: Path | None, url: str | None, endpoint: str | None, region: str | None
) -> BucketAddress:
    """The ``BucketAddress`` of the flags, else of the settings' ``[object_store]``."""
    from ledger.app.settings import load_settings
    from ledger.objstore.bucket import BucketAddress

    settings = load_settings(config)
    url = url or settings.object_store_url
    if not url:
        raise FormatError("give --bucket s3://BUCKET[/PREFIX] (or [object_store] url)")
    return BucketAddress.parse(
        url,
        endpoint=settings.object_store_endpoint if endpoint is None else endpoint,
        region=settings.object_store_region if region is None else region,
    )


@objstore_group.command("check")
@click.option("--config", type=click.Path(dir_okay=False, path_type=Path), help="TOML file")
@click.option("--bucket", "url", help="s3://BUCKET[/PREFIX] (default: [object_store] url)")
@click.option("--endpoint", help="S3-compatible endpoint (default: [object_store] endpoint)")
@click.option("--region", help="region (default: [object_store] region)")
@click.option("--rounds", type=click.IntRange(1, 10_000), default=50, show_default=True,
              help="contended rounds of each kind")  # fmt: skip
@click.option("--writers", type=click.IntRange(2, 512), default=64, show_default=True,
              help="concurrent conditional PUTs per round")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def check(
    config: Path | None,
    url: str | None,
    endpoint: str | None,
    region: str | None,
    rounds: int,
    writers: int,
    as_json: bool,
) -> None:
    """Race --writers conditional PUTs on one key, --rounds times for create-only
    (If-None-Match: *) and for compare-and-swap (If-Match): exactly one must win each round.
    The verdict is left in the bucket (.ledger/conformance.json) for the publisher."""
    from ledger.objstore.conformance import Round, check_store

    try:
        address = bucket_address(config, url, endpoint, region)
    except FormatError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)

    def show(done: Round) -> None:
        if not as_json:
            click.echo(done.line(), err=True)

    try:
        report = check_store(address, rounds=rounds, writers=writers, progress=show)
    except (LedgerError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps(report.to_json_obj(), sort_keys=True))
    else:
        verdict = "passed" if report.passed else "FAILED: refused for conditional writes"
        click.echo(f"{address.url}: {verdict} ({report.detail()})")
    sys.exit(0 if report.passed else 1)
