"""Malformed kai objects, generated with hypothesis, for the fault test that applies thousands of them to a live
cluster (test_faults.py::test_malformed_objects_while_scheduling): Queues, PodGroups, pods with bad GPU-sharing
annotations or labels, PriorityClasses and Topologies. Every name is unique (a counter), so that the API server
takes what its schema accepts; what its validation rejects is counted, not retried.

Each generated object carries the label ``MALFORMED_LABEL`` with the run's id, so the test can find and delete
them all afterwards."""

from __future__ import annotations

import itertools
import string
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hyp_seed
from hypothesis import strategies as st

from .kaid_helpers import POOL_LABEL, QUEUE_LABEL, SCHEDULER, Obj

MALFORMED_LABEL = "kai-e2e.test/malformed"

_LABEL_VALUE = st.text(string.ascii_letters + string.digits + "-_.", min_size=1, max_size=20).filter(
    lambda s: s[0].isalnum() and s[-1].isalnum())
_GARBAGE = st.one_of(st.text(max_size=30), st.sampled_from(["", "-1", "0", "1.5", "nan", "inf", "1e400", "0x10",
                                                             "½", "0.0000001", " 0.5", "-0.5", "abc", "1Gi", "-3h"]))
_NUMBER = st.one_of(st.integers(-(2**40), 2**40), st.floats(-1e12, 1e12, allow_nan=False),
                    st.sampled_from([-1, 0, -2, -1.5, 1e15]))


def _resource() -> st.SearchStrategy[Obj]:
    return st.fixed_dictionaries({}, optional={
        "quota": _NUMBER, "limit": _NUMBER,
        "overQuotaWeight": st.one_of(_NUMBER, st.sampled_from([0, -1])),
    })


