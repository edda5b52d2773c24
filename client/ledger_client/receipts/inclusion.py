"""RFC 9162 §2.1.3.2 inclusion proofs verified once per shared subtree.

Pure: no I/O. The receipts of one checkpoint prove leaves of one tree, and their proofs share
every subtree above the leaves they have in common: the proofs of leaves 6 and 7 of a tree of
10,000 differ only in their first hash. ``InclusionMemo.verify`` answers exactly as
``ledger.core.merkle.verify_inclusion`` does (the same errors, raised by it), computing only
what no earlier proof of the same tree computed:

The RFC's loop shifts its leaf and last-leaf positions ``fn`` and ``sn`` together, so after
``level`` shifts its whole state is ``(fn, sn, r, the proof hashes left)`` with
``fn = index >> level`` and ``sn = (size - 1) >> level``. The rest of the loop is a function of
that state alone. A proof that verified (its root equal to the checkpoint's) leaves behind, for
each state it passed through, the running hash ``r`` and the hashes it had left. A later proof
of the same tree (size and root) that reaches a remembered state with the same running hash and
the same hashes left would compute exactly what the remembered one computed from there on: the
same root. It is accepted there; anything else is computed in full (and a proof that fails is
verified again by ``merkle.verify_inclusion``, which names the problem).

Memory: the states of the last ``TREES`` trees (an index reads receipts grouped by checkpoint).
``verify_inclusion`` is ``InclusionMemo.verify`` of one memo per process: what it remembers are
facts about hashes, true under any trust inputs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from ledger.core import merkle

__all__ = ["TREES", "InclusionMemo", "verify_inclusion"]

TREES = 4  # trees (checkpoint size and root) whose states are kept
_State = tuple[int, int]  # (level, fn)
_Seen = tuple[bytes, tuple[bytes, ...], int]  # running hash, the proof, hashes used so far


class InclusionMemo:
    """Inclusion proofs verified by the states they share (module docstring)."""

    def __init__(self) -> None:
        self._trees: OrderedDict[tuple[int, bytes], dict[_State, _Seen]] = OrderedDict()
        self._last: tuple[int, bytes, dict[_State, _Seen]] | None = None  # the tree last used

    def _states(self, size: int, root: bytes) -> dict[_State, _Seen]:
        last = self._last
        if last is not None and last[0] == size and last[1] == root:
            return last[2]  # the receipts of one checkpoint come together
        tree = (size, root)
        states = self._trees.get(tree)
        if states is None:
            states = self._trees[tree] = {}
            while len(self._trees) > TREES:
                self._trees.popitem(last=False)
        else:
            self._trees.move_to_end(tree)
        self._last = (size, root, states)
        return states

    def verify(
        self, leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
    ) -> None:
        """``merkle.verify_inclusion(leaf_hash, index, size, proof, root)``, with the same
        answer (None, or the same error)."""
        size_ok = 0 <= index < size and len(leaf_hash) == len(root) == merkle.HASH_SIZE
        if not size_ok or not isinstance(proof, tuple):
            merkle.verify_inclusion(leaf_hash, index, size, proof, root)
            return
        states = self._states(size, root)
        passed: list[tuple[_State, bytes, int]] = []
        fn, sn, r, level = index, size - 1, leaf_hash, 0
        node_hash = merkle.node_hash
        for used, p in enumerate(proof, 1):
            if sn == 0 or len(p) != merkle.HASH_SIZE:
                break  # the full check names the problem
            if fn & 1 or fn == sn:
                r = node_hash(p, r)
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
                    level += 1
            else:
                r = node_hash(r, p)
            fn >>= 1
            sn >>= 1
            level += 1
            seen = states.get((level, fn))
            if seen is not None and seen[0] == r and seen[1][seen[2] :] == proof[used:]:
                if passed:  # the rest computes what a verified proof computed from here:
                    self._remember(states, passed, proof)  # the same root
                return
            passed.append(((level, fn), r, used))
        else:
            if sn == 0 and r == root:
                self._remember(states, passed, proof)
                return
        merkle.verify_inclusion(leaf_hash, index, size, proof, root)  # raises, naming it

    @staticmethod
    def _remember(
        states: dict[_State, _Seen],
        passed: list[tuple[_State, bytes, int]],
        proof: tuple[bytes, ...],
    ) -> None:
        for state, running, used in passed:
            if state not in states:
                states[state] = (running, proof, used)


_MEMO = InclusionMemo()


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """``merkle.verify_inclusion`` through this process's memo (module docstring)."""
    _MEMO.verify(leaf_hash, index, size, proof, root)
