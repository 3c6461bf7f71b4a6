"""Which nodes take which pods by their role and their conditions. KAI's restrictSchedulingNodes
(``--restrict-node-scheduling``): only nodes labelled as GPU or CPU workers are scheduled to (the others are left out
of the snapshot, their GPUs outside every queue's share); a pod asking for GPUs goes only to a GPU worker, another
only to a CPU worker (KAI's predicates plugin and ``filterUnmarkedNodes``, proportion's ``getNodeResources`` at
d5bc503a). Off, as KAI's default, every node takes every pod. A node under memory, disk or PID pressure takes none."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from kaid.api.config import CPU_WORKER_LABEL, GPU_WORKER_LABEL, SchedulerConfig, load_config
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.live import LiveModel
from kaid.model.objects import Snapshot
from kaid.model.vocabulary import GPU
from tests.objects import node, pod, queue

Obj = dict[str, Any]
RESTRICT = SchedulerConfig(restrictSchedulingNodes=True)


def cluster() -> list[Obj]:
    """A GPU worker, a CPU worker with GPUs (its GPUs are not to be used), a node of neither (the control plane's),
    a GPU pod and a CPU pod."""
    return [node("gpu-0", gpus=8, labels={GPU_WORKER_LABEL: ""}), node("cpu-0", gpus=4, labels={CPU_WORKER_LABEL: ""}),
            node("other", gpus=8), queue("q"), pod("trainer", gpus=1, queue="q"), pod("loader", queue="q")]


def snapshots(objs: list[Obj], cfg: SchedulerConfig) -> list[Snapshot]:
    """The cold build's snapshot and the daemon's live model's, of the same objects."""
    model = LiveModel(cfg)
    for obj in copy.deepcopy(objs):
        model.upsert(obj)
    return [build_snapshot(objs, cfg, 0.0), model.snapshot(0.0)]


def where(d: Decisions) -> dict[str, str]:
    return {b.pod.split("/")[1]: b.node for b in d.binds}


def test_gpu_pods_go_to_gpu_workers_and_the_others_to_cpu_workers() -> None:
    for snap in snapshots(cluster(), RESTRICT):
        assert [n.name for n in snap.nodes] == ["cpu-0", "gpu-0"]  # (the unmarked node is left out)
        assert snap.capacity()[GPU] == 8000  # (the CPU worker's GPUs count for no queue)
        assert where(run_cycle(snap, RESTRICT)) == {"trainer": "gpu-0", "loader": "cpu-0"}
    off = SchedulerConfig()
    for snap in snapshots(cluster(), off):  # KAI's default: every node, every pod (binpack: the fullest that fits)
        assert len(snap.nodes) == 3 and snap.capacity()[GPU] == 20000


def test_a_pod_with_no_worker_of_its_kind_waits_and_says_why() -> None:
    objs = [o for o in cluster() if o["metadata"]["name"] != "cpu-0"]
    for snap in snapshots(objs, RESTRICT):
        d = run_cycle(snap, RESTRICT)
        assert where(d) == {"trainer": "gpu-0"}
        (why,) = [r for r in d.pending["default/pg-pod-loader"] if r.code == "NodeFit"]
        assert why.details["failures"] == {"NodeRole": 1} and "not a worker of the pod's kind" in why.message


def test_a_label_that_makes_a_node_a_worker_brings_it_in() -> None:
    model = LiveModel(RESTRICT)
    for obj in cluster():
        model.upsert(obj)
    assert [n.name for n in model.snapshot(0.0).nodes] == ["cpu-0", "gpu-0"]
    model.upsert(node("other", gpus=8, labels={GPU_WORKER_LABEL: "true"}))
    assert [n.name for n in model.snapshot(0.0).nodes] == ["cpu-0", "gpu-0", "other"]
    model.upsert(node("gpu-0", gpus=8))
    assert [n.name for n in model.snapshot(0.0).nodes] == ["cpu-0", "other"]


def test_the_settings_are_read_and_a_bad_label_key_is_named(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("restrictSchedulingNodes: true\ngpuWorkerNodeLabelKey: example.com/gpu\n")
    cfg = load_config(path)
    assert cfg.restrictSchedulingNodes and cfg.gpuWorkerNodeLabelKey == "example.com/gpu"
    assert cfg.cpuWorkerNodeLabelKey == CPU_WORKER_LABEL
    path.write_text("cpuWorkerNodeLabelKey: 'not a key!'\n")
    with pytest.raises(Exception, match="not a label key"):
        load_config(path)


@pytest.mark.parametrize(("condition", "status", "takes"), [
    ("MemoryPressure", "True", False), ("DiskPressure", "Unknown", False), ("PIDPressure", "False", True),
    ("NetworkUnavailable", "True", False), ("SomethingElse", "True", True),
])
def test_a_node_under_pressure_takes_no_pod_and_counts_for_no_share(condition: str, status: str, takes: bool) -> None:
    """KAI's CheckNodeConditionPredicate: Ready, and no pressure condition other than False. Kubernetes taints such a
    node too, but a pod that tolerates every taint (``operator: Exists``) went there, and its GPUs counted for the
    queues' shares."""
    tired = node("tired", gpus=8)
    tired["status"]["conditions"].append({"type": condition, "status": status})
    objs = [tired, node("fine", gpus=4), queue("q"), pod("busy", gpus=6, queue="q", node_name="tired"),
            pod("anywhere", gpus=1, queue="q", tolerations=[{"operator": "Exists"}])]
    cfg = SchedulerConfig()
    for snap in snapshots(objs, cfg):
        assert snap.capacity()[GPU] == (12000 if takes else 4000)
        assert where(run_cycle(snap, cfg)) == {"anywhere": "tired" if takes else "fine"}  # (binpack: the fuller)
