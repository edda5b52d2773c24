"""Long crash harness: ``python tools/crash.py --cycles N [--seed S] [--work-dir DIR] [--json]``.

Runs a real ``ledger serve`` (RocksDB, embedded TSA anchoring every 0.3 s) and kills it with
SIGKILL, cycle after cycle, at one of four kinds of moment, round robin in a shuffled order:

* ``load``        at a random moment under appends from three client threads;
* ``checkpoint``  right after a client was handed a freshly signed checkpoint;
* ``anchor``      while an ``AnchorNow`` call is stamping and storing anchors;
* ``recovery``    during start-up, before the server says it is serving.

Every ``--scenario-every`` cycles (default 10), after a kill, the next step of this sequence
runs: take a backup copy of the data dir; flip a WAL byte; restore the backup; and again:

* ``wal``     a byte is flipped in the middle of the WAL: the start must be refused (the damage
              is named) or detected against the published high-water mark; the intact copy
              is then put back;
* ``backup``  the data dir is replaced by a copy taken earlier: the start must be refused when
              the copy is behind the mark (or below the acknowledged size beside it, which
              puts the newer copy back); then ``ledger restore accept`` must give a read-only
              log (appends FAILED_PRECONDITION) and ``ledger restore catch-up`` must bring it
              back from the newer copy.

After every start the newest checkpoint must cover every acknowledged entry. At the end the
whole log is read back and checked by an independent verifier (``tools/crash_verify.py``: its
own RFC 6962 hashing): every acknowledged entry at its index, one root per size, every signed
root the tree's. Prints a summary (``--json``: one object); exit 0 when every invariant held.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.crash_load import ORIGIN, Load, Observed, Server, StartRefused, ledger_cli  # noqa: E402
from tools.crash_verify import verify_log  # noqa: E402

__all__ = ["main"]

KINDS = ("load", "checkpoint", "anchor", "recovery")


class Harness:
    """The state of one run: folders, what the clients saw, counters."""

    def __init__(self, work: Path, seed: int, scenario_every: int) -> None:
        from ledger.core.checkpoint import Ed25519Signer
        from ledger.fileio.keys import write_signer

        self.rng = random.Random(seed)
        self.work = work
        self.data = work / "data"
        self.key = work / "signer.key"
        signer = Ed25519Signer.generate(ORIGIN)
        write_signer(self.key, signer)
        self.seen = Observed(signer.verifier())
        self.scenario_every = scenario_every
        self.counts: Counter[str] = Counter()
        self.restart_s: list[float] = []
        self.violations: list[str] = []
        self.backup: Path | None = None
        self.scenarios = 0

    # --- one cycle ----------------------------------------------------------------------------

    def cycle(self, n: int, kind: str) -> None:
        if kind == "recovery":
            server = Server(self.data, self.key)
            time.sleep(self.rng.uniform(0.0, 0.8))
            server.kill()
            self.counts["kill:recovery"] += 1
            return
        server = self.start()
        load = Load(server.address, n, self.seen)
        if kind == "checkpoint":
            load.checkpointed.wait(5)
            time.sleep(self.rng.uniform(0.0, 0.005))
        elif kind == "anchor":
            time.sleep(self.rng.uniform(0.02, 0.2))
            threading.Thread(target=load.anchor_now, daemon=True).start()
            time.sleep(self.rng.uniform(0.0, 0.05))
        else:
            time.sleep(self.rng.uniform(0.05, 0.6))
        server.kill()
        load.join()
        self.counts[f"kill:{kind}"] += 1

    def start(self) -> Server:
        """Start; the newest checkpoint must cover every entry acknowledged so far."""
        began = time.monotonic()
        try:
            server = Server(self.data, self.key, wait=True)
        except StartRefused as exc:
            self.violations.append(f"a clean data dir was refused: {exc}")
            raise
        self.restart_s.append(time.monotonic() - began)
        size = self.seen.check_latest(server.address)
        if size < self.seen.covered_needed():
            self.violations.append(f"restart at size {size} lost acknowledged entries")
        return server

    # --- rollback scenarios ---------------------------------------------------------------------

    def scenario(self) -> None:
        """Take a backup, flip a WAL byte, restore the backup; then again."""
        step, self.scenarios = self.scenarios % 3, self.scenarios + 1
        if step == 0:
            self.backup = self.work / "backup"
            shutil.copytree(self.data, self.backup)
            self.counts["backup:taken"] += 1
        elif step == 1:
            self.wal_flip()
        else:
            self.restore_backup()

    def wal_flip(self) -> None:
        logs = sorted((self.data / "db").glob("*.log"), key=lambda p: p.stat().st_size)
        if not logs or logs[-1].stat().st_size < 4096:
            self.counts["wal:skipped (WAL empty)"] += 1
            return
        intact = self.work / "intact"
        shutil.copytree(self.data, intact)
        raw = bytearray(logs[-1].read_bytes())
        raw[len(raw) // 2 + self.rng.randrange(-512, 512)] ^= 1 << self.rng.randrange(8)
        logs[-1].write_bytes(bytes(raw))
        try:
            Server(self.data, self.key, wait=True).terminate()
            self.violations.append("a WAL with a byte flipped in the middle was served")
        except StartRefused as exc:
            refused = "damaged" in str(exc) or "rolled back" in str(exc)
            self.counts["wal:refused" if refused else "wal:refused (other reason)"] += 1
        shutil.rmtree(self.data)
        intact.rename(self.data)

    def restore_backup(self) -> None:
        assert self.backup is not None
        newer = self.work / "newer"
        self.data.rename(newer)
        shutil.copytree(self.backup, self.data)
        try:
            server = Server(self.data, self.key, wait=True)
        except StartRefused as exc:
            if "acknowledged but missing" in str(exc):  # the mark is reached, the acks are not
                self.counts["backup:refused (acknowledged entries missing)"] += 1
                shutil.rmtree(self.data)
                newer.rename(self.data)
                shutil.rmtree(self.backup)
                self.backup = None
                return
            if "rolled back" not in str(exc):
                self.violations.append(f"backup refused for another reason: {exc}")
            self.counts["backup:refused"] += 1
            self.read_only_then_catch_up(newer)
        else:  # the copy was not behind the mark: it must serve no older checkpoint
            size = self.seen.check_latest(server.address)
            server.terminate()
            if size < self.seen.max_size():
                self.violations.append(f"a restored copy served size {size} behind the mark")
            self.counts["backup:not behind the mark"] += 1
            shutil.rmtree(self.data)
            newer.rename(self.data)
        shutil.rmtree(self.backup)
        self.backup = None

    def read_only_then_catch_up(self, newer: Path) -> None:
        config = self.work / "ledger.toml"
        config.write_text(
            f'[log]\norigin = "{ORIGIN}"\ndata_dir = "{self.data}"\nkey_file = "{self.key}"\n'
        )
        if ledger_cli("restore", "accept", "--config", str(config)).returncode != 0:
            self.violations.append("ledger restore accept failed")
        server = Server(self.data, self.key, wait=True)
        if not self.seen.appends_refused(server.address):
            self.violations.append("a read-only log took an append")
        server.terminate()
        done = ledger_cli("restore", "catch-up", "--config", str(config), "--from-data-dir",
                          str(newer))  # fmt: skip
        if done.returncode != 0:
            self.violations.append(f"ledger restore catch-up failed: {done.stderr.strip()}")
        shutil.rmtree(newer)
        self.counts["backup:caught up"] += 1

    # --- the end ---------------------------------------------------------------------------

    def final_check(self) -> dict[str, Any]:
        server = self.start()
        try:
            leaves = self.seen.all_leaves(server.address)
        finally:
            server.terminate()
        found = verify_log(leaves, self.seen.acked, self.seen.roots)
        self.violations += found.lost[:10] + found.second_roots + found.bad_roots
        self.violations += found.duplicates[:10]
        return {
            "entries": found.entries,
            "acknowledged": found.acknowledged,
            "lost": len(found.lost),
            "sizes_with_two_roots": len(found.second_roots),
            "signed_roots_checked": len(self.seen.roots),
        }


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="crash-", dir=args.work_dir))
    harness = Harness(work, args.seed, args.scenario_every)
    started = time.monotonic()
    order: list[str] = []
    try:
        for n in range(args.cycles):
            if not order:
                order = list(KINDS)
                harness.rng.shuffle(order)
            harness.cycle(n, order.pop())
            if n and n % args.scenario_every == 0:
                harness.scenario()
            if args.progress and n % 10 == 0:
                print(f"[crash] cycle {n}/{args.cycles} {dict(harness.counts)}", file=sys.stderr)
        final = harness.final_check()
    except StartRefused:
        final = {}
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    restarts = sorted(harness.restart_s) or [0.0]
    return {
        "cycles": args.cycles,
        "seed": args.seed,
        "seconds": round(time.monotonic() - started, 1),
        "kills_and_scenarios": dict(sorted(harness.counts.items())),
        "restart_s_median": round(restarts[len(restarts) // 2], 3),
        "restart_s_max": round(restarts[-1], 3),
        **final,
        "violations": harness.violations,
        "ok": not harness.violations and bool(final),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/crash.py", description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--seed", type=int, default=6962)
    parser.add_argument("--scenario-every", type=int, default=10)
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the data dirs")
    parser.add_argument("--progress", action="store_true", help="progress on stderr")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.cycles < 1 or args.scenario_every < 2:
        parser.error("--cycles >= 1 and --scenario-every >= 2")
    summary = run(args)
    if args.json:
        print(json.dumps(summary))
    else:
        for key, value in summary.items():
            print(f"{key:22} {value}")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
