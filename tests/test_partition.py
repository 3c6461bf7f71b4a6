"""Scheduling shards (KAI's node pools, kaid.model.partition): a scheduler takes only its partition's nodes, Queues
and PodGroups; pods are read whatever their shard, for what they hold on the partition's nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kaid.api.config import NODE_POOL_LABEL, SchedulerConfig, load_config
from kaid.cycle import Decisions, run_cycle
from kaid.kube.podgrouper import podgroups_to_create
from kaid.model.build import build_snapshot
from kaid.model.live import LiveModel
from kaid.model.objects import Snapshot
from tests.objects import node, pod, podgroup, queue

Obj = dict[str, Any]


def pooled(obj: Obj, pool: str) -> Obj:
    """The object labelled for shard ``pool``."""
    obj["metadata"].setdefault("labels", {})[NODE_POOL_LABEL] = pool
    return obj


def config(**settings: Any) -> SchedulerConfig:
    return SchedulerConfig.model_validate({"actions": ["allocate"], **settings})


def snap(objs: list[Obj], **settings: Any) -> Snapshot:
    return build_snapshot(objs, config(**settings), 0.0)


def cycle(objs: list[Obj], **settings: Any) -> Decisions:
    cfg = config(**settings)
    return run_cycle(build_snapshot(objs, cfg, 0.0), cfg)


def where(d: Decisions) -> dict[str, str]:
    return {b.pod.split("/")[1]: b.node for b in d.binds}


def two_shards() -> list[Obj]:
    """Shard a: node a1, queues pa > qa, job ja; the default shard: node d1, queue qd, job jd."""
    return [pooled(node("a1", gpus=4), "a"), node("d1", gpus=4),
            pooled(queue("pa"), "a"), pooled(queue("qa", parent="pa"), "a"), queue("qd"),
            pooled(podgroup("ja", "qa"), "a"), pod("ja-0", gpus=1, group="ja"),
            podgroup("jd", "qd"), pod("jd-0", gpus=1, group="jd")]


def test_default_shard_leaves_labelled_nodes_alone() -> None:
    objs = [pooled(node("pool-x", gpus=8), "x"), queue("q"), podgroup("j", "q"), pod("j-0", gpus=1, group="j")]
    d = cycle(objs)
    assert d.binds == []  # (on a scheduler that takes every node: bound to pool-x)
    objs.append(node("plain", gpus=1))
    assert where(cycle(objs)) == {"j-0": "plain"}


def test_each_shard_sees_only_its_partition() -> None:
    objs = two_shards()
    a = snap(objs, partitionLabelValue="a")
    assert [n.name for n in a.nodes] == ["a1"]
    assert sorted(a.queues) == ["pa", "qa"]
    assert list(a.jobs) == ["default/ja"]
    assert [p.name for p in a.pods] == ["ja-0"]
    default = snap(objs)
    assert [n.name for n in default.nodes] == ["d1"]
    assert sorted(default.queues) == ["qd"]
    assert list(default.jobs) == ["default/jd"]
    assert where(cycle(objs, partitionLabelValue="a")) == {"ja-0": "a1"}
    assert where(cycle(objs)) == {"jd-0": "d1"}


def test_no_key_takes_everything() -> None:
    s = snap(two_shards(), nodePoolLabelKey="")
    assert [n.name for n in s.nodes] == ["a1", "d1"]
    assert sorted(s.queues) == ["pa", "qa", "qd"]
    assert sorted(s.jobs) == ["default/ja", "default/jd"]


def test_other_key() -> None:
    objs = [node("n1", labels={"pool": "p"}), node("n2"), pooled(node("n3"), "p")]
    assert [n.name for n in snap(objs, nodePoolLabelKey="pool", partitionLabelValue="p").nodes] == ["n1"]
    assert [n.name for n in snap(objs, nodePoolLabelKey="pool").nodes] == ["n2", "n3"]


def test_another_shards_pod_on_a_kept_node_is_usage_not_a_job() -> None:
    # jr: the default shard's job, running on shard a's node (placed before the node was labelled)
    objs = [*two_shards(), podgroup("jr", "qd"), pod("jr-0", gpus=3, group="jr", node_name="a1")]
    a = snap(objs, partitionLabelValue="a")
    assert "default/jr" not in a.jobs and "jr-0" not in [p.name for p in a.pods]
    assert a.node_by_name["a1"].idle == 1  # 4 GPUs, 3 held by jr-0
    assert where(cycle(objs, partitionLabelValue="a")) == {"ja-0": "a1"}
    objs[6]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "2"  # ja-0 asks 2: no room
    assert cycle(objs, partitionLabelValue="a").binds == []
    default = snap(objs)
    assert "default/jr" in default.jobs  # its own job, on a node it does not have


def test_pods_without_a_podgroup_follow_their_workload() -> None:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "w", "namespace": "default", "uid": "u1",
                                                                  "labels": {NODE_POOL_LABEL: "a"}}, "spec": {}}
    ref = [{"apiVersion": "batch/v1", "kind": "Job", "name": "w", "uid": "u1", "controller": True}]
    objs = [*two_shards(), owner,
            pod("w-0", gpus=1, queue="qa", ownerReferences=ref),  # the Job's label decides
            pooled(pod("bare", gpus=1, queue="qa"), "a"),  # no owner: its own label
            pod("plain", gpus=1, queue="qd")]
    objs[-3]["metadata"]["ownerReferences"] = objs[-3]["spec"].pop("ownerReferences")
    a = snap(objs, partitionLabelValue="a")
    assert sorted(a.jobs) == ["default/ja", "default/pg-job-w", "default/pg-pod-bare"]
    default = snap(objs)
    assert sorted(default.jobs) == ["default/jd", "default/pg-pod-plain"]
    objs[-3]["metadata"]["labels"][NODE_POOL_LABEL] = "b"  # the pod's own label counts only where the owner has none
    assert "default/pg-job-w" in snap(objs, partitionLabelValue="a").jobs


@pytest.mark.parametrize(("text", "words"), [
    ("nodePoolLabelKey: 'not a key!'\n", "'not a key!' is not a label key"),
    ("partitionLabelValue: gpu pool\n", "'gpu pool' is not a label value"),
    ("partitionLabelValue: -x\n", "'-x' is not a label value"),
    ("nodePoolLabelKey: ''\npartitionLabelValue: x\n", "needs a nodePoolLabelKey"),
])
def test_bad_partition_settings_are_named(tmp_path: Path, text: str, words: str) -> None:
    f = tmp_path / "config.yaml"
    f.write_text(text)
    with pytest.raises(ValueError, match=words):
        load_config(f)


def test_partition_settings_read() -> None:
    cfg = SchedulerConfig.model_validate({"nodePoolLabelKey": "example.com/pool", "partitionLabelValue": "gpu.a_1"})
    assert (cfg.nodePoolLabelKey, cfg.partitionLabelValue) == ("example.com/pool", "gpu.a_1")
    assert (SchedulerConfig().nodePoolLabelKey, SchedulerConfig().partitionLabelValue) == (NODE_POOL_LABEL, "")


def test_live_model_moves_objects_in_and_out_of_the_partition() -> None:
    model = LiveModel(config(partitionLabelValue="a"))
    for obj in two_shards():
        model.upsert(obj)
    s = model.snapshot()
    assert ([n.name for n in s.nodes], sorted(s.queues), list(s.jobs)) == (["a1"], ["pa", "qa"], ["default/ja"])
    moved = pooled(podgroup("jd", "qd"), "a")  # the default shard's job, labelled for shard a
    model.upsert(moved)
    model.upsert(pooled(queue("qd"), "a"))
    model.upsert(pooled(node("d1", gpus=4), "a"))
    s = model.snapshot()
    assert [n.name for n in s.nodes] == ["a1", "d1"] and "qd" in s.queues
    assert list(s.jobs) == ["default/ja", "default/jd"] and [p.name for p in s.jobs["default/jd"].pods] == ["jd-0"]
    model.upsert(podgroup("ja", "qa"))  # and shard a's job out of it
    model.upsert(node("a1", gpus=4))
    s = model.snapshot()
    assert [n.name for n in s.nodes] == ["d1"] and list(s.jobs) == ["default/jd"]
    assert [p.name for p in s.pods] == ["jd-0"]


def test_a_workloads_podgroup_decides_where_it_has_one() -> None:
    """A pod that names no PodGroup is in the partition of its workload's PodGroup where one exists (a label on it may
    move the job to another shard), else where its owner's label says; live as cold."""
    owner = pooled({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "default"},
                    "spec": {}}, "b")
    member = pod("rs-0", gpus=1, queue="qd")
    member["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                              "controller": True}]
    its_pg = podgroup("pg-replicaset-rs", "qd")  # in the default shard, whatever the ReplicaSet's label says
    model = LiveModel(config())
    objs = [*two_shards(), owner, member, its_pg]
    for obj in objs:
        model.upsert(obj)

    def jobs() -> list[str]:
        live = sorted(model.snapshot().jobs)
        assert live == sorted(build_snapshot(model.objects(), config()).jobs)
        return live

    assert jobs() == ["default/jd", "default/pg-replicaset-rs"]
    model.delete("PodGroup", "default/pg-replicaset-rs")
    assert jobs() == ["default/jd"]  # the ReplicaSet's label: shard b's
    model.upsert(podgroup("pg-replicaset-rs", "qd"))
    assert jobs() == ["default/jd", "default/pg-replicaset-rs"]
    model.upsert(pooled(podgroup("pg-replicaset-rs", "qd"), "b"))
    assert jobs() == ["default/jd"]


def test_podgrouper_copies_the_top_owners_labels_and_keeps_to_its_shard() -> None:
    owner: Obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "w", "namespace": "default", "uid": "u1", "labels": {"team": "nlp", NODE_POOL_LABEL: "a"}}, "spec": {}}
    worker = pod("w-0", gpus=1, queue="qa", labels={"user": "ann", NODE_POOL_LABEL: "b", "role": "worker"})
    worker["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "w", "uid": "u1",
                                              "controller": True}]
    bare = pod("bare", gpus=1, queue="qa", labels={NODE_POOL_LABEL: "a", "app": "x"})
    objs = [*two_shards(), owner, worker, bare]
    assert podgroups_to_create(objs, config()) == []  # shard a's workloads: not the default shard's to group
    made = {pg["metadata"]["name"]: pg["metadata"]["labels"] for pg in podgroups_to_create(objs, config(
        partitionLabelValue="a"))}
    created_by = {"kai.scheduler/created-by": "kaid", "kai.scheduler/queue": "qa"}
    assert made == {"pg-job-w": {"team": "nlp", NODE_POOL_LABEL: "a", "user": "ann", **created_by},
                    "pg-pod-bare": {NODE_POOL_LABEL: "a", "app": "x", **created_by}}
    del owner["metadata"]["labels"][NODE_POOL_LABEL]  # the pod's node-pool label where its owner has none
    made = {pg["metadata"]["name"]: pg for pg in podgroups_to_create(objs, config(partitionLabelValue="b"))}
    assert made["pg-job-w"]["metadata"]["labels"][NODE_POOL_LABEL] == "b"
    s = snap([*objs, *made.values()], partitionLabelValue="b")  # its PodGroup, made, is shard b's
    assert list(s.jobs) == ["default/pg-job-w"] and [p.name for p in s.jobs["default/pg-job-w"].pods] == ["w-0"]


