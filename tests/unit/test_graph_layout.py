"""The report's graph layout (``audit.graph_layout``) on random parent graphs: no two boxes
overlap, every edge starts in its parent's box and ends in its child's, and no segment of an
edge passes through any other box (sampled every pixel along it)."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from ledger_client.audit.graph_layout import _SHAPES, BOX_H, BOX_W, Layout, layout


def _inside(point: tuple[float, float], box: tuple[float, float], margin: float = 0.0) -> bool:
    x, y = box
    return (
        x - margin <= point[0] <= x + BOX_W + margin
        and y - margin <= point[1] <= y + BOX_H + margin
    )


def _strictly(point: tuple[float, float], box: tuple[float, float]) -> bool:
    x, y = box
    return x < point[0] < x + BOX_W and y < point[1] < y + BOX_H


def _check(drawn: Layout, nodes: list[str], edges: list[tuple[str, str]]) -> None:
    boxes = list(drawn.boxes.items())
    for i, (a, (ax, ay)) in enumerate(boxes):
        for b, (bx, by) in boxes[i + 1 :]:
            apart = ax + BOX_W <= bx or bx + BOX_W <= ax or ay + BOX_H <= by or by + BOX_H <= ay
            assert apart, f"boxes {a} and {b} overlap"
    for (parent, child), points in zip(edges, drawn.edges, strict=True):
        assert _inside(points[0], drawn.boxes[parent]) and _inside(points[-1], drawn.boxes[child])
        for (x0, y0), (x1, y1) in pairwise(points):
            steps = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
            for k in range(steps + 1):
                point = (x0 + (x1 - x0) * k / steps, y0 + (y1 - y0) * k / steps)
                for other in nodes:
                    if other not in (parent, child):
                        assert not _strictly(point, drawn.boxes[other]), (parent, child, other)


@pytest.mark.parametrize("seed", range(6))
def test_random_dags_have_no_edge_under_a_box(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [f"n{i}" for i in range(24)]
    edges = sorted(
        {(f"n{rng.randrange(i)}", f"n{i}") for i in range(1, 24) for _ in range(rng.randint(1, 3))}
    )
    _check(layout(nodes, edges), nodes, edges)


def test_a_chain_is_one_column_and_disconnected_parts_sit_side_by_side() -> None:
    chain = [f"c{i}" for i in range(17)]
    links = [(chain[i], chain[i + 1]) for i in range(16)]
    drawn = layout([*chain, "alone"], links)
    assert len({x for x, _ in (drawn.boxes[c] for c in chain)}) == 1
    assert drawn.width < 1280 and drawn.boxes["alone"][0] > drawn.boxes["c0"][0]
    _check(drawn, [*chain, "alone"], links)


def test_a_shape_is_laid_out_once_and_drawn_alike_for_other_ids() -> None:
    first = layout(["a", "b", "c", "d"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    first.edges[0].clear()  # a caller's change to its answer stays its own
    other = layout(["w", "x", "y", "z"], [("w", "x"), ("w", "y"), ("x", "z"), ("y", "z")])
    again = layout(["a", "b", "c", "d"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    assert [other.boxes[n] for n in "wxyz"] == [again.boxes[n] for n in "abcd"]
    assert other.edges == again.edges and all(len(e) >= 2 for e in again.edges)
    assert (other.width, other.height) == (again.width, again.height)
    assert _SHAPES  # computed once, kept
