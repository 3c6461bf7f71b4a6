"""The idle devices a whole-GPU pod gets (``predicates.whole_devices``: found with ``list.index``) against the plain
reading: the first ``count`` devices at 0, all of them where fewer are idle."""

from __future__ import annotations

import random

from kaid.model.objects import Node
from kaid.placement.predicates import whole_devices


def _plain(node: Node, count: int) -> tuple[int, ...]:
    out = []
    for d in range(node.gpus):
        if node.dev_used[d] == 0:
            out.append(d)
            if len(out) == count:
                break
    return tuple(out)


def test_whole_devices_are_the_first_idle_ones() -> None:
    rng = random.Random(1)
    for _ in range(2000):
        node = Node("n", {}, [], False, True, 64000, 2**40, 110, rng.choice([0, 1, 2, 4, 8]), 0)
        node.dev_used = [rng.choice([0, 0, 500, 1000]) for _ in range(node.gpus)]
        for count in range(-1, node.gpus + 2):
            assert whole_devices(node, count) == _plain(node, count), (node.dev_used, count)
