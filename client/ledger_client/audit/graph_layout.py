"""A layered drawing of a parent graph in which no edge passes under a box.

Pure: no I/O. docs/auditing.md "The report's parent graph". The graph (boxes of one size, edges
parent -> child, acyclic, as record parents are) is laid out top to bottom by the Sugiyama
method of ``grandalf`` (layers by longest path, crossing reduction, Brandes-Köpf coordinates):
an edge spanning several layers gets a dummy vertex in each layer between, so every edge is a
chain of one-layer hops. Each layer is then swept left to right so that no two vertices of a
layer (boxes and dummies) are closer than ``GAP`` (the averaged coordinates may overlap).

An edge is drawn as a polyline that leaves its parent through the bottom of the box, goes
straight down through each dummy's place in the layers it crosses (the dummy's place holds no
box) and enters the child through the top. Between two layers there is no box, so a segment
across the gap crosses nothing; inside a layer the segment is vertical at a dummy's place.
Disconnected parts are laid out one beside the other.

A layout depends only on the shape of the graph (how many boxes, which index links to which), so
it is computed once per shape and process (``_SHAPES``, the last ``_SHAPES_KEPT``): the runs of
one agent's workflow usually share a shape, and a report of 1,000 runs draws 1,000 graphs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from grandalf.graphs import Edge, Graph, Vertex
from grandalf.layouts import SugiyamaLayout

__all__ = ["BOX_H", "BOX_W", "GAP", "Layout", "layout"]

BOX_W, BOX_H = 170, 40
GAP = 24  # minimum horizontal space between two vertices of a layer
LAYER_GAP = 36  # vertical space between layers
MARGIN = 16
_DUMMY_W = 8


class _View:
    __slots__ = ("h", "w", "xy")

    def __init__(self, w: float, h: float) -> None:
        self.w, self.h = w, h
        self.xy = (0.0, 0.0)

    def setpath(self, points: object) -> None:  # grandalf's edge view protocol
        return None


@dataclass(frozen=True, slots=True)
class Layout:
    """Boxes by id (top-left x, y; every box ``BOX_W`` x ``BOX_H``), each edge's polyline
    (in the order given), and the drawing's size."""

    boxes: dict[str, tuple[float, float]]
    edges: list[list[tuple[float, float]]]
    width: float
    height: float


_Shape = tuple[int, tuple[tuple[int, int], ...]]
_Drawn = tuple[list[tuple[float, float]], list[list[tuple[float, float]]], float, float]
_SHAPES: dict[_Shape, _Drawn] = {}
_SHAPES_KEPT = 256


def layout(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> Layout:
    """Lay out ``nodes`` (ids, in a stable order) and ``edges`` (parent id, child id)."""
    number = {n: i for i, n in enumerate(nodes)}
    if len(number) != len(nodes):  # ids repeated: no shape to share
        return _layout(nodes, edges)
    shape = (len(nodes), tuple((number[p], number[c]) for p, c in edges))
    drawn = _SHAPES.get(shape)
    if drawn is None:
        done = _layout(nodes, edges)
        if len(_SHAPES) >= _SHAPES_KEPT:
            _SHAPES.clear()
        drawn = _SHAPES[shape] = ([done.boxes[n] for n in nodes], done.edges, done.width,
                                  done.height)  # fmt: skip
    corners, lines, width, height = drawn
    return Layout(dict(zip(nodes, corners, strict=True)), [list(e) for e in lines], width, height)


def _layout(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> Layout:
    vertices = {n: Vertex(n) for n in nodes}
    for v in vertices.values():
        v.view = _View(BOX_W, BOX_H)
    made = []
    for parent, child in edges:
        edge = Edge(vertices[parent], vertices[child])
        edge.view = _View(0, 0)
        made.append(edge)
    graph = Graph(list(vertices.values()), made)
    centres: dict[object, tuple[float, float]] = {}
    hops: dict[int, list[tuple[float, float, float]]] = {}  # edge -> dummy (x, top, bottom)
    x_offset = float(MARGIN)
    height = 0.0
    for part in graph.C:
        placed, paths, width, tall = _lay_part(part)
        for vertex, (x, y) in placed.items():
            centres[vertex] = (x + x_offset, y + MARGIN)
        for key, dummies in paths.items():
            hops[key] = [(x + x_offset, top + MARGIN, bot + MARGIN) for x, top, bot in dummies]
        x_offset += width + GAP
        height = max(height, tall)
    boxes = {n: (centres[v][0] - BOX_W / 2, centres[v][1] - BOX_H / 2) for n, v in vertices.items()}
    lines = []
    for edge in made:
        (px, py), (cx, cy) = centres[edge.v[0]], centres[edge.v[1]]
        points: list[tuple[float, float]] = [(px, py + BOX_H / 2 - 1)]
        for x, top, bottom in hops.get(id(edge), []):
            points += [(x, top), (x, bottom)]
        points.append((cx, cy - BOX_H / 2 + 1))
        lines.append(points)
    return Layout(boxes, lines, x_offset - GAP + MARGIN, height + 2 * MARGIN)


_Placed = dict[object, tuple[float, float]]
_Hops = dict[int, list[tuple[float, float, float]]]


def _lay_part(part: Any) -> tuple[_Placed, _Hops, float, float]:
    sug = SugiyamaLayout(part)
    sug.xspace, sug.yspace = GAP, LAYER_GAP
    sug.dw, sug.dh = _DUMMY_W, BOX_H
    roots = [v for v in part.sV if len(v.e_in()) == 0]
    sug.init_all(roots=roots, optimize=False)
    sug.draw(3)
    left = 0.0
    for layer in sug.layers:  # keep the order, enforce the spacing
        ordered = sorted(layer, key=lambda v: v.view.xy[0])
        edge_x = None
        for v in ordered:
            x, y = v.view.xy
            if edge_x is not None and x - v.view.w / 2 < edge_x + GAP:
                x = edge_x + GAP + v.view.w / 2
            v.view.xy = (x, y)
            edge_x = x + v.view.w / 2
        left = min(left, min(v.view.xy[0] - v.view.w / 2 for v in ordered))
    placed: dict[object, tuple[float, float]] = {}
    right = bottom = 0.0
    for layer in sug.layers:
        for v in layer:
            x, y = v.view.xy
            placed[v] = (x - left, y)
            right = max(right, x - left + v.view.w / 2)
            bottom = max(bottom, y + BOX_H / 2)
    paths: dict[int, list[tuple[float, float, float]]] = {}
    for edge, dummies in sug.ctrls.items():
        r0, r1 = sug.grx[edge.v[0]].rank, sug.grx[edge.v[1]].rank
        ranks = range(r0 + 1, r1) if r0 < r1 else range(r0 - 1, r1, -1)
        paths[id(edge)] = [
            (placed[dummies[r]][0], placed[dummies[r]][1] - BOX_H / 2,
             placed[dummies[r]][1] + BOX_H / 2)
            for r in ranks
        ]  # fmt: skip
    return placed, paths, right, bottom
