"""A pod's PersistentVolumeClaims before it is bound (``kaid.kube.volumes``): a claim of a WaitForFirstConsumer class
is told the node (``volume.kubernetes.io/selected-node``), as kube-scheduler's VolumeBinding plugin tells it, so
that its volume is provisioned there; kaid bound such pods without it, and they waited for their volume for ever."""

from __future__ import annotations

from typing import Any

from kaid.api.config import SchedulerConfig
from kaid.cycle import Bind, run_cycle
from kaid.kube.actuator import Actuator
from kaid.kube.client import ApiError
from kaid.kube.strip import slim_pod
from kaid.kube.volumes import SELECTED_NODE, Claims, claim_path
from kaid.model.build import build_snapshot
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


def _claiming(name: str, volumes: list[Any]) -> Obj:
    obj = pod(name, gpus=1)
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