def test_a_shards_binds_give_its_pods_the_shards_label_where_they_lack_it() -> None:
    """As KAI's scheduler patches each pod it binds with its shard's node-pool label (``cache.go``
    ``nodePoolLabelsChange``): the pod ja-0 is shard a's by its PodGroup's label alone; a pod labelled already, and
    every bind of the default shard, get nothing."""
    objs = [*two_shards(), pooled(pod("ja-1", gpus=1, group="ja"), "a")]
    d = cycle(objs, partitionLabelValue="a")
    assert {b.pod: b.set_labels for b in d.binds} == {"default/ja-0": ((NODE_POOL_LABEL, "a"),), "default/ja-1": ()}
    assert all(not b.set_labels for b in cycle(two_shards()).binds)


def test_the_shards_label_is_patched_onto_the_pod_before_its_bind() -> None:
    from kaid.cycle import Bind
    from kaid.kube.actuator import Actuator

    class Client:
        def __init__(self) -> None:
            self.patches: list[tuple[str, Any]] = []

        def merge_patch(self, path: str, patch: Any) -> dict[str, Any]:
            self.patches.append((path, patch))
            return {}

        def create(self, path: str, body: Any) -> dict[str, Any]:
            self.patches.append((path, "bind"))
            return {}

    client = Client()
    actuator = Actuator(client, workers=1)  # type: ignore[arg-type]
    try:
        labelled = Bind("ns/p", "n", "ns/j", "q", (0,), None, 1000, set_labels=((NODE_POOL_LABEL, "a"),))
        assert actuator._bind_one(labelled) is None
        assert actuator._bind_one(Bind("ns/r", "n", "ns/j", "q", (0,), None, 1000)) is None
    finally:
        actuator.close()
    assert client.patches == [("/api/v1/namespaces/ns/pods/p", {"metadata": {"labels": {NODE_POOL_LABEL: "a"}}}),
                              ("/api/v1/namespaces/ns/pods/p/binding", "bind"),
                              ("/api/v1/namespaces/ns/pods/r/binding", "bind")]
