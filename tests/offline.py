"""A probe for "the offline verifier imports neither grpc nor rocksdict" (docs/design.md
"Rules of the house", rule 1).

``python -c OFFLINE_PROBE ARGS...`` runs ``ledger-verify ARGS...`` in a fresh interpreter and, as
it exits, prints ``IMPORTED [...]`` with whichever of grpc, rocksdict and protobuf got loaded.
"""

OFFLINE_PROBE = (
    "import sys\n"
    "from ledger_client.cli.main import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit as e:\n"
    "    bad = [m for m in ('grpc', 'rocksdict', 'google.protobuf') if m in sys.modules]\n"
    "    print('IMPORTED', bad)\n"
    "    raise\n"
)
