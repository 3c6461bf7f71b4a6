"""What allocate remembers a failed placement by within a cycle (``allocate._failure_key``: the pods' one shape, their
count, the job's topology constraint; None when the pods differ in shape), against the plain reading: a tuple of
every attribute of each pod compared with the first's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.actions.allocate import _failure_key
from kaid.model.objects import Job, Pod


def _plain(job: Job, batch: list[Pod]) -> tuple[object, ...] | None:
    def shape(p: Pod) -> tuple[object, ...]:
        return (p.sig, p.gpu_whole, p.gpu_frac, p.gpu_mem_mib, p.frac_devices, p.cpu, p.mem)

    if any(shape(p) != shape(batch[0]) for p in batch):
        return None
    return (*shape(batch[0]), len(batch), job.topology, job.required_level, job.preferred_level)


_POD = st.tuples(st.sampled_from(["", "s1"]), st.integers(0, 2), st.sampled_from([0, 500]), st.sampled_from([0, 4000]),
                 st.integers(0, 1), st.sampled_from([0, 1000]), st.sampled_from([0, 10**9]))


@settings(max_examples=500, deadline=None)
@given(st.lists(_POD, min_size=1, max_size=6), st.integers(0, 2), st.sampled_from([None, "topo"]),
       st.sampled_from([None, "rack"]))
def test_failure_key_matches_the_plain_reading(shapes: list[tuple[str, int, int, int, int, int, int]], alike: int,
                                               topology: str | None, level: str | None) -> None:
    if alike:  # most batches are one shape: then the key is what tells them apart
        shapes = [shapes[0]] * len(shapes)
    job = Job("ns", "j")
    job.topology, job.required_level, job.preferred_level = topology, level, None
    batch = []
    for k, (sig, whole, frac, mib, devices, cpu, mem) in enumerate(shapes):
        pod = Pod("ns", f"p{k}", "")
        pod.sig, pod.gpu_whole, pod.gpu_frac, pod.gpu_mem_mib, pod.frac_devices, pod.cpu, pod.mem = \
            sig, whole, frac, mib, devices, cpu, mem
        batch.append(pod)
    assert _failure_key(job, batch) == _plain(job, batch)
