"""``python -m ledger`` runs the operator CLI."""

from ledger.cli.main import main

main()
