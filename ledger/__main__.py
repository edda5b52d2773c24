"""``python -m ledger`` runs the operator CLI."""

from ledger.cli import main

main()
