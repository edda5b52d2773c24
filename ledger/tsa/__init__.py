"""Time-Stamping Authorities: RFC 3161 clients and the embedded development TSA.

Owns: the network client (``client``), the development authority, its keys and certificates
and its HTTP transport (``authority``, ``pki``, ``server``).

May import: ``ledger.core``, ``ledger.timestamp``, ``ledger.net``, ``ledger.fileio``;
libraries ``aiohttp``, ``asn1crypto``, ``cryptography``.
"""
