"""A pod's PersistentVolumeClaims before it is bound (``kaid.kube.volumes``): a claim of a WaitForFirstConsumer class
is told the node (``volume.kubernetes.io/selected-node``), as kube-scheduler's VolumeBinding plugin tells it, so
that its volume is provisioned there; kaid bound such pods without it, and they waited for their volume for ever."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kaid.api.config import SchedulerConfig
from kaid.cycle import Bind, run_cycle
from kaid.kube.actuator import Actuator
from kaid.kube.client import ApiError
from kaid.kube.strip import slim_pod
from kaid.kube.volumes import SELECTED_NODE, Claims, claim_path
from kaid.model.build import build_snapshot
from kaid.model.live import LiveModel
from kaid.model.pods import claims
from tests.objects import node, pod, queue

Obj = dict[str, Any]
VOLUMES = [
    {"name": "data", "persistentVolumeClaim": {"claimName": "shared-data", "readOnly": True}},
    {"name": "config", "configMap": {"name": "c"}},
    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "local"}}}},
    {"name": "bad", "persistentVolumeClaim": {}},
    "not a volume",
]


def _claiming(name: str, volumes: list[Any], **kw: Any) -> Obj:
    obj = pod(name, gpus=1, **kw)
    obj["spec"]["volumes"] = volumes
    return obj


def test_a_pods_claims_are_its_named_ones_and_those_made_for_its_ephemeral_volumes() -> None:
    assert claims(_claiming("p", VOLUMES)) == ("shared-data", "p-scratch")
    assert claims(pod("q")) == () and claims(None) == ()


def test_the_watch_cache_keeps_only_what_names_the_claims() -> None:
    slim = slim_pod(_claiming("p", list(VOLUMES)))
    assert slim["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "shared-data"}},
                                       {"name": "scratch", "ephemeral": {}}]
    assert claims(slim) == ("shared-data", "p-scratch")
    assert "volumes" not in slim_pod(_claiming("q", [{"name": "config", "configMap": {"name": "c"}}]))["spec"]


def test_a_bind_names_the_claims_of_its_pod() -> None:
    cfg = SchedulerConfig()
    objs = [node("n0", gpus=2), queue("default-queue"), _claiming("p", VOLUMES), pod("plain", gpus=1)]
    binds = {b.pod: b.claims for b in run_cycle(build_snapshot(objs, cfg, 0.0), cfg).binds}
    assert binds == {"default/p": ("shared-data", "p-scratch"), "default/plain": ()}


class _Api:
    """The API server's claims and classes, as much as ``Claims`` asks of them; what it was sent."""

    def __init__(self, pvcs: dict[str, Obj], classes: dict[str, str]) -> None:
        self.pvcs = pvcs
        self.classes = classes
        self.gets: list[str] = []
        self.patches: list[tuple[str, Obj]] = []
        self.created: list[str] = []

    def get(self, path: str) -> Obj:
        self.gets.append(path)
        name = path.rsplit("/", 1)[1]
        if "/storageclasses/" in path:
            if name not in self.classes:
                raise ApiError(404, "not found")
            return {"volumeBindingMode": self.classes[name]}
        if name not in self.pvcs:
            raise ApiError(404, "not found")
        return self.pvcs[name]

    def merge_patch(self, path: str, patch: Obj) -> Obj:
        self.patches.append((path, patch))
        return {}

    def create(self, path: str, body: Obj) -> Obj:
        self.created.append(path)
        return {}


def _pvc(klass: str | None, volume: str | None = None, selected: str | None = None) -> Obj:
    spec: Obj = {} if klass is None else {"storageClassName": klass}
    if volume:
        spec["volumeName"] = volume
    return {"metadata": {"annotations": {SELECTED_NODE: selected} if selected else {}}, "spec": spec}


def test_only_an_unbound_claim_of_a_class_that_waits_for_its_first_consumer_is_told_the_node() -> None:
    api = _Api({"late": _pvc("wffc"), "late2": _pvc("wffc"), "bound": _pvc("wffc", volume="pv-1"),
                "now": _pvc("immediate"), "none": _pvc(None), "there": _pvc("wffc", selected="n0"),
                "moved": _pvc("wffc", selected="n9"), "gone-class": _pvc("deleted")},
               {"wffc": "WaitForFirstConsumer", "immediate": "Immediate"})
    names = ("late", "late2", "bound", "now", "none", "there", "moved", "gone-class")
    assert Claims(api).prepare("ns", names, "n0") is None
    told = {"metadata": {"annotations": {SELECTED_NODE: "n0"}}}
    assert api.patches == [(claim_path("ns", n), told) for n in ("late", "late2", "moved")]
    assert sum(1 for p in api.gets if p.endswith("/storageclasses/wffc")) == 1  # (a class's mode is read once)


