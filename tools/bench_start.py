"""Start-up of the CLIs: each command run ``--repeats`` times as a subprocess (the console
scripts of ``--venv``, bytecode kept under ``--pycache`` and filled by one run first, as an
installed CLI has it), printed as the median wall and CPU (user + system) seconds.

    python tools/bench_start.py --repeats 5
    python tools/bench_start.py --repeats 5 --venv .venv --against /path/to/other/.venv

With ``--against OLD``, each command runs in the two venvs in turn (this one, OLD, this one, ...),
so the two medians come from the same minutes of a shared machine: printed as this venv's
figures | OLD's, and the CPU ratio this/OLD.
``--case NAME=ARGS`` adds a command (``ARGS`` split on spaces, the first word the script).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

CASES: dict[str, list[str]] = {
    "ledger-verify --help": ["ledger-verify", "--help"],
    "ledger --help": ["ledger", "--help"],
    "ledger-verify lineage --help": ["ledger-verify", "lineage", "--help"],
    "ledger-verify receipt --help": ["ledger-verify", "receipt", "--help"],
    "ledger anchor --help": ["ledger", "anchor", "--help"],
    "ledger fsck --help": ["ledger", "fsck", "--help"],
    "ledger append --help": ["ledger", "append", "--help"],
    "ledger serve --help": ["ledger", "serve", "--help"],
    "ledger config show": ["ledger", "config", "show"],
}


def run_once(venv: Path, pycache: Path, argv: list[str], cwd: Path) -> tuple[float, float]:
    """One run of ``argv`` (its first word a script of ``venv``): (wall s, CPU s)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    command = [str(venv / "bin" / argv[0]), *argv[1:]]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, check=False, env=env, cwd=cwd)
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.decode()}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--venv", type=Path, default=Path(".venv"))
    parser.add_argument("--against", type=Path, help="another venv, run in turn (A/B)")
    parser.add_argument("--pycache", type=Path, default=Path(tempfile.gettempdir()) / "bench-start")
    parser.add_argument("--case", action="append", default=[], metavar="NAME=ARGS")
    parser.add_argument("--only", action="append", default=[], metavar="NAME")
    args = parser.parse_args()
    cases = dict(CASES)
    for text in args.case:
        name, _, command = text.partition("=")
        cases[name] = command.split()
    if args.only:
        cases = {name: cases[name] for name in args.only}
    venvs = [args.venv.resolve(), *([args.against.resolve()] if args.against else [])]
    with tempfile.TemporaryDirectory() as scratch:
        for name, argv in cases.items():
            figures: list[tuple[list[float], list[float]]] = [([], []) for _ in venvs]
            for n, venv in enumerate(venvs):  # compile the bytecode once, untimed
                run_once(venv, args.pycache / str(n), argv, Path(scratch))
            for _ in range(args.repeats):
                for n, venv in enumerate(venvs):
                    wall, cpu = run_once(venv, args.pycache / str(n), argv, Path(scratch))
                    figures[n][0].append(wall)
                    figures[n][1].append(cpu)
            shown = [
                f"{statistics.median(w):.3f} s wall, {statistics.median(c):.3f} s CPU"
                for w, c in figures
            ]
            ratio = ""
            if len(figures) == 2:
                cpu_new, cpu_old = (statistics.median(c) for _, c in figures)
                ratio = f", CPU ratio {cpu_new / cpu_old:.2f}"
            print(f"{name}: {' | '.join(shown)}{ratio}, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
