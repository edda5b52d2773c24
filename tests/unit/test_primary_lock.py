"""The primary-mode lock body: the staging objects still to copy (``pending``) survive a round
trip, and a lock written before the list existed still names its one staging object."""

from __future__ import annotations

import json

from ledger.objstore.primary import LockState, staging_name, staging_size


def test_pending_staging_objects_round_trip_in_order() -> None:
    names = (staging_name(10, b"\x01" * 32, 0), staging_name(25, b"\x02" * 32, 10))
    state = LockState(
        writer="a", note="n", size=25, root_hash=b"\x02" * 32, staging=names[1], pending=names
    )
    again = LockState.decode(state.encode())
    assert again == state and again.waiting == names
    assert [staging_size(n) for n in again.waiting] == [10, 25]


def test_a_lock_without_the_list_waits_on_its_staging_object() -> None:
    name = f".ledger/staging/7-{'03' * 32}"  # a name from before it held the start
    body = {"writer": "a", "note": "n", "size": 7, "root": "03" * 32, "staging": name, "term": 2}
    state = LockState.decode(json.dumps(body).encode())
    assert state.pending == () and state.waiting == (name,)
    empty = LockState(writer="a", note="", size=0, root_hash=b"", staging="")
    assert LockState.decode(empty.encode()).waiting == ()


def test_staging_size_reads_only_staging_names() -> None:
    assert staging_size(staging_name(123456, b"\x00" * 32, 99)) == 123456
    assert staging_size("tile/0/000") == 0 and staging_size(".ledger/staging/x-00") == 0