def test_a_pod_whose_claim_is_missing_is_not_bound_and_says_why() -> None:
    api = _Api({}, {})
    actuator = Actuator(api, workers=1, retry_for=0.0)  # type: ignore[arg-type]
    try:
        b = Bind("ns/p", "n0", "ns/p", "q", (), None, 0, claims=("data",))
        why = actuator._bind_one(b)
    finally:
        actuator.close()
    assert why is not None and "PersistentVolumeClaim ns/data does not exist" in why
    assert api.created == []  # no binding sent


def test_a_pod_with_a_claim_waiting_for_its_first_consumer_is_bound_after_the_claim_is_told() -> None:
    api = _Api({"data": _pvc("wffc")}, {"wffc": "WaitForFirstConsumer"})
    actuator = Actuator(api, workers=1, retry_for=0.0)  # type: ignore[arg-type]
    try:
        assert actuator._bind_one(Bind("ns/p", "n0", "ns/p", "q", (), None, 0, claims=("data",))) is None
    finally:
        actuator.close()
    assert api.patches == [(claim_path("ns", "data"), {"metadata": {"annotations": {SELECTED_NODE: "n0"}}})]
    assert api.created == ["/api/v1/namespaces/ns/pods/p/binding"]


# ------------------------------------------------------------------------------ a bound volume's node affinity
def _volume(name: str, claim: str, terms: list[Obj] | None, phase: str = "Bound") -> Obj:
    spec: Obj = {"claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": claim, "uid": "u"},
                 "storageClassName": "local", "capacity": {"storage": "100Gi"}}
    if terms is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec,
            "status": {"phase": phase}}


def _on(node_name: str) -> list[Obj]:
    return [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}]}]


def _host(name: str, gpus: int = 8) -> Obj:
    n = node(name, gpus=gpus)
    n["metadata"]["labels"]["kubernetes.io/hostname"] = name
    return n


def _snapshots(objs: list[Obj]) -> list[Any]:
    """The cold build's snapshot and the daemon's live model's, of the same objects."""
    model = LiveModel(CFG)
    for obj in copy.deepcopy(objs):
        model.upsert(obj)
    return [build_snapshot(objs, CFG, 0.0), model.snapshot(0.0)]


CFG = SchedulerConfig()


def test_a_pod_goes_where_the_volume_bound_to_its_claim_is() -> None:
    """A StatefulSet's pod whose local volume is on n1: kai's bin packing would put it on n0, the fuller node, where
    it could not attach its volume (kube-scheduler's VolumeBinding filter: volume node affinity conflict)."""
    objs = [_host("n0"), _host("n1"), queue("default-queue"), pod("busy", gpus=6, node_name="n0"),
            _claiming("db-0", [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}]),
            _claiming("free", []), _volume("pv-1", "data-db-0", _on("n1"))]
    for snap in _snapshots(objs):
        binds = {b.pod: b.node for b in run_cycle(snap, CFG).binds}
        assert binds == {"default/db-0": "n1", "default/free": "n0"}, binds


def test_a_pod_whose_volume_node_is_full_waits_and_says_why() -> None:
    objs = [_host("n0"), _host("n1", gpus=1), queue("default-queue"), pod("busy", gpus=1, node_name="n1"),
            _claiming("db-0", [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}]),
            _volume("pv-1", "data-db-0", _on("n1"))]
    for snap in _snapshots(objs):
        d = run_cycle(snap, CFG)
        assert not d.binds
        (why,) = [r.message for r in d.pending["default/pg-pod-db-0"]]
        assert why.startswith("0/2 nodes can take a pod of 1 GPU") and "1 volume node affinity conflict" in why and \
            "1 insufficient GPU" in why, why


@pytest.mark.parametrize("volume", [
    _volume("pv-1", "data-db-0", _on("n1"), phase="Released"),  # its claim gone: bound to nothing
    _volume("pv-1", "data-db-0", None),  # reachable from every node (a network file system)
    _volume("pv-1", "other", _on("n1")),  # another claim's
])
def test_a_volume_that_is_not_bound_to_the_claim_or_has_no_node_affinity_constrains_nothing(volume: Obj) -> None:
    objs = [_host("n0"), _host("n1"), queue("default-queue"), pod("busy", gpus=6, node_name="n0"),
            _claiming("db-0", [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}]), volume]
    for snap in _snapshots(objs):
        assert {b.pod: b.node for b in run_cycle(snap, CFG).binds} == {"default/db-0": "n0"}


def test_the_daemons_model_reads_the_pod_again_when_its_volume_changes() -> None:
    model = LiveModel(CFG)
    for obj in [_host("n0"), _host("n1"), _host("n2"), queue("default-queue"), pod("busy", gpus=6, node_name="n0"),
                _claiming("db-0", [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}])]:
        model.upsert(obj)

    def placed() -> str:
        (bind,) = run_cycle(model.snapshot(0.0), CFG).binds
        return bind.node

    assert placed() == "n0"
    model.upsert(_volume("pv-1", "data-db-0", _on("n2")))  # bound after the pod was read
    assert placed() == "n2"
    model.upsert(_volume("pv-1", "data-db-0", _on("n1")))
    assert placed() == "n1"
    model.delete("PersistentVolume", "/pv-1")
    assert placed() == "n0"


