"""The pure core: what the server and the offline verifier share, with no I/O and no clock.

Owns: RFC 6962/9162 Merkle math (``merkle``), C2SP signed notes and Ed25519 keys (``note``),
checkpoints and cosignatures (``checkpoint``), C2SP tlog-tiles paths, bundles and the tile
storage layout (``tiles``, ``tile_layout``), tlog-proof (``tlogproof``), RFC 8785 JSON
(``jcs``), protocol limits (``limits``), URLs shown without their secrets (``redact``), the
shared frozen types (``types``: leaves, proofs, anchors, RPC outcomes), the packed-append shape
(``packed``) and the one error tree (``errors``).

May import: libraries ``cryptography``, ``rfc8785``.
"""
