"""``ledger-verify``: the offline verifier's CLI (click); ``entry.main`` is the console script
(Ctrl-C guarded before the command tree in ``main`` is imported).

Owns: the command tree (proofs, notes, receipts and runs, anchors, audits, the index, tiles,
the monitor, agent keys and chains); the plumbing it shares with ``ledger`` is
``ledger_client.clikit``. Only the commands that talk to a server load
``ledger_client.remote.log`` (and grpc), lazily.

May import: ``ledger.core``, ``ledger.timestamp``, ``ledger.records``, ``ledger.fileio``,
``ledger_client.receipts``, ``ledger_client.remote``, ``ledger_client.audit``,
``ledger_client.clikit``; libraries ``click``, ``cryptography``, ``asn1crypto``.
"""
