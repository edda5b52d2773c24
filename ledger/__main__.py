"""``python -m ledger`` runs the operator CLI (Ctrl-C guarded before anything heavy loads)."""

from ledger.cli.entry import main

main()
