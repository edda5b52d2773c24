"""Operating a log's data: the data dir's binding, backups, restores and fsck.

Owns: the binding of a data dir to its log (``binding``), backups (``backup``), restores that
are never silent rollbacks (``restore``) and checking a stopped log byte by byte (``fsck``).

May import: ``ledger.core``, ``ledger.timestamp``, ``ledger.store``, ``ledger.log``,
``ledger.fileio``; libraries ``cryptography``.
"""
