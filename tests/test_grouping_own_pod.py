"""``group_for_pod`` and ``podgrouper_skipped_by`` read a pod without owners (most single pods) without walking its
owner chain: what they say of any pod, owned or not, well formed or not, is what the walk says (``owner_chain``,
``top_owner``, ``min_member_of``)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.api import constants as c
from kaid.api import meta
from kaid.model.grouping import (
    GroupInfo,
    OwnerIndex,
    group_for_pod,
    min_member_of,
    owner_chain,
    podgrouper_skipped_by,
    top_owner,
)

Obj = dict[str, Any]


def _walked_group(pod: Obj, owners: OwnerIndex) -> GroupInfo:
    """``group_for_pod`` by the walk alone, for every pod."""
    labels = meta.labels_of(pod)
    job_id = labels.get(c.JOB_ID_LABEL)
    if job_id:
        size = max(1, meta.as_int(labels.get(c.JOB_SIZE_LABEL), 1))
        return GroupInfo(f"pg-job-id-{job_id}", size, "JobId", str(job_id), None)
    kind, name, owner = top_owner(pod, owners)
    if kind == "Pod":
        return GroupInfo(f"pg-pod-{name}", min_member_of(kind, None, pod), kind, name, pod)
    return GroupInfo(f"pg-{kind.lower()}-{name}", min_member_of(kind, owner, pod), kind, name, owner)


def _walked_skip(pod: Obj, owners: OwnerIndex) -> str | None:
    for kind, name, obj in owner_chain(pod, owners):
        if meta.annotations_of(obj).get(c.SKIP_PODGROUPER_ANNOTATION) == "true":
            return f"{kind} {name}"
    return None


_values = st.one_of(st.none(), st.sampled_from(["", "0", "3", "-2", "x", "true", "false"]), st.integers(-2, 5))
_annotations = st.one_of(
    st.none(), st.just("not a mapping"),
    st.dictionaries(st.sampled_from([c.BATCH_MIN_MEMBER_ANNOTATION, c.SKIP_PODGROUPER_ANNOTATION, "other"]), _values))
_labels = st.one_of(
    st.none(), st.just(["not", "a", "mapping"]),
    st.dictionaries(st.sampled_from([c.JOB_ID_LABEL, c.JOB_SIZE_LABEL, "kai.scheduler/queue"]), _values))
_ref = st.one_of(
    st.fixed_dictionaries({"kind": st.sampled_from(["Job", "ReplicaSet", "CronJob"]),
                           "name": st.sampled_from(["w1", "w2"])},
                          optional={"controller": st.booleans()}),
    st.just({"kind": "Job"}), st.just("not a mapping"))
_refs = st.one_of(st.none(), st.just({"kind": "Job", "name": "w1"}), st.lists(_ref, max_size=3))


@st.composite
def _pods(draw: st.DrawFn) -> tuple[Obj, OwnerIndex]:
    m: Obj = {}
    for key, values in (("name", st.one_of(st.just("p-0"), st.integers(0, 3))), ("namespace", st.just("team-a")),
                        ("labels", _labels), ("annotations", _annotations), ("ownerReferences", _refs)):
        if draw(st.booleans()):
            m[key] = draw(values)
    pod: Obj = {"metadata": m} if draw(st.integers(0, 9)) else {"metadata": "not a mapping"}
    owners: OwnerIndex = {}
    for kind in ("Job", "ReplicaSet", "CronJob"):
        for name in ("w1", "w2"):
            if draw(st.booleans()):
                om: Obj = {"name": name, "namespace": "team-a", "annotations": draw(_annotations)}
                if draw(st.booleans()):
                    om["ownerReferences"] = draw(_refs)
                owners[("team-a", kind, name)] = {"kind": kind, "metadata": om, "spec": {}}
    return pod, owners


@settings(max_examples=400, deadline=None)
@given(_pods())
def test_a_pod_reads_as_its_walk_says(case: tuple[Obj, OwnerIndex]) -> None:
    pod, owners = case
    assert group_for_pod(pod, owners) == _walked_group(pod, owners)
    assert podgrouper_skipped_by(pod, owners) == _walked_skip(pod, owners)


def test_a_pod_of_its_own_keeps_its_gang_size_and_skip() -> None:
    pod = {"metadata": {"name": "p", "namespace": "team-a",
                        "annotations": {c.BATCH_MIN_MEMBER_ANNOTATION: "4", c.SKIP_PODGROUPER_ANNOTATION: "true"}}}
    assert group_for_pod(pod, {}) == GroupInfo("pg-pod-p", 4, "Pod", "p", pod)
    assert podgrouper_skipped_by(pod, {}) == "Pod p"
    assert podgrouper_skipped_by({"metadata": {"name": "q"}}, {}) is None
