"""The one small file-I/O helper that both the server and the client may import: standard
library only, so the offline verifier can use it.

Owns: signer key files written with mode 0600 (``keys``); durable writes and the private-key
file policy belong here.

May import: ``ledger.core``.
"""
