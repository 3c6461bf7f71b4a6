"""Fair share: deserved first, over-quota by priority and weight, capped by limit and request."""

from fractions import Fraction

from kaid.fairshare import compute_fair_share, decay_usage
from kaid.fairshare.compute import waterfill
from kaid.model.build import build_snapshot
from kaid.model.objects import GPU, Snapshot
from tests.objects import node, pod, queue


def shares(objs: list[dict[str, object]], usage: dict[str, list[float]] | None = None) -> dict[str, float]:
    snap: Snapshot = build_snapshot(objs, usage=usage)
    compute_fair_share(snap, use_usage=usage is not None)
    return {q.name: q.fair[GPU] / 1000 for q in snap.queues.values()}


def demand(q: str, gpus: int, n: int = 1) -> list[dict[str, object]]:
    return [pod(f"{q}-{i}", gpus=gpus, queue=q, cpu="1", memory="1Gi") for i in range(n)]


def cluster(nodes: int = 2) -> list[dict[str, object]]:
    return [node(f"n{i}") for i in range(nodes)]  # 8 GPUs each


def test_deserved_then_weights() -> None:
    objs = [*cluster(2), queue("a", gpu=(4, -1, 1)), queue("b", gpu=(2, -1, 3)),
            *demand("a", 1, 16), *demand("b", 1, 16)]
    s = shares(objs)
    # 16 GPUs: a 4 + b 2 deserved, 10 left split 1:3 -> a 2.5, b 7.5
    assert s["a"] == 6.5 and s["b"] == 9.5


def test_capped_by_request_and_limit() -> None:
    objs = [*cluster(2), queue("a", gpu=(4, 5, 1)), queue("b", gpu=(0, -1, 1)), queue("c", gpu=(0, -1, 1)),
            *demand("a", 1, 16), *demand("b", 1, 2), *demand("c", 1, 16)]
    s = shares(objs)
    assert s["a"] == 5  # limit
    assert s["b"] == 2  # its request
    assert s["c"] == 9


def test_limit_unset_means_quota() -> None:
    objs = [*cluster(2), queue("a", gpu=(3, 0, 1)), *demand("a", 1, 16)]
    assert shares(objs)["a"] == 3


def test_priority_buckets_first() -> None:
    objs = [*cluster(2), queue("hi", gpu=(0, -1, 1), priority=200), queue("lo", gpu=(2, -1, 10)),
            *demand("hi", 1, 12), *demand("lo", 1, 12)]
    s = shares(objs)
    assert s["lo"] == 4 and s["hi"] == 12  # lo keeps its deserved 2, hi takes 12 first, lo gets the rest


def test_three_levels_and_unlimited_quota() -> None:
    objs = [*cluster(3), queue("org", gpu=(-1, -1, 1)), queue("d1", "org", gpu=(8, -1, 1)),
            queue("d2", "org", gpu=(4, -1, 1)), queue("t1", "d1", gpu=(6, -1, 1)), queue("t2", "d1", gpu=(2, -1, 1)),
            queue("t3", "d2", gpu=(-1, -1, 1)),
            *demand("t1", 1, 24), *demand("t2", 1, 1), *demand("t3", 1, 24)]
    s = shares(objs)
    assert s["org"] == 24
    assert s["d1"] + s["d2"] == 24
    assert s["t2"] == 1  # request cap
    assert s["t1"] + s["t2"] == s["d1"]
    assert s["t3"] == s["d2"]
    # d1 deserved 8 (req 25), d2 deserved 4; 12 left split 1:1 -> d1 14, d2 10
    assert (s["d1"], s["d2"]) == (14, 10)


def test_oversubscribed_quotas_scale_within_priority() -> None:
    objs = [*cluster(1), queue("a", gpu=(8, -1, 1)), queue("b", gpu=(8, -1, 1)), *demand("a", 1, 8),
            *demand("b", 1, 8)]
    s = shares(objs)
    assert s["a"] + s["b"] == 8 and s["a"] == 4


def test_fractional_remainders_are_deterministic() -> None:
    give = waterfill(10, [100, 100, 100], [Fraction(1)] * 3, ["c", "a", "b"])
    assert sum(give) == 10 and give == [3, 4, 3]  # the extra unit goes to the first name, "a"


def test_usage_history_lowers_weight_of_heavy_users() -> None:
    objs = [*cluster(2), queue("a", gpu=(0, -1, 1)), queue("b", gpu=(0, -1, 1)), *demand("a", 1, 16),
            *demand("b", 1, 16)]
    even = shares(objs, usage={"a": [0.0, 0, 0], "b": [0.0, 0, 0]})
    skewed = shares(objs, usage={"a": [900.0, 0, 0], "b": [100.0, 0, 0]})
    assert even["a"] == even["b"] == 8
    assert skewed["a"] < skewed["b"] and skewed["a"] + skewed["b"] == 16


def test_decay_usage_half_life() -> None:
    u = decay_usage([100.0, 0, 0], [0, 0, 0], 60, 60)
    assert u[0] == 50.0
    assert decay_usage([100.0, 0, 0], [10, 0, 0], 60, 0) == [0.0, 0.0, 0.0]
