"""GPU sharing without a cluster: the device handoff as data, the snapshot's view of reservation pods, NVML (a
fake module: 0, 1 and 2 devices, process lists), the reservation agent's checks, the node agent's measuring (fake
``/proc``), the webhook's answers and certificates."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from kaid.api.config import GpuSharingConfig, SchedulerConfig, load_config
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.sharing import handoff
from kaid.sharing.node_agent import OverShare, measure, pod_uid_from_cgroup, pod_uid_of, share_bytes
from kaid.sharing.nvml import Nvml, NvmlError
from kaid.sharing.reservation_agent import ReservationError, only_gpu_uuid
from kaid.webhook import admission, certs
from tests.fake_nvml import (
    GIB,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    FakeGpu,
    FakeNvml,
    cgroupfs_cgroup,
    fake_proc,
    systemd_cgroup,
)
from tests.objects import node, pod, queue

Obj = dict[str, Any]
CFG = GpuSharingConfig()
UID_A = "0b6c2a8e-3f1d-4c7e-9a5b-1d2e3f4a5b6c"
UID_B = "7f6e5d4c-3b2a-4190-8a7b-6c5d4e3f2a1b"


def shared(name: str, fraction: str = "0.5", **kw: Any) -> Obj:
    annotations = {"gpu-fraction": fraction, **kw.pop("annotations", {})}
    return pod(name, annotations=annotations, cpu="100m", memory="100Mi", **kw)


def mutated(name: str, **kw: Any) -> Obj:
    out = handoff.mutate(shared(name, **kw), CFG, "kai-scheduler", random.Random(1))
    assert out is not None
    return out


# --------------------------------------------------------------------------------------------- reservation pods
def test_reservation_pod_name_is_one_per_node_and_group() -> None:
    name = handoff.reservation_pod_name("node-a", "g1")
    assert name == "gpu-reservation-" + hashlib.sha256(b"node-a/g1").hexdigest()[:16]  # KAI's newer releases' name
    assert name == handoff.reservation_pod_name("node-a", "g1")
    assert len({name, handoff.reservation_pod_name("node-b", "g1"), handoff.reservation_pod_name("node-a", "g2")}) == 3


def test_reservation_pod_holds_one_gpu_on_its_node_with_the_pods_tolerations() -> None:
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    fraction = shared("f", tolerations=[toleration])
    cfg = GpuSharingConfig(reservationRuntimeClassName="nvidia", reservationImage="registry.example/kaid:9")
    res = handoff.reservation_pod("node-a", "g1", fraction, cfg)
    assert res["metadata"]["namespace"] == "kai-resource-reservation"
    assert res["metadata"]["labels"] == {"app": "kai-resource-reservation", "runai-gpu-group": "g1"}
    assert res["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    spec = res["spec"]
    assert spec["nodeName"] == "node-a" and spec["tolerations"] == [toleration]
    assert spec["runtimeClassName"] == "nvidia" and spec["serviceAccountName"] == "kai-resource-reservation"
    (ctr,) = spec["containers"]
    assert ctr["image"] == "registry.example/kaid:9" and ctr["args"] == ["gpu-reservation"]
    assert ctr["resources"]["limits"]["nvidia.com/gpu"] == ctr["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert {e["name"] for e in ctr["env"]} == {"POD_NAME", "POD_NAMESPACE"}
    assert "runtimeClassName" not in handoff.reservation_pod("n", "g", fraction, CFG)["spec"]
    assert handoff.reserved_uuid(res) is None
    res["metadata"]["annotations"]["run.ai/reserve_for_gpu_index"] = "GPU-1"
    assert handoff.reserved_uuid(res) == "GPU-1"


def test_a_failed_reservation_says_why_without_waiting_for_the_timeout() -> None:
    res = handoff.reservation_pod("n", "g", shared("x"), CFG)
    assert handoff.reservation_failure(res) is None
    res["status"] = {"phase": "Running", "containerStatuses": [{"name": "resource-reservation", "lastState": {
        "terminated": {"exitCode": 1, "message": "log line\nerror: NVML nvmlInit failed: NVML Shared Library Not "
                       "Found (libnvidia-ml.so is not in the container: ...)\n"}}}]}
    assert handoff.reservation_failure(res) == \
        "its process exited with 1: error: NVML nvmlInit failed: NVML Shared Library Not Found " \
        "(libnvidia-ml.so is not in the container: ...)"
    res["status"] = {"phase": "Failed", "reason": "UnexpectedAdmissionError",
                     "message": "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu"}
    assert handoff.reservation_failure(res) == \
        "UnexpectedAdmissionError: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu"
    res["status"] = {"phase": "Running", "containerStatuses": [{"state": {"terminated": {"exitCode": 0}}}]}
    assert handoff.reservation_failure(res) is None


def test_idle_reservations_go_once_their_group_is_unused() -> None:
    def res(group: str, created: str = "2026-01-01T00:00:00Z") -> Obj:
        obj = handoff.reservation_pod("n", group, shared("x"), CFG)
        obj["kind"] = "Pod"
        obj["metadata"]["creationTimestamp"] = created
        obj["metadata"]["uid"] = f"uid-{group}"
        return obj

    now = dt.datetime(2026, 1, 1, 0, 0, 10, tzinfo=dt.UTC).timestamp()
    running = pod("a", node_name="n", labels={"runai-gpu-group": "used"})
    pending = pod("b", labels={"runai-gpu-group": "labelled"})
    done = pod("c", node_name="n", phase="Succeeded", labels={"runai-gpu-group": "finished"})
    objs = [res("used"), res("labelled"), res("finished"), res("busy"), res("fresh"),
            res("old", "2025-12-31T23:00:00Z"), running, pending, done]
    found = handoff.idle_reservations(objs, CFG, busy={"busy"}, used_before={"finished"}, now=now)
    assert sorted(handoff.reservation_group(o) for o in found.pods) == ["finished", "old"]
    assert found.used == {"used", "labelled", "busy"}
    skipped = handoff.idle_reservations(objs, CFG, set(), {"finished"}, now, skip={"uid-finished"})
    assert [handoff.reservation_group(o) for o in skipped.pods] == ["old"]


# --------------------------------------------------------------------------------------------- the pod's side
def test_mutate_wires_the_fraction_container_to_its_configmaps_the_kai_way() -> None:
    original = shared("server", containers=[{"name": "main", "env": [{"name": "GPU_PORTION", "value": "1"}]},
                                            {"name": "sidecar"}])
    original["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "vllm-large-5d9f7c8b6"}]
    out = handoff.mutate(original, GpuSharingConfig(runtimeClassName="nvidia"), "kai-scheduler", random.Random(7))
    assert out is not None and original["spec"]["containers"][0]["env"] == [{"name": "GPU_PORTION", "value": "1"}]
    prefix = out["metadata"]["annotations"]["runai/shared-gpu-configmap"]
    assert re.fullmatch(r"vllm-large-5d9f7c8b6-[bcdfghjklmnpqrstvwxz2456789]{7}-shared-gpu", prefix), prefix
    main, sidecar = out["spec"]["containers"]
    refs = {e["name"]: e["valueFrom"]["configMapKeyRef"] for e in main["env"]}
    assert refs == {k: {"name": f"{prefix}-0", "key": k} for k in ("NVIDIA_VISIBLE_DEVICES", "RUNAI_NUM_OF_GPUS",
                                                                     "GPU_PORTION")}
    assert main["envFrom"] == [{"configMapRef": {"name": f"{prefix}-0-evar"}}]
    assert "env" not in sidecar
    assert out["spec"]["volumes"] == [{"name": f"{prefix}-0-vol", "configMap": {"name": f"{prefix}-0"}}]
    assert out["spec"]["runtimeClassName"] == "nvidia"
    assert handoff.configmap_names(out) == (f"{prefix}-0", f"{prefix}-0-evar")
    again = handoff.mutate(out, GpuSharingConfig(runtimeClassName="nvidia"), "kai-scheduler")
    assert again == out  # admitted twice (a re-invocation, a pod KAI set up): nothing changes


def test_mutate_names_fit_and_an_init_container_can_take_the_gpu() -> None:
    long_name = "x" * 60
    out = handoff.mutate(shared(long_name, annotations={"gpu-fraction-container-name": "warm"},
                                initContainers=[{"name": "warm"}]), CFG, "kai-scheduler", random.Random(3))
    assert out is not None
    cap, env = handoff.configmap_names(out)
    assert cap.endswith("-shared-gpu-i0") and len(f"{cap}-vol") <= 63 and len(env) <= 63
    assert out["spec"]["initContainers"][0]["envFrom"] == [{"configMapRef": {"name": env}}]
    assert handoff.mutate(shared("p", scheduler="default-scheduler"), CFG, "kai-scheduler") is None
    assert handoff.mutate(pod("whole", gpus=1), CFG, "kai-scheduler") is None
    with pytest.raises(handoff.HandoffError, match="names no container of the pod"):
        handoff.mutate(shared("p", annotations={"gpu-fraction-container-name": "nope"}), CFG, "kai-scheduler")


def test_configmaps_carry_the_uuid_and_portion_where_the_container_reads_them() -> None:
    p = mutated("p")
    p["metadata"]["uid"] = UID_A
    cap, env = handoff.configmaps(p, ["GPU-aaa"], 700, cdi=False)
    assert cap["data"] == {"GPU_PORTION": "0.70", "RUNAI_NUM_OF_GPUS": "0.70", "NVIDIA_VISIBLE_DEVICES": "GPU-aaa"}
    assert env["data"] == {}
    assert cap["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": UID_A}]
    cap, _ = handoff.configmaps(p, ["GPU-a", "GPU-b"], 250, cdi=True)
    assert cap["data"]["NVIDIA_VISIBLE_DEVICES"] == \
        "k8s.device-plugin.nvidia.com/gpu=GPU-a,k8s.device-plugin.nvidia.com/gpu=GPU-b"
    # a container whose env does not read NVIDIA_VISIBLE_DEVICES from the ConfigMap reads it through envFrom
    plain = shared("q", annotations={"runai/shared-gpu-configmap": "q-abc-shared-gpu"})
    cap, env = handoff.configmaps(plain, ["GPU-x"], 333, cdi=False)
    assert "NVIDIA_VISIBLE_DEVICES" not in cap["data"] and env["data"] == {"NVIDIA_VISIBLE_DEVICES": "GPU-x"}
    assert cap["data"]["GPU_PORTION"] == "0.34"  # rounded up, as KAI writes it
    assert [handoff.portion(m) for m in (1000, 500, 201, 1)] == ["1.00", "0.50", "0.21", "0.01"]
    old = {"data": {"RUNAI-VISIBLE-DEVICES": "GPU-old", "OTHER": "kept", "GPU_PORTION": "0.10"}}
    merged = handoff.merged_configmap(old, {"metadata": {"ownerReferences": ["me"]}, "data": {
        "NVIDIA_VISIBLE_DEVICES": "GPU-new", "GPU_PORTION": "0.50"}})
    assert merged["data"] == {"RUNAI-VISIBLE-DEVICES": "GPU-new", "OTHER": "kept", "GPU_PORTION": "0.50",
                              "NVIDIA_VISIBLE_DEVICES": "GPU-new"}


def test_a_pod_admission_did_not_set_up_gets_a_reason_with_the_fix() -> None:
    why = handoff.not_set_up(shared("raw"))
    assert why is not None and "kaid webhook" in why and "recreate the pod" in why
    assert handoff.not_set_up(mutated("ok")) is None


def test_labels_tie_a_pod_to_its_groups_and_come_off_on_rollback() -> None:
    assert handoff.bind_patch(["g1"], [3], "pg-x")["metadata"]["labels"] == {"runai-gpu-group": "g1"}
    two = handoff.bind_patch(["g1", "g2"], [0, 1], "pg-x")["metadata"]
    assert two["labels"] == {"runai-gpu-group/g1": "g1", "runai-gpu-group/g2": "g2"}
    assert two["annotations"]["received-resource-type"] == "Fraction"
    assert two["annotations"]["kai.scheduler/gpu-devices"] == "0,1"
    assert two["annotations"]["kai.scheduler/pod-group"] == "pg-x"
    assert handoff.rollback_patch(["g1", "g2"])["metadata"]["labels"] == \
        {"runai-gpu-group/g1": None, "runai-gpu-group/g2": None}
    assert handoff.groups_of({"metadata": {"labels": two["labels"]}}) == ["g1", "g2"]


# --------------------------------------------------------------------------------------------- the snapshot
def _reservation(group: str, node_name: str = "n") -> Obj:
    obj = handoff.reservation_pod(node_name, group, shared("x"), CFG)
    obj["kind"] = "Pod"
    obj["status"] = {"phase": "Running"}
    return obj


def test_a_reservation_pod_counts_for_nothing_but_its_node_slot() -> None:
    objs = [node("n", gpus=2), queue("q"), _reservation("g"),
            shared("a", "0.7", queue="q", node_name="n", labels={"runai-gpu-group": "g"}),
            shared("b", "0.2", queue="q", node_name="n", labels={"runai-gpu-group": "g"})]
    snap = build_snapshot(objs, SchedulerConfig(), 0.0)
    n = snap.node_by_name["n"]
    assert sorted(n.dev_used) == [0, 900] and n.idle == 1 and n.used_pods == 3
    assert snap.queues["q"].allocated[0] == 900  # milli-GPU: the reservation pod's GPU is not the queue's
    assert not any(p.namespace == "kai-resource-reservation" for p in snap.pods)


def test_an_orphan_reservation_holds_its_device_unless_its_pod_waits_for_it() -> None:
    orphan = build_snapshot([node("n", gpus=2), queue("q"), _reservation("gone")], SchedulerConfig(), 0.0)
    assert orphan.node_by_name["n"].idle == 1
    waiting = shared("w", queue="q")
    waiting["metadata"]["uid"] = UID_B
    snap = build_snapshot([node("n", gpus=2), queue("q"), _reservation(UID_B), waiting], SchedulerConfig(), 0.0)
    assert snap.node_by_name["n"].idle == 2


def test_a_new_group_is_named_after_its_first_pod_and_binds_carry_every_group() -> None:
    one, two = shared("one", "0.7", queue="q"), shared("two", "0.5", queue="q",
                                                       annotations={"gpu-fraction-num-devices": "2"})
    one["metadata"]["uid"], two["metadata"]["uid"] = UID_A, UID_B
    decisions = run_cycle(build_snapshot([node("n", gpus=4), queue("q"), one, two], SchedulerConfig(), 0.0),
                          SchedulerConfig())
    groups = {b.pod: b.gpu_groups for b in decisions.binds}
    assert groups["default/one"] == (UID_A,)
    assert sorted(groups["default/two"]) == [f"{UID_B}-0", f"{UID_B}-1"]


# --------------------------------------------------------------------------------------------- NVML
def test_nvml_reads_gpus_uuids_memory_and_processes() -> None:
    fake = FakeNvml([FakeGpu("GPU-0", processes={10: 2 * GIB, 11: None}, graphics={10: GIB}),
                     FakeGpu("GPU-1", total=40 * GIB)])
    with Nvml(fake) as nvml:
        gpus = nvml.gpus()
        assert nvml.count() == 2 and nvml.uuid(1) == "GPU-1"
    assert fake.calls["nvmlShutdown"] == 1
    assert [(g.index, g.uuid, g.memory_total // GIB) for g in gpus] == [(0, "GPU-0", 80), (1, "GPU-1", 40)]
    assert {p.pid: p.used_bytes for p in gpus[0].processes} == {10: 3 * GIB, 11: None}
    assert gpus[1].processes == ()


def test_nvml_failures_are_one_line_that_says_what_to_check() -> None:
    with pytest.raises(NvmlError, match=r"libnvidia-ml\.so is not in the container"):
        Nvml(FakeNvml(None, fail=NVML_ERROR_LIBRARY_NOT_FOUND))


@pytest.mark.parametrize(("gpus", "wanted"), [
    ([], "shows no GPU"),
    ([FakeGpu("GPU-only")], "GPU-only"),
    ([FakeGpu("GPU-a"), FakeGpu("GPU-b")], "shows 2 GPUs"),
])
def test_the_reservation_agent_wants_exactly_one_gpu(gpus: list[FakeGpu], wanted: str) -> None:
    with Nvml(FakeNvml(gpus)) as nvml:
        if len(gpus) == 1:
            assert only_gpu_uuid(nvml) == wanted
        else:
            with pytest.raises(ReservationError, match=wanted):
                only_gpu_uuid(nvml)


# --------------------------------------------------------------------------------------------- the node agent
def test_a_process_is_mapped_to_its_pod_through_its_cgroup(tmp_path: Path) -> None:
    assert pod_uid_from_cgroup(systemd_cgroup(UID_A)) == UID_A
    assert pod_uid_from_cgroup(cgroupfs_cgroup(UID_B)) == UID_B
    assert pod_uid_from_cgroup("0::/system.slice/containerd.service\n") is None
    proc = fake_proc(tmp_path, {10: systemd_cgroup(UID_A), 11: "0::/user.slice\n"})
    assert pod_uid_of(10, proc) == UID_A and pod_uid_of(11, proc) is None and pod_uid_of(12, proc) is None


def test_memory_is_summed_per_pod_and_gpu_against_each_pods_share(tmp_path: Path) -> None:
    frac = shared("frac", "0.25", node_name="n")
    mem = pod("mem", node_name="n", annotations={"gpu-memory": "10240"})
    whole = pod("whole", gpus=1, node_name="n")
    for p, uid in ((frac, UID_A), (mem, UID_B), (whole, "11111111-2222-3333-4444-555555555555")):
        p["metadata"]["uid"] = uid
    pods = {p["metadata"]["uid"]: p for p in (frac, mem, whole)}
    proc = fake_proc(tmp_path, {1: systemd_cgroup(UID_A), 2: systemd_cgroup(UID_A), 3: cgroupfs_cgroup(UID_B),
                                4: systemd_cgroup("11111111-2222-3333-4444-555555555555"), 5: "0::/\n"})
    fake = FakeNvml([FakeGpu("GPU-0", processes={1: 15 * GIB, 2: 10 * GIB, 3: 4 * GIB, 5: GIB}),
                     FakeGpu("GPU-1", processes={4: 70 * GIB})])
    with Nvml(fake) as nvml:
        gpus = nvml.gpus()
    uids = {p.pid: pod_uid_of(p.pid, proc) for g in gpus for p in g.processes}
    got = {(u.pod, u.gpu): (u.used // GIB, None if u.share is None else u.share / GIB)
           for u in measure(gpus, pods, uids)}
    assert got == {("frac", "GPU-0"): (25, 20.0), ("mem", "GPU-0"): (4, 10.0), ("", "GPU-0"): (1, None),
                   ("whole", "GPU-1"): (70, None)}
    over = {u.pod for u in measure(gpus, pods, uids) if u.over(256 << 20)}
    assert over == {"frac"}
    assert share_bytes(shared("bad", "x"), 80 * GIB) is None


def test_over_share_is_reported_once_and_evicted_after_the_grace() -> None:
    tracker = OverShare()
    usage = measure([], {}, {})  # no usage at all
    assert tracker.update(usage, 0, 0.0) == ([], [])
    over = handoff_usage(used=30, share=20)
    started, ended = tracker.update([over], 0, 100.0)
    assert started == [over] and ended == []
    assert tracker.update([over], 0, 110.0) == ([], [])  # still over: said once
    assert tracker.to_evict(60.0, 150.0) == []
    assert tracker.to_evict(60.0, 160.0) == [UID_A]
    assert tracker.to_evict(60.0, 170.0) == []  # once
    assert tracker.update([handoff_usage(used=10, share=20)], 0, 180.0) == ([], [UID_A])


def handoff_usage(used: int, share: int) -> Any:
    from kaid.sharing.node_agent import Usage

    return Usage("ns", "frac", UID_A, "GPU-0", used * GIB, share * GIB)


# --------------------------------------------------------------------------------------------- the webhook
def _review(obj: Obj, operation: str = "CREATE") -> Obj:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "r1", "operation": operation, "namespace": "team", "object": obj}}


def _patched(obj: Obj, patch: list[Obj]) -> Obj:
    out: Obj = json.loads(json.dumps(obj))
    for op in patch:
        parent, key = op["path"].strip("/").split("/")
        out.setdefault(parent, {})[key] = op["value"]
    return out


def test_webhook_mutation_is_a_json_patch_of_what_mutate_does() -> None:
    cfg = SchedulerConfig()
    raw = shared("p")
    answer = admission.review("/mutate-pod", _review(raw), cfg, lambda: [], random.Random(5))
    response = answer["response"]
    assert answer["kind"] == "AdmissionReview" and response["allowed"] and response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert _patched(raw, patch) == handoff.mutate(raw, cfg.gpuSharing, cfg.schedulerName, random.Random(5))
    other = admission.review("/mutate-pod", _review(shared("o", scheduler="other")), cfg, lambda: [])
    assert other["response"] == {"uid": "r1", "allowed": True}


def test_webhook_refuses_bad_gpu_annotations_saying_the_fix() -> None:
    cfg = SchedulerConfig()

    def refused(obj: Obj) -> str:
        response = admission.review("/validate-pod", _review(obj), cfg, lambda: [])["response"]
        assert not response["allowed"]
        return str(response["status"]["message"])

    assert "must be a number between 0 and 1" in refused(shared("p", "1.5"))
    assert "request nvidia.com/gpu instead" in refused(shared("p", "1.5"))
    assert "positive whole number of MiB" in refused(pod("m", annotations={"gpu-memory": "-3"}))
    assert "whole number of devices" in refused(shared("d", annotations={"gpu-fraction-num-devices": "0"}))
    assert "keep one of the two" in refused(shared("both", gpus=1))
    fine = admission.review("/validate-pod", _review(shared("ok")), cfg, lambda: [])["response"]
    assert fine["allowed"]


def test_webhook_refuses_a_queue_cycle_a_missing_parent_and_a_limit_below_quota() -> None:
    existing = [queue("a"), queue("b", parent="a")]

    def answer(obj: Obj) -> Obj:
        response: Obj = admission.review("/validate-queue", _review(obj, "UPDATE"), SchedulerConfig(),
                                         lambda: existing)["response"]
        return response

    cycle = answer(queue("a", parent="b"))
    assert not cycle["allowed"] and "point one of them at a parent outside the cycle" in cycle["status"]["message"]
    orphan = answer(queue("c", parent="nowhere"))
    assert "which does not exist: create it" in orphan["status"]["message"]
    low = answer(queue("d", gpu=(4, 2, 1)))
    assert "raise the limit to at least the quota" in low["status"]["message"]
    assert answer(queue("e", parent="b"))["allowed"]


def test_webhook_refuses_a_podgroup_below_one_member() -> None:
    group: Obj = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "g"},
                  "spec": {"minMember": 0, "queue": "q"}}
    response = admission.review("/validate-podgroup", _review(group), SchedulerConfig(), lambda: [])["response"]
    assert not response["allowed"] and "must be at least 1" in response["status"]["message"]
    group["spec"]["minMember"] = 2
    assert admission.review("/validate-podgroup", _review(group), SchedulerConfig(), lambda: [])["response"]["allowed"]


def test_webhook_certificates_chain_to_the_ca_and_rotate_in_time() -> None:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    ca = certs.new_authority(365, now)
    hosts = certs.service_hosts("kai-webhook", "kai-scheduler", ["127.0.0.1"])
    cert, _ = certs.serving_certificate(ca, hosts, 168, now)
    parsed = x509.load_pem_x509_certificate(cert)
    names = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "kai-webhook.kai-scheduler.svc" in names.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert certs.signed_by(cert, ca) and not certs.signed_by(cert, certs.new_authority(365, now))
    assert not certs.due(cert, certs.SERVING_RENEW_LEFT, now + dt.timedelta(hours=100))
    assert certs.due(cert, certs.SERVING_RENEW_LEFT, now + dt.timedelta(hours=120))
    rotated = certs.new_authority(365, now, previous=ca.cert)
    assert rotated.bundle == rotated.cert + ca.cert
    assert certs.Authority.from_secret({"data": rotated.secret_data()}) == rotated
    with pytest.raises(ValueError, match=r"has no ca\.crt"):
        certs.Authority.from_secret({"data": {}})


def test_config_fields_of_gpu_sharing_are_validated_by_name(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("gpuSharing: {reservationTimeoutSeconds: 0}\n")
    with pytest.raises(ValueError, match=r"gpuSharing\.reservationTimeoutSeconds"):
        load_config(bad)
    bad.write_text("webhook: {port: 70000}\nnodeAgent: {periodSeconds: 0.1}\n")
    with pytest.raises(ValueError, match=r"webhook\.port.*nodeAgent\.periodSeconds|nodeAgent.*webhook"):
        load_config(bad)
    bad.write_text("gpuSharing: {reservationNamespce: x}\n")
    with pytest.raises(ValueError, match=r"did you mean gpuSharing\.reservationNamespace"):
        load_config(bad)
