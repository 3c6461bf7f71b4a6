"""Fair share: deserved first, over-quota by priority and weight, capped by limit and request."""

from kaid.fairshare import compute_fair_share
from kaid.fairshare.division import Share, divide
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
    # 16 GPUs: a 4 + b 2 deserved, 10 left split 1:3 -> a 2.5, b 7.5, in whole GPUs 2 and 7; the GPU rounding
    # held back goes to the larger lost fraction (a tie here), then the older queue, then the name: a
    # (KAI: "distributes remainder between queues based on largest remaining", resource_division_test.go)
    assert s["a"] == 7 and s["b"] == 9


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


def test_oversubscribed_quotas_keep_their_deserved_share() -> None:
    """A deserved share is a promise even when the quotas over-subscribe the parent (KAI: "gives deserved in
    over subscription", resource_division_test.go): each queue's fair share is min(quota, request)."""
    objs = [*cluster(1), queue("a", gpu=(8, -1, 1)), queue("b", gpu=(8, -1, 1)), *demand("a", 1, 8),
            *demand("b", 1, 8)]
    s = shares(objs)
    assert s["a"] == 8 and s["b"] == 8


def test_rounded_off_gpus_go_to_the_largest_fraction_then_the_older_queue() -> None:
    """KAI's tie-breaks ("distributes remainder between queues based on largest remaining", resource_division_test):
    over quota, parts are whole GPUs; the GPUs rounding held back go to the largest lost fraction first, then to
    the older queue, then to the smaller name."""
    def three(created: tuple[float, float, float]) -> list[Share]:
        return [Share(name, 100, t, 0, -1, 1.0, 10_000) for name, t in zip("cab", created, strict=True)]
    even = three((0.0, 0.0, 0.0))
    assert divide(10_000, even, 1000) == 0
    assert [s.fair for s in even] == [3000, 4000, 3000]  # the extra GPU goes to the first name, "a"
    by_age = three((5.0, 9.0, 1.0))
    divide(10_000, by_age, 1000)
    assert [s.fair for s in by_age] == [3000, 3000, 4000]  # ... unless another queue is older: "b"


def test_usage_history_lowers_weight_of_heavy_users() -> None:
    objs = [*cluster(2), queue("a", gpu=(0, -1, 1)), queue("b", gpu=(0, -1, 1)), *demand("a", 1, 16),
            *demand("b", 1, 16)]
    even = shares(objs, usage={"a": [0.0, 0, 0], "b": [0.0, 0, 0]})
    skewed = shares(objs, usage={"a": [0.9, 0, 0], "b": [0.1, 0, 0]})  # shares of the cluster's capacity
    assert even["a"] == even["b"] == 8
    assert skewed["a"] < skewed["b"] and skewed["a"] + skewed["b"] == 16


def test_what_other_schedulers_pods_hold_is_no_queues_to_share() -> None:
    """KAI's proportion leaves out of the capacity it divides what pods of other schedulers hold on the nodes
    (``getNodeResources``, d5bc503a): 16 GPUs with 8 held by a default-scheduler pod leave 8 to share, 4 each. kai
    divided all 16 (8 each), so a queue running 8 read as within its share and was not reclaimed from."""
    other = pod("notebook", gpus=8, node_name="n1", phase="Running", scheduler="default-scheduler")
    mine = pod("reserved", gpus=1, node_name="n1", phase="Running", queue="a")  # (this scheduler's: not left out)
    objs = [*cluster(2), queue("a", gpu=(0, -1, 1)), queue("b", gpu=(0, -1, 1)), other,
            *demand("a", 1, 16), *demand("b", 1, 16)]
    assert shares(objs) == {"a": 4, "b": 4}
    assert build_snapshot([*objs, mine]).capacity()[GPU] == 8000
    objs.remove(other)
    assert shares(objs) == {"a": 8, "b": 8}


def test_a_queue_over_the_share_left_by_other_schedulers_is_reclaimed_from() -> None:
    from kaid.api.config import SchedulerConfig
    from kaid.cycle import run_cycle

    objs = [*cluster(2), queue("a", gpu=(0, -1, 1)), queue("b", gpu=(0, -1, 1)),
            pod("notebook", gpus=8, node_name="n1", phase="Running", scheduler="default-scheduler"),
            *(pod(f"a-{i}", gpus=1, queue="a", node_name="n0", phase="Running") for i in range(8)),
            pod("b-0", gpus=1, queue="b")]
    cfg = SchedulerConfig()
    d = run_cycle(build_snapshot(objs, cfg, 1_000_000.0), cfg)
    assert [e.action for e in d.evictions] == ["reclaim"] and [p.pod for p in d.pipelined] == ["default/b-0"]
