"""``ledger-verify inclusion`` and ``consistency``: RFC 9162 §2.1.3 and §2.1.4 proofs."""

from __future__ import annotations

import click

from ledger.core import merkle
from ledger_client.clikit.outcome import (
    HASH_HELP,
    Outcome,
    finish,
    json_option,
    parse_hash,
    parse_hashes,
)


@click.command()
@click.option("--leaf-hash", required=True, help=HASH_HELP)
@click.option("--index", required=True, type=int, help="0-based leaf index")
@click.option("--size", required=True, type=int, help="tree size the proof is for")
@click.option("--root", required=True, help=f"root hash at SIZE; {HASH_HELP}")
@click.option("--proof", multiple=True, help="one proof hash, leaf to root; repeat per hash")
@json_option
def inclusion(
    leaf_hash: str, index: int, size: int, root: str, proof: tuple[str, ...], as_json: bool
) -> None:
    """Check an RFC 9162 inclusion proof."""

    def run() -> Outcome:
        leaf = parse_hash(leaf_hash, "--leaf-hash")
        root_hash = parse_hash(root, "--root")
        merkle.verify_inclusion(leaf, index, size, parse_hashes(proof, "--proof"), root_hash)
        return Outcome("inclusion", {"index": index, "size": size}, [f"leaf {index} of {size}"])

    finish("inclusion", as_json, run)


@click.command()
@click.option("--size1", required=True, type=int, help="old tree size")
@click.option("--size2", required=True, type=int, help="new tree size")
@click.option("--root1", required=True, help=f"old root; {HASH_HELP}")
@click.option("--root2", required=True, help=f"new root; {HASH_HELP}")
@click.option("--proof", multiple=True, help="one proof hash; repeat per hash")
@json_option
def consistency(
    size1: int, size2: int, root1: str, root2: str, proof: tuple[str, ...], as_json: bool
) -> None:
    """Check an RFC 9162 consistency proof (policy for size1 == 0 / size1 == size2:
    docs/formats.md "Merkle edge-case policy")."""

    def run() -> Outcome:
        r1, r2 = parse_hash(root1, "--root1"), parse_hash(root2, "--root2")
        merkle.verify_consistency(size1, size2, r1, r2, parse_hashes(proof, "--proof"))
        return Outcome(
            "consistency", {"size1": size1, "size2": size2}, [f"{size2} extends {size1}"]
        )

    finish("consistency", as_json, run)
