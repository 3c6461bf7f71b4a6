"""What the node index keeps per pod shape (``Rooms``: each node's room, the nodes per room, the total and the sums
per label value), brought up to date from its log of changed nodes, against the plain reading of every node, after
the nodes were filled and emptied through the index between the questions; and the knapsack for alike pods
(``fewest_domains``, which reads the kept rooms) on such an index against the same knapsack on a fresh index over
the same nodes."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.model.objects import Node, Pod
from kaid.placement.fewest import fewest_domains
from kaid.placement.index import NodeIndex
from kaid.placement.predicates import room_for, static_failure


def _pod(name: str, whole: int, cpu: int, selective: bool) -> Pod:
    pod = Pod("ns", name, name)
    pod.gpu_whole, pod.cpu, pod.mem = whole, cpu, 10**9
    if selective:
        pod.node_selector, pod.sig = {"pool": "a"}, "pool=a"
    return pod


def _names(plan: list[tuple[Pod, Node]] | None) -> list[tuple[str, str]] | None:
    return None if plan is None else [(p.name, n.name) for p, n in plan]


_SHAPES = st.tuples(st.sampled_from([0, 1, 2, 4]), st.sampled_from([0, 1000, 16000]), st.booleans())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 2, 4, 8]), st.sampled_from(["a", "b"]), st.sampled_from([3, 110])),
                min_size=1, max_size=10),
       st.lists(st.tuples(st.integers(0, 9), _SHAPES, st.booleans()), max_size=40),
       st.lists(st.tuples(_SHAPES, st.integers(2, 12)), min_size=1, max_size=6))
def test_kept_rooms_match_the_plain_reading(nodes: list[tuple[int, str, int]],
                                            moves: list[tuple[int, tuple[int, int, bool], bool]],
                                            asked: list[tuple[tuple[int, int, bool], int]]) -> None:
    objs = []
    for i, (gpus, pool, slots) in enumerate(nodes):
        n = Node(f"n{i}", {"pool": pool, "rack": f"r{i % 3}"}, [], False, True, 32000, 64 * 10**9, slots, gpus, 81920)
        n.index = i
        objs.append(n)
    index = NodeIndex(objs)
    placed: list[tuple[Node, Pod, tuple[int, ...]]] = []
    questions = iter(asked)
    for k, (at, (whole, cpu, selective), back) in enumerate([*moves, (0, (0, 0, False), False)]):
        if k % 5 == 4 or k == len(moves):
            question = next(questions, None)
            if question is not None:
                (whole_q, cpu_q, selective_q), need = question
                pod = _pod(f"q{k}", whole_q, cpu_q, selective_q)
                pods = [_pod(f"q{k}-{j}", whole_q, cpu_q, selective_q) for j in range(need)]
                fresh_nodes = copy.deepcopy(objs)
                fresh = NodeIndex(fresh_nodes)
                for level in (None, "rack"):
                    got = fewest_domains(pods, index, None, level)
                    want = fewest_domains(pods, fresh, None, level)
                    assert _names(got) == _names(want)
                rooms = index.rooms(pod)
                plain = [room_for(n, pod) if static_failure(n, pod) is None else 0 for n in objs]
                assert rooms.room == plain
                assert rooms.total == sum(plain)
                assert rooms.nodes_by_room == {r: plain.count(r) for r in set(plain) if r}
                sums: dict[str, int] = {}
                for n, r in zip(objs, plain, strict=True):
                    sums[n.labels["rack"]] = sums.get(n.labels["rack"], 0) + r
                assert rooms.by_label(objs, "rack") == sums
        if k == len(moves):
            break
        if back and placed:
            node, pod, devs = placed.pop(at % len(placed))
            index.release(node, pod, devs, planning=k % 2 == 0)
        else:
            node, pod = objs[at % len(objs)], _pod(f"p{k}", whole, cpu, selective)
            chosen = index.devices_for(node, pod)
            if chosen is not None and static_failure(node, pod) is None:
                index.assign(node, pod, chosen)
                placed.append((node, pod, chosen))
