"""Why a pod or gang does not fit: a per-node fit summary, fragmentation, in words with numbers."""

from __future__ import annotations

from collections import Counter

from kaid.model.objects import Pod, Reason
from kaid.model.pods import EPHEMERAL_STORAGE, HOST_PORT
from kaid.model.vocabulary import NodeFailure, ReasonCode
from kaid.placement.index import NodeIndex


def fit_summary(pod: Pod, index: NodeIndex) -> Reason:
    """Why no node takes the pod, counted per first failure ("0/120 nodes can take ...: 80 insufficient GPU"): the
    static failures as the index keeps them per pod signature, the resources as it keeps them per pod shape
    (``NodeIndex.misfits``: the nodes changed since the shape was last explained are read again, not every node)."""
    found = dict(index.static_failures(pod))  # first failure -> (first node index with it, nodes with it)
    misfits = index.misfits(pod)
    for why, count in misfits.counts.items():
        first, before = found.get(why) or (misfits.first(why), 0)
        found[why] = (first, before + count)
    if index.pod_affinity is not None:  # of the nodes with room for it, those inter-pod affinity or spread keep it from
        fits = bytearray(misfits.mask)
        for i, lacks in enumerate(misfits.why):
            if lacks is not None:
                fits[i] = 0
        found.update(index.pod_affinity.failures(pod, fits, misfits.mask))
    # in the order each failure first occurs over the nodes, as one pass over them would count them
    counts: Counter[NodeFailure] = Counter({why: found[why][1] for why in sorted(found, key=lambda w: found[w][0])})
    total = len(index.nodes)
    fit = total - sum(counts.values())
    parts = ", ".join(f"{k} {code.words}" for code, k in counts.most_common())
    want = describe_request(pod)
    msg = f"{fit}/{total} nodes can take a pod of {want}" + (f": {parts}" if parts else "")
    failures = {str(code): k for code, k in counts.items()}
    return Reason(ReasonCode.NODE_FIT, msg, {"nodes": total, "fit": fit, "failures": failures})


def describe_request(pod: Pod) -> str:
    """A pod's request in words ("2 GPUs, 8 cpu, 64 GB memory")."""
    parts = []
    if pod.gpu_whole:
        parts.append(f"{pod.gpu_whole} GPU" + ("s" if pod.gpu_whole > 1 else ""))
    elif pod.frac_devices:
        each = f"{pod.gpu_frac / 1000:g} of a GPU" if pod.gpu_frac else f"{pod.gpu_mem_mib} MiB of GPU memory"
        parts.append(each + (f" on each of {pod.frac_devices} GPUs" if pod.frac_devices > 1 else ""))
    if pod.cpu:
        parts.append(f"{pod.cpu / 1000:g} cpu")
    if pod.mem:
        parts.append(f"{pod.mem / 1e9:.3g} GB memory")
    parts += [f"host port {name.removeprefix(HOST_PORT)}" if name.startswith(HOST_PORT) else
              f"{amount / 1e9:.3g} GB {name}" if name == EPHEMERAL_STORAGE else f"{amount} {name}"
              for name, amount in pod.ext]
    return ", ".join(parts) or "no resources"


def fragmentation(pods: list[Pod], index: NodeIndex) -> Reason | None:
    """Free GPUs in total would do, but not in blocks large enough for the pods."""
    if not pods:
        return None
    pod = max(pods, key=lambda p: p.gpu_whole)
    mask = index.static_mask(pod)
    if pod.gpu_whole:
        need = sum(p.gpu_whole for p in pods)
        free = largest = blocks = 0  # over the nodes the pods may go to: a node without an idle GPU adds nothing
        for k in range(1, index.max_gpus + 1):
            for i in index.buckets[k]:
                if mask[i]:
                    free += k
                    blocks += k // pod.gpu_whole
                    largest = k
        if free >= need and largest < pod.gpu_whole:
            return Reason(
                ReasonCode.FRAGMENTATION, f"{free} GPUs are free in total on nodes this job may use, but no node has "
                f"{pod.gpu_whole} free together (the largest free block is {largest}); consolidating "
                "preemptible pods or waiting for running pods to finish would make room",
                {"freeGPUs": free, "largestBlock": largest, "neededPerPod": pod.gpu_whole})
        if free >= need and len(pods) > 1 and blocks < len(pods):
            return Reason(
                ReasonCode.FRAGMENTATION, f"{free} GPUs are free in total but in blocks that fit only {blocks} of "
                f"the {len(pods)} pods of {pod.gpu_whole} GPUs (largest free block {largest})",
                {"freeGPUs": free, "largestBlock": largest, "neededPerPod": pod.gpu_whole,
                 "podsThatFit": blocks})
    elif pod.frac_devices and pod.gpu_frac:
        nodes = [n for n in index.nodes if mask[n.index]]
        free_milli = sum(1000 - u for n in nodes for u in n.dev_used)
        best = max((1000 - u for n in nodes for u in n.dev_used), default=0)
        if free_milli >= pod.gpu_frac and best < pod.gpu_frac:
            return Reason(
                ReasonCode.FRAGMENTATION, f"{free_milli / 1000:g} GPUs are free in slivers, but no single GPU has "
                f"{pod.gpu_frac / 1000:g} free (the most on one GPU is {best / 1000:g})",
                {"freeGPUs": free_milli / 1000, "largestBlock": best / 1000})
    return None
