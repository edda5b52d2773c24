"""RFC 3161 time-stamp tokens, verified offline: pure, no I/O (part of the pure core).

Owns: reading responses and tokens (``asn1``: RFC 5652 CMS), certificate checks (``certs``), the
anchor time policy (``policy``) and request building and verification (``rfc3161``).

May import: ``ledger.core``; libraries ``asn1crypto``, ``cryptography``.
"""
