"""Regenerate the committed protobuf/gRPC code under ``ledger/v1`` from ``proto/``.

Usage: ``python tools/gen_proto.py [--out DIR]`` (``make proto``). The drift test
(``tests/unit/test_proto_drift.py``) generates into a temporary folder and fails when the
committed files differ.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PROTOS = ["ledger/v1/ledger.proto"]
GENERATED = ["ledger_pb2.py", "ledger_pb2.pyi", "ledger_pb2_grpc.py"]


def generate(out: Path) -> list[Path]:
    """Run protoc (from grpcio-tools) into ``out``; return the generated files."""
    from grpc_tools import protoc

    out.mkdir(parents=True, exist_ok=True)
    include = str(Path(protoc.__file__).parent / "_proto")
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *[str(PROTO_ROOT / p) for p in PROTOS],
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return [out / "ledger" / "v1" / name for name in GENERATED]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT, help="output root (default: repo)")
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path.relative_to(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
