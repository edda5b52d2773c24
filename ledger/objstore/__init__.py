"""The log published to S3-compatible object storage (AWS S3, R2, MinIO, Ceph RGW, SeaweedFS;
GCS through its XML API), so that a bucket, or a CDN in front of it, is the public read path.

Owns: the bucket client with create-only and compare-and-swap writes (``bucket``, over boto3),
the C2SP tlog-tiles publisher (``publisher``), the conditional-write conformance check
(``conformance``, ``ledger objstore check``), mirror mode beside a running server
(``mirror``, spawned as ``python -m ledger.objstore.mirror``) and primary mode, where the bucket
holds the log (``primary``: staging object, lock swap, copy; the lease and the standby's watch).

May import: ``ledger.core``, ``ledger.store``, ``ledger.http`` (the pipe to a mirror child,
shared with the tile mirror), ``ledger.net.keepalive`` (the PUTs' kept-open connections);
libraries ``boto3``, ``botocore``, ``prometheus_client``, ``subprocess``, ``urllib3``
(botocore's own HTTP pool).
"""
