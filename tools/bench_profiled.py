"""``ledger serve`` under cProfile, with one profile per Python thread (benchmark profiling).

Usage: ``python tools/bench_profiled.py OUT_DIR LABEL serve [ledger serve flags...]``.

cProfile only sees the thread that enabled it, and the log's work is split between the asyncio
thread (gRPC handlers, proofs) and the single writer thread (group commits, publishing). So a
profiler is enabled in the main thread and, through ``threading.setprofile``, in every thread
started later. On a graceful exit (SIGTERM) each profile is written to
``OUT_DIR/LABEL.<thread>.prof`` (``pstats`` format); wall-clock times, so waits count too.
"""

from __future__ import annotations

import cProfile
import io
import marshal
import pstats
import re
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = ["main", "summarize_profiles"]

TOP = 30

_profiles: dict[str, cProfile.Profile] = {}
_lock = threading.Lock()


def _thread_key() -> str:
    thread = threading.current_thread()
    return re.sub(r"[^A-Za-z0-9_-]+", "_", f"{thread.name}-{thread.ident}")


def _start_thread_profile(frame: FrameType, event: str, arg: Any) -> None:
    """First profile event in a new thread: switch that thread to its own cProfile."""
    profile = cProfile.Profile()
    with _lock:
        _profiles[_thread_key()] = profile
    profile.enable()


def _dump(out_dir: Path, label: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with _lock:
        profiles = dict(_profiles)
    for key, profile in profiles.items():
        if key == "main":
            profile.create_stats()
        else:  # finished (or idle) threads: read their stats without touching their hook
            profile.snapshot_stats()
        with (out_dir / f"{label}.{key}.prof").open("wb") as f:
            marshal.dump(profile.stats, f)


def summarize_profiles(folder: Path, top: int = TOP) -> str:
    """The ``top`` functions of every profile in ``folder``, by own time and by cumulative time."""
    out = io.StringIO()
    for path in sorted(folder.glob("*.prof")):
        stats = pstats.Stats(str(path), stream=out)
        total = stats.total_tt  # type: ignore[attr-defined]
        out.write(f"\n===== {path.name}: {total:.2f} s profiled wall time =====\n")
        stats.sort_stats("tottime").print_stats(top)
        stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv: list[str]) -> int:
    """Profile ``ledger`` with ``argv[2:]``; write the profiles under ``argv[0]``."""
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir, label, cli_args = Path(argv[0]), argv[1], argv[2:]
    from ledger.cli.main import main as ledger_main

    threading.setprofile(_start_thread_profile)
    main_profile = cProfile.Profile()
    _profiles["main"] = main_profile
    main_profile.enable()
    code = 0
    try:
        ledger_main.main(args=cli_args, prog_name="ledger", standalone_mode=False)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        threading.setprofile(None)
        _dump(out_dir, label)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
