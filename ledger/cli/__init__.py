"""``ledger``: the operator's CLI (click), one module per group of commands; ``entry.main`` is
the console script and ``python -m ledger`` (Ctrl-C guarded before the command tree in ``main``
is imported).

Owns: the command tree and its options; the work is done by the packages below it. Commands
that talk to a running log use the client's ``remote``, ``receipts`` and ``sdk`` packages; the
plumbing shared with ``ledger-verify`` (connection options, error handler, exit codes) is
``ledger_client.clikit``.

May import: ``ledger.core``, ``ledger.timestamp``, ``ledger.records``, ``ledger.fileio``,
``ledger.store``, ``ledger.log``, ``ledger.witness``, ``ledger.tsa``, ``ledger.api``,
``ledger.http``, ``ledger.ops``, ``ledger.objstore``, ``ledger.app``, ``ledger_client.receipts``,
``ledger_client.remote``, ``ledger_client.sdk``, ``ledger_client.clikit``; libraries
``click``.
"""
