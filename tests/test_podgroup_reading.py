"""A PodGroup's spec is read once per spec as written (``kaid.model.jobs._read_spec``): every PodGroup reads what a
fresh validation of its own spec says, whatever was read before it, valid or not."""

from __future__ import annotations

import random
from typing import Any

from pydantic import ValidationError

from kaid.api.crds import PodGroupSpec, validation_message
from kaid.api.duration import parse_duration
from kaid.model.jobs import read_podgroup
from kaid.model.objects import Job

_VALUES: dict[str, list[Any]] = {
    "minMember": [1, 2, 8, 1.0, True, "3", -1, 2.5, None],
    "queue": ["team-a", "team-b", "", 1, None],
    "priorityClassName": ["train", "inference", None, 7],
    "preemptibility": ["preemptible", "non-preemptible", "sometimes", None],
    "minSubGroup": [None, 1, -2],
    "subGroups": [[], [{"name": "a", "minMember": 2}, {"name": "b", "parent": "a"}],
                  [{"name": "a"}, {"name": "a"}], [{"name": "x", "parent": "y"}, {"name": "y", "parent": "x"}]],
    "topologyConstraint": [None, {"topology": "racks", "requiredTopologyLevel": "rack"},
                           {"topology": "racks", "preferredTopologyLevel": "zone"}, {"topology": 3}],
    "stalenessGracePeriod": [None, "30s", "-1s", "5m", "soon"],
}


def _spec(rng: random.Random) -> Any:
    if rng.random() < 0.03:
        return rng.choice([None, [], "minMember: 2"])
    return {k: rng.choice(v) for k, v in _VALUES.items() if rng.random() < 0.5}


def _seen(job: Job) -> tuple[Any, ...]:
    return (job.min_member, job.queue, job.priority_class, job.preemptibility, job.subgroups, job.min_subgroup,
            job.topology, job.required_level, job.preferred_level, job.stale_grace, [r.message for r in job.errors])


def _plain(obj: dict[str, Any]) -> tuple[Any, ...]:
    """The reading of one PodGroup by a fresh validation of its spec."""
    job = Job("ns", obj["metadata"]["name"])
    try:
        spec = PodGroupSpec.model_validate(obj.get("spec") or {})
    except ValidationError as err:  # (its queue as written where it names one: the job waits in it)
        spec_read = obj.get("spec")
        named = spec_read.get("queue") if isinstance(spec_read, dict) else None
        return (1, named if named and isinstance(named, str) else "", "", None, [], None, None, None, None, None,
                [f"PodGroup {job.key} is invalid: {validation_message(err)}"])
    tc = spec.topologyConstraint
    return (spec.minMember, spec.queue or "", spec.priorityClassName or "", spec.preemptibility,
            [s.model_dump() for s in spec.subGroups], spec.minSubGroup,
            tc.topology if tc else None, tc.requiredTopologyLevel if tc else None,
            tc.preferredTopologyLevel if tc else None,
            parse_duration(spec.stalenessGracePeriod) if spec.stalenessGracePeriod is not None else None, [])


def test_each_podgroup_reads_what_its_own_spec_says() -> None:
    rng = random.Random(15)
    objs = [{"kind": "PodGroup", "metadata": {"name": f"pg-{i}", "namespace": "ns"}, "spec": _spec(rng)}
            for i in range(3000)]
    objs += [dict(o, metadata={"name": f"again-{i}", "namespace": "ns"}) for i, o in enumerate(objs[:500])]
    jobs: dict[str, Job] = {}
    invalid = 0
    for obj in objs:
        read_podgroup(obj, jobs)
        job = jobs[f"ns/{obj['metadata']['name']}"]
        expected = _plain(obj)
        invalid += bool(expected[-1])
        assert _seen(job) == expected, obj["spec"]
    assert 300 < invalid < len(objs) - 300  # both kinds, many times over


def test_a_podgroups_subgroups_are_its_own_list() -> None:
    spec = {"minMember": 1, "subGroups": [{"name": "a", "minMember": 1}]}
    jobs: dict[str, Job] = {}
    for name in ("one", "two"):
        read_podgroup({"metadata": {"name": name, "namespace": "ns"}, "spec": dict(spec)}, jobs)
    jobs["ns/one"].subgroups.append({"name": "b"})
    assert [s["name"] for s in jobs["ns/two"].subgroups] == ["a"]