def test_a_snapshot_file_keeps_what_a_volume_says_of_its_claim_and_nodes() -> None:
    from kaid.kube.strip import strip

    claim = strip(_claim("data-db-0", "zonal", "pv-1"))
    assert claim is not None and claim["spec"] == {"storageClassName": "zonal", "volumeName": "pv-1"}
    klass = strip(_class("std", "Immediate", default=True))
    assert klass is not None and klass["volumeBindingMode"] == "Immediate"
    assert klass["metadata"]["annotations"] == {"storageclass.kubernetes.io/is-default-class": "true"}

    kept = strip({**_volume("pv-1", "data-db-0", _on("n1")), "metadata": {"name": "pv-1", "managedFields": [{}]}})
    assert kept is not None and kept["spec"]["claimRef"] == {"namespace": "default", "name": "data-db-0"}
    assert kept["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == _on("n1")
    assert kept["status"] == {"phase": "Bound"} and "managedFields" not in kept["metadata"]


# ------------------------------------------------------------------------- a claim bound as soon as it exists
def _claim(name: str, klass: str | None, volume: str = "") -> Obj:
    spec: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if klass is not None:
        spec["storageClassName"] = klass
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": spec, "status": {"phase": "Bound" if volume else "Pending"}}


def _class(name: str, mode: str | None, default: bool = False) -> Obj:
    obj: Obj = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "provisioner": "example.com/disk",
                "metadata": {"name": name}}
    if mode is not None:
        obj["volumeBindingMode"] = mode
    if default:
        obj["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return obj


def _db(**kw: Any) -> Obj:
    return _claiming("db-0", [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}], **kw)


def test_a_pod_waits_for_a_claim_its_class_binds_at_once_then_goes_where_its_volume_is() -> None:
    """A zonal disk's class that binds at once (the provisioner picks the zone): kube-scheduler waits for the claim
    to be bound, then places the pod where the volume is; kai placed it at once, wherever, and the volume was
    made elsewhere."""
    base = [_host("n0"), _host("n1"), queue("default-queue"), pod("busy", gpus=6, node_name="n0"), _db(),
            _class("zonal", "Immediate")]
    for snap in _snapshots([*base, _claim("data-db-0", "zonal")]):
        d = run_cycle(snap, CFG)
        assert not d.binds
        (why,) = d.pending["default/pg-pod-db-0"]
        assert why.code == "UnboundImmediateClaim" and "(data-db-0)" in why.message, why
    bound = [*base, _claim("data-db-0", "zonal", "pv-1"), _volume("pv-1", "data-db-0", _on("n1"))]
    for snap in _snapshots(bound):
        assert {b.pod: b.node for b in run_cycle(snap, CFG).binds} == {"default/db-0": "n1"}


@pytest.mark.parametrize(("claim", "classes", "waits"), [
    (_claim("data-db-0", "local"), [_class("local", "WaitForFirstConsumer")], False),  # told its node at the bind
    (_claim("data-db-0", None), [_class("std", None, default=True)], True),  # the default class, Immediate by default
    (_claim("data-db-0", None), [_class("std", "WaitForFirstConsumer", default=True)], False),
    (_claim("data-db-0", ""), [], True),  # no class: bound to a volume made by hand
    (_claim("data-db-0", "unknown"), [_class("std", "Immediate")], False),  # a class not known says nothing
])
def test_which_unbound_claims_hold_their_pod_back(claim: Obj, classes: list[Obj], waits: bool) -> None:
    objs = [_host("n0"), queue("default-queue"), _db(), claim, *classes]
    for snap in _snapshots(objs):
        d = run_cycle(snap, CFG)
        assert (not d.binds) is waits, d.pending
        if waits:
            assert d.pending["default/pg-pod-db-0"][0].code == "UnboundImmediateClaim"


def test_a_running_pod_is_not_held_by_its_claim_and_the_live_model_follows_the_claim() -> None:
    objs = [_host("n0"), queue("default-queue"), _class("zonal", "Immediate"), _claim("data-db-0", "zonal"),
            _db(node_name="n0", phase="Running")]
    for snap in _snapshots(objs):
        assert not snap.jobs["default/pg-pod-db-0"].errors
    model = LiveModel(CFG)
    for obj in [_host("n0"), queue("default-queue"), _class("zonal", "Immediate"), _db()]:
        model.upsert(obj)
    assert run_cycle(model.snapshot(0.0), CFG).binds  # (no claim known: nothing to wait for)
    model.upsert(_claim("data-db-0", "zonal"))
    assert not run_cycle(model.snapshot(0.0), CFG).binds
    model.upsert(_claim("data-db-0", "zonal", "pv-1"))
    assert run_cycle(model.snapshot(0.0), CFG).binds
    model.upsert(_class("zonal", "WaitForFirstConsumer"))
    model.upsert(_claim("data-db-0", "zonal"))
    assert run_cycle(model.snapshot(0.0), CFG).binds