class Generator:
    """Makes the objects, numbering their names from one counter."""

    def __init__(self, run: str, pool: str, good_queue: str) -> None:
        self.run = run
        self.pool = pool
        self.good_queue = good_queue
        self.count = itertools.count()
        self.queues: list[str] = []
        self.podgroups: list[str] = []
        self.topologies: list[str] = []

    @staticmethod
    def ref(names: list[str], default: str) -> st.SearchStrategy[str]:
        """One of ``names`` (which grows as objects are made), drawn the same way whatever its length, as
        hypothesis wants."""
        return st.integers(0, 2**20).map(lambda i: names[i % len(names)] if names else default)

    def name(self, kind: str) -> str:
        return f"mf-{self.run}-{kind}-{next(self.count)}"

    def meta(self, kind: str) -> Obj:
        return {"name": self.name(kind), "labels": {MALFORMED_LABEL: self.run}}

    # -- one strategy per kind ------------------------------------------------------------------

    def queue(self, draw: Any) -> Obj:
        meta = self.meta("q")
        name = meta["name"]
        spec: Obj = {}
        parent = draw(st.one_of(st.none(), st.just(name), st.just("no-such-parent"),
                                self.ref(self.queues, "no-such-parent"), _LABEL_VALUE))
        if parent is not None:
            spec["parentQueue"] = parent
        if draw(st.booleans()):
            spec["priority"] = draw(st.one_of(st.integers(-(2**31), 2**31), st.just("high")))
        resources = draw(st.fixed_dictionaries({}, optional={"gpu": _resource(), "cpu": _resource(),
                                                              "memory": _resource(), "bogus": _resource()}))
        if resources or draw(st.booleans()):
            spec["resources"] = resources
        for field in ("preemptMinRuntime", "reclaimMinRuntime"):
            if draw(st.booleans()):
                spec[field] = draw(_GARBAGE)
        self.queues.append(name)
        return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": meta, "spec": spec}

    def podgroup(self, draw: Any) -> Obj:
        meta = self.meta("pg")
        spec: Obj = {}
        spec["minMember"] = draw(st.one_of(st.integers(-3, 5), st.integers(1000, 10**9), st.just("two")))
        spec["queue"] = draw(st.one_of(st.just("no-such-queue"), self.ref(self.queues, "default"),
                                       st.just(""), _GARBAGE))
        if draw(st.booleans()):
            spec["priorityClassName"] = draw(st.one_of(_LABEL_VALUE, st.just("no-such-class")))
        if draw(st.booleans()):
            spec["preemptibility"] = draw(st.sampled_from(["preemptible", "non-preemptible", "sometimes", ""]))
        if draw(st.booleans()):
            names = draw(st.lists(st.sampled_from(["a", "b", "c", ""]), max_size=4))
            spec["subGroups"] = [{"name": n, "minMember": draw(st.integers(-1, 6)),
                                  "parent": draw(st.one_of(st.none(), st.sampled_from(["a", "b", "z", n])))}
                                 for n in names]
            if draw(st.booleans()):
                spec["minSubGroup"] = draw(st.integers(-1, 5))
        if draw(st.booleans()):
            spec["topologyConstraint"] = draw(st.fixed_dictionaries({}, optional={
                "topology": st.one_of(self.ref(self.topologies, "none"), _GARBAGE),
                "requiredTopologyLevel": _GARBAGE, "preferredTopologyLevel": _GARBAGE}))
        if draw(st.booleans()):
            spec["stalenessGracePeriod"] = draw(_GARBAGE)
        self.podgroups.append(meta["name"])
        return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": meta, "spec": spec}

    def pod(self, draw: Any) -> Obj:
        meta = self.meta("pod")
        annotations: dict[str, str] = draw(st.fixed_dictionaries({}, optional={
            "gpu-fraction": _GARBAGE, "gpu-memory": _GARBAGE, "gpu-fraction-num-devices": _GARBAGE,
            "pod-group-name": st.one_of(self.ref(self.podgroups, "no-such-pg"), st.just("no-such-pg")),
            "kai.scheduler/topology": _GARBAGE, "kai.scheduler/topology-required-placement": _GARBAGE}))
        labels = dict(meta["labels"])
        labels[QUEUE_LABEL] = draw(st.one_of(self.ref(self.queues, "default"), _LABEL_VALUE,
                                             st.just(self.good_queue)))
        if draw(st.booleans()):
            labels["priorityClassName"] = draw(_LABEL_VALUE)
        if draw(st.booleans()):
            labels["kai.scheduler/preemptibility"] = draw(_LABEL_VALUE)
        meta.update(labels=labels, annotations=annotations)
        container: Obj = {"name": "main", "image": "registry.example/kai/fake:1"}
        gpus = draw(st.one_of(st.none(), st.integers(0, 3), st.just(100)))
        if gpus is not None:
            container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
            "schedulerName": SCHEDULER, "nodeSelector": {POOL_LABEL: self.pool}, "terminationGracePeriodSeconds": 0,
            "containers": [container]}}

    def priority_class(self, draw: Any) -> Obj:
        meta = self.meta("pc")
        obj: Obj = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": meta,
                    "value": draw(st.one_of(st.integers(-(2**31), 2**31 - 1), st.just(10**9 + 1), st.just("x")))}
        if draw(st.booleans()):
            obj["preemptionPolicy"] = draw(st.sampled_from(["Never", "PreemptLowerPriority", "Sometimes"]))
        if draw(st.booleans()):
            obj["description"] = draw(st.text(max_size=50))
        return obj

    def topology(self, draw: Any) -> Obj:
        meta = self.meta("topo")
        levels = draw(st.lists(st.fixed_dictionaries({"nodeLabel": st.one_of(
            _GARBAGE, st.sampled_from(["kubernetes.io/hostname", "topology.kubernetes.io/zone", "bad label!",
                                       "a/b/c", "-x"]))}), max_size=4))
        self.topologies.append(meta["name"])
        return {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": meta,
                "spec": {"levels": levels}}

    def batch(self, counts: dict[str, int], seed: int) -> list[Obj]:
        """``counts[kind]`` objects of each kind (``priority_class``, ``topology``, ``queue``, ``podgroup``,
        ``pod``; made in that order, so later kinds can name earlier ones), ten per hypothesis example, drawn
        from ``seed``."""
        out: list[Obj] = []
        for kind, n in counts.items():
            out.extend(self._draw(getattr(self, kind), n, seed)[:n])
        return out

    @staticmethod
    def _draw(make: Any, n: int, seed: int, per_example: int = 10) -> list[Obj]:
        out: list[Obj] = []

        @hyp_seed(seed)
        @settings(max_examples=-(-n // per_example), database=None, phases=[Phase.generate], deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(st.data())
        def draw_one(data: st.DataObject) -> None:
            out.extend(make(data.draw) for _ in range(per_example))

        draw_one()
        return out
