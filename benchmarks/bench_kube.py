"""kaid against the upstream kube-scheduler on one real (kwok) control plane: time to bind a backlog.

    python -m benchmarks.bench_kube                      # full size: 500 nodes, 4,000 pods, 50 gangs
    python -m benchmarks.bench_kube --repeat 5 --json out.json
    python -m benchmarks.bench_kube --starts 7           # cold starts only: start to first bind
    python -m benchmarks.bench_kube --schedulers kaid --kaid-profile /tmp/kaid.prof
    python -m benchmarks.bench_kube --no-raw             # without the raw bind loop (the ceiling)
    python -m benchmarks.bench_kube --qps 2000 --schedulers kaid --no-raw --repeat 3 --kaid-base /tmp/main-tree
                                                         # A/B: kaid of this tree against another tree's, interleaved

One control plane on loopback (``tests/e2e/controlplane.py``) with ``--nodes`` fake nodes of 8 GPUs, kai's
manifests (the kaid Deployment scaled to 0: kaid runs here as a process) and ``--queues`` leaf queues with
equal GPU quotas. The workload: ``--pods`` one-GPU pods, ``--gangs`` of them gangs of ``--gang-min`` to
``--gang-max`` pods (a PodGroup each, for kaid; kube-scheduler gets the same pods and no gangs), the rest
single pods whose PodGroups kaid's podgrouper makes (``--podgroups precreated``: made beforehand).

Each run, for each scheduler in turn (the order alternates with ``--repeat``): a fresh namespace, every pod
created while no scheduler runs, a wait for a quiet control plane, one watch on the pods, then the scheduler
starts (kaid: ``kaid run --no-leader-elect`` with ``clientQPS``/``clientBurst`` = ``--qps``/``--burst``) and
the watch times its first bind and its last. Also measured: gangs whole, GPUs per node, CPU of the scheduler
and of kube-apiserver, kaid's cycle metrics and log lines, kube-scheduler's attempt metrics, each scheduler's peak
RSS. The namespace is deleted before the next run. kwok's fake kubelets fall behind on a loaded machine: the
controller manager here waits 10 minutes before it marks a silent node Unknown (``CONTROLLER_MANAGER_ARGS``), and each
run counts the nodes it still saw NotReady (``nodes_not_ready``), which schedulers rightly skip.

After the schedulers, on the same control plane, the raw bind loop (``--no-raw``: not): the same pods bound by a bare
loop of ``pods/binding`` calls through kaid's own actuator and client, with kaid's identity, QPS, burst and bind
workers (``kaid.kube.actuator.bind_workers``), no scheduling: the ceiling on this machine; reported with the ratios
kaid/kube-scheduler and kaid/raw. Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import http.client
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from benchmarks.common import (
    fmt,
    machine_info,
    median,
    output_args,
    proc_memory_mb,
    profile_text,
    progress,
    write_report,
)
from benchmarks.common import ratio as _ratio
from benchmarks.kube_cluster import (
    CONTROL_PLANE,
    CONTROLLER_MANAGER_ARGS,
    GPUS_PER_NODE,
    IDLE_WINDOW_S,
    KAID_BASE,
    NAMESPACE_GONE_TIMEOUT_S,
    NODE_PREFIX,
    PODGROUP_PATH,
    PROGRESS_EVERY_S,
    RAW,
    RAW_SCHEDULER_NAME,
    RAW_WATCHES,
    REPO_ROOT,
    SCHEDULER_NAMES,
    SCHEDULERS,
    START_SETTLE_S,
    BindWatcher,
    KaidProcess,
    NodeWatcher,
    Obj,
    Options,
    RawBinder,
    Workload,
    admin_client,
    apiserver_counters,
    build_workload,
    component_pid,
    counters_delta,
    cpu_readings,
    cpu_spent,
    create_all,
    delete_namespace,
    delta,
    parse_kaid_metrics,
    parse_kube_scheduler_metrics,
    pod_objects,
    podgroup_objects,
    prepare_cluster,
    proc_cpu_seconds,
    raw_placement,
    scrape_apiserver,
    scrape_kube_scheduler,
    wait_kaid_cycle_end,
    wait_quiet,
)
from kaid.kube.cache import API_RESOURCES
from kaid.kube.client import ApiError, KubeClient
from kaid.kube.startup import TRICKS as STARTUP_TRICKS
from tests.e2e.controlplane import ControlPlane, ControlPlaneError, ensure_binaries, pinned_versions


def _fresh_namespace(cp: ControlPlane, wl: Workload, scheduler: str, opts: Options,
                     prefix: str) -> tuple[str, bool, bool, list[Obj]]:
    """A new namespace and the scheduler's pods for it (not created yet): (namespace, gangs, PodGroups of
    single pods made beforehand, pods)."""
    namespace = f"{prefix}-{uuid.uuid4().hex[:5]}"
    cp.ensure_namespace(namespace)
    cp.wait_for_default_serviceaccount(namespace)
    gangs = _is_kaid(scheduler)
    precreate = gangs and opts.podgroups == "precreated"
    return namespace, gangs, precreate, pod_objects(wl, SCHEDULER_NAMES[scheduler], namespace, precreate)


def _is_kaid(scheduler: str) -> bool:
    return scheduler in ("kaid", KAID_BASE)


def run_once(cp: ControlPlane, wl: Workload, scheduler: str, opts: Options, run_id: str,
             log: Callable[[str], None], clean_up: bool = True) -> Obj:
    """One measured run of ``scheduler`` on a fresh namespace; the namespace is gone when it returns (``clean_up``;
    the last run's goes with the control plane)."""
    client = admin_client(cp)
    namespace, gangs, precreate, pods = _fresh_namespace(cp, wl, scheduler, opts, f"bench-kube-{run_id}")
    result: Obj = {"scheduler": scheduler, "run": run_id, "namespace": namespace, "pods": len(pods)}
    kaid: KaidProcess | None = None
    watcher: BindWatcher | None = None
    node_watch: NodeWatcher | None = None
    try:
        _create_backlog(cp, client, wl, namespace, pods, gangs, precreate, result)
        log(f"{run_id}: {len(pods)} pods created in {result['create_s']:.1f} s; control plane at rest after "
            f"{result['quiet_wait_s']:.1f} s more; starting {scheduler}")
        node_watch = NodeWatcher(admin_client(cp, qps=20, burst=20))
        node_watch.start()
        watcher = BindWatcher(admin_client(cp, qps=50, burst=50), namespace, len(pods))
        watcher.start()
        result["bound_before_start"] = len(watcher.bound)
        result["loadavg_before"] = [round(x, 2) for x in os.getloadavg()]
        api_pid = component_pid(cp, "kube-apiserver")
        counters0 = _at_rest(cp, result)
        cpu0 = cpu_readings(cp, None)  # the scheduler starts now: its CPU from 0
        api_cpu0 = proc_cpu_seconds(api_pid)
        t0 = time.monotonic()
        if _is_kaid(scheduler):
            tree = opts.kaid_base if scheduler == KAID_BASE and opts.kaid_base is not None else REPO_ROOT
            kaid = KaidProcess(cp, opts, opts.workdir, run_id, tree=tree)
            sched_pid: int | None = kaid.pid
        else:
            cp.stop_kube_scheduler()
            cp.start_kube_scheduler([f"--kube-api-qps={opts.qps:g}", f"--kube-api-burst={opts.burst}"])
            sched_pid = component_pid(cp, "kube-scheduler")
        result["start_s"] = round(time.monotonic() - t0, 2)  # kube-scheduler: until /healthz answered
        _wait_all_bound(watcher, kaid, t0, opts.timeout, run_id, log)
        result.update(_bind_times(watcher, t0, len(pods)))
        result.update(_check_placement(wl, watcher))
        result["scheduler_cpu_s"] = proc_cpu_seconds(sched_pid)
        result["apiserver_cpu_s"] = delta(proc_cpu_seconds(api_pid), api_cpu0)
        result["cpu_s"] = cpu_spent(cpu_readings(cp, sched_pid), cpu0)
        _apiserver_work(cp, counters0, result)
        _scheduler_metrics(cp, kaid, sched_pid, len(pods), t0 + opts.timeout, t0, result)
        result["scheduler_peak_rss_mb"], result["scheduler_rss_mb"] = proc_memory_mb(sched_pid)
        result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
        log(f"{run_id}: {scheduler}: {result['pods_bound']}/{len(pods)} bound, first after "
            f"{result['first_bind_s']} s, all after {result['all_bound_s']} s ({result['pods_per_s']} pods/s)")
    finally:
        if watcher is not None:
            watcher.close()
            result["watch_errors"] = watcher.errors
        if node_watch is not None:
            result["nodes_not_ready"] = node_watch.close()
        if kaid is not None:
            kaid.stop()
            result["kaid_cycles"] = kaid.cycles()
            result["kaid_exit"] = kaid.process.returncode
            _keep_log(opts, kaid.log, kaid.log.name)
        if scheduler == "kube-scheduler":
            comp = cp.components.get("kube-scheduler")
            if comp is not None:
                _keep_log(opts, comp.log, f"kube-scheduler-{run_id}.log")
            cp.stop_kube_scheduler()
        if clean_up:
            result["delete_s"] = round(delete_namespace(cp, client, namespace, NAMESPACE_GONE_TIMEOUT_S), 1)
    return result


def run_raw(cp: ControlPlane, wl: Workload, opts: Options, run_id: str, log: Callable[[str], None],
            clean_up: bool = True, watches: Sequence[str] = ()) -> Obj:
    """The ceiling, on the same control plane: the same pods (a schedulerName nobody serves), bound by a bare loop
    of ``pods/binding`` calls through kaid's actuator and client, with kaid's identity, QPS, burst and bind workers,
    ``GPUS_PER_NODE`` pods per node in order; no scheduling. Timed by the same watch as the schedulers. ``watches``
    (``--raw-watches``): the loop's process also lists and watches these kinds with kaid's informers first (the run
    is ``RAW_WATCHES``'s)."""
    client = admin_client(cp)
    namespace = f"bench-kube-{run_id}-{uuid.uuid4().hex[:5]}"
    cp.ensure_namespace(namespace)
    cp.wait_for_default_serviceaccount(namespace)
    pods = pod_objects(wl, RAW_SCHEDULER_NAME, namespace, False)
    result: Obj = {"scheduler": RAW_WATCHES if watches else RAW, "run": run_id, "namespace": namespace,
                   "pods": len(pods)}
    watcher: BindWatcher | None = None
    node_watch: NodeWatcher | None = None
    raw: RawBinder | None = None
    try:
        nodes = sorted((n["metadata"]["name"] for n in client.get("/api/v1/nodes").get("items") or []
                        if n["metadata"]["name"].startswith(f"{NODE_PREFIX}-")),
                       key=lambda name: int(name.rsplit("-", 1)[1]))
        kubeconfig = cp.serviceaccount_kubeconfig("kai-scheduler", "kai-scheduler", expiration_seconds=7200,
                                                  create=False)
        _create_backlog(cp, client, wl, namespace, pods, False, False, result)
        raw = RawBinder(kubeconfig, opts.qps, opts.burst, raw_placement(pods, nodes), opts.workdir, run_id, watches)
        log(f"{run_id}: {len(pods)} pods created in {result['create_s']:.1f} s; control plane at rest after "
            f"{result['quiet_wait_s']:.1f} s more; raw bind loop ready")
        node_watch = NodeWatcher(admin_client(cp, qps=20, burst=20))
        node_watch.start()
        watcher = BindWatcher(admin_client(cp, qps=50, burst=50), namespace, len(pods))
        watcher.start()
        result["bound_before_start"] = len(watcher.bound)
        result["loadavg_before"] = [round(x, 2) for x in os.getloadavg()]
        api_pid = component_pid(cp, "kube-apiserver")
        counters0 = _at_rest(cp, result)
        cpu0 = cpu_readings(cp, raw.pid)
        api_cpu0 = proc_cpu_seconds(api_pid)
        t0 = time.monotonic()
        raw.go()
        _wait_all_bound(watcher, None, t0, opts.timeout, run_id, log)
        result.update(_bind_times(watcher, t0, len(pods)))
        result.update(_check_placement(wl, watcher))
        result["apiserver_cpu_s"] = delta(proc_cpu_seconds(api_pid), api_cpu0)
        result["cpu_s"] = cpu_spent(cpu_readings(cp, raw.pid), cpu0)
        _apiserver_work(cp, counters0, result)
        out = raw.finish(timeout=max(30.0, t0 + opts.timeout - time.monotonic()))
        result["raw"] = out
        result["scheduler_cpu_s"] = out.get("bind_cpu_s")
        result["scheduler_peak_rss_mb"] = out.get("peak_rss_mb")
        log(f"{run_id}: raw binds: {result['pods_bound']}/{len(pods)} bound, all after {result['all_bound_s']} s "
            f"({result['pods_per_s']} pods/s, {out.get('workers')} workers, {out.get('failed')} failed)")
    finally:
        if watcher is not None:
            watcher.close()
            result["watch_errors"] = watcher.errors
        if node_watch is not None:
            result["nodes_not_ready"] = node_watch.close()
        if raw is not None and raw.process.poll() is None:
            raw.finish(timeout=0.1)
        if clean_up:
            result["delete_s"] = round(delete_namespace(cp, client, namespace, NAMESPACE_GONE_TIMEOUT_S), 1)
    return result


COUNTED_WAIT_S = 2.0  # at most this long for the API server's counters to count every bind seen (``_apiserver_work``)


def _at_rest(cp: ControlPlane, result: Obj) -> dict[str, float]:
    """Just before the start: the share of a CPU each control-plane process (and the benchmark's watches) uses at rest
    (kwok's heartbeats and leases, the controller manager, the watches open) over ``IDLE_WINDOW_S``, into ``result``
    (``cpu_at_rest``, the API server's also as ``apiserver_idle_cpu``); returns the API server's counters
    (``apiserver_counters``)."""
    before = cpu_readings(cp, None)
    time.sleep(IDLE_WINDOW_S)
    spent = cpu_spent(cpu_readings(cp, None), before)
    rest = {name: round(v / IDLE_WINDOW_S, 3) for name, v in spent.items() if v is not None and name != "scheduler"}
    result["cpu_at_rest"] = rest
    result["apiserver_idle_cpu"] = rest.get("kube-apiserver")
    try:
        return apiserver_counters(scrape_apiserver(cp))
    except (OSError, ControlPlaneError, http.client.HTTPException, ValueError) as err:
        result["apiserver_error"] = str(err)
        return {}


def _apiserver_work(cp: ControlPlane, before: dict[str, float], result: Obj) -> None:
    """After the last bind: what the API server did from the start (its counters' increase, ``"apiserver"``), and the
    CPU beyond what is used at rest, per 1,000 pods bound, of the API server and of every process together (the
    scheduler's whole CPU counted): figures that depend little on the machine's load (the wall-clock rate does, and
    the rest's CPU grows with a run's length)."""
    if before:
        # the API server counts a request once its handler returns, a moment after the answer went out: a bind seen
        # by the watch (or answered to the raw loop) may not be counted yet (39 of 40 once, in the smoke test)
        deadline = time.monotonic() + COUNTED_WAIT_S
        try:
            while True:
                counted = counters_delta(apiserver_counters(scrape_apiserver(cp)), before)
                if counted.get("requests POST pods/binding", 0) >= (result.get("pods_bound") or 0) or \
                        time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            result["apiserver"] = counted
        except (OSError, ControlPlaneError, http.client.HTTPException, ValueError) as err:
            result["apiserver_error"] = str(err)
    total, took = (result.get("cpu_s") or {}).get("total"), result.get("all_bound_s")
    rest = (result.get("cpu_at_rest") or {}).get("total")
    if total is not None and rest is not None and took is not None and result.get("pods_bound"):
        result["cpu_beyond_rest_s"] = round(total - rest * took, 2)
        result["cpu_beyond_rest_per_1000_binds"] = round(result["cpu_beyond_rest_s"] * 1000 / result["pods_bound"], 3)
    cpu, idle = result.get("apiserver_cpu_s"), result.get("apiserver_idle_cpu")
    if cpu is not None and idle is not None and took is not None and result.get("pods_bound"):
        result["apiserver_cpu_above_idle_s"] = round(cpu - idle * took, 2)
        result["apiserver_cpu_per_1000_binds"] = round(result["apiserver_cpu_above_idle_s"] * 1000 /
                                                       result["pods_bound"], 3)


def _create_backlog(cp: ControlPlane, client: KubeClient, wl: Workload, namespace: str, pods: list[Obj],
                    gangs: bool, precreate: bool, result: Obj) -> None:
    """The PodGroups (for kaid) and the pods, then a wait until the control plane has digested them."""
    began = time.monotonic()
    if gangs:
        podgroups = podgroup_objects(wl, namespace, precreate)
        create_all(client, podgroups, lambda o: PODGROUP_PATH.format(ns=namespace))
        result["podgroups_created"] = len(podgroups)
    create_all(client, pods, lambda o: f"/api/v1/namespaces/{namespace}/pods")
    result["create_s"] = round(time.monotonic() - began, 2)
    result["quiet_wait_s"] = wait_quiet(cp)


def _wait_all_bound(watcher: BindWatcher, kaid: KaidProcess | None, t0: float, timeout: float, run_id: str,
                    log: Callable[[str], None]) -> None:
    next_note = t0 + PROGRESS_EVERY_S
    while not watcher.all_bound.wait(0.5):
        now = time.monotonic()
        if kaid is not None and not kaid.running():
            raise ControlPlaneError(f"kaid exited with status {kaid.process.returncode}:\n{kaid.log_tail()}")
        if now > t0 + timeout:
            log(f"{run_id}: timed out after {timeout:.0f} s with {len(watcher.bound)}/{watcher.total} bound")
            return
        if now >= next_note:
            log(f"{run_id}: {len(watcher.bound)}/{watcher.total} bound after {now - t0:.0f} s")
            next_note += PROGRESS_EVERY_S


def _bind_times(watcher: BindWatcher, t0: float, total: int) -> Obj:
    times = sorted(t for _, t in watcher.bound.values())
    all_bound = len(watcher.bound) >= total
    end = times[-1] if all_bound else time.monotonic()
    return {
        "all_bound": all_bound,
        "pods_bound": len(watcher.bound),
        "first_bind_s": round(times[0] - t0, 2) if times else None,
        "all_bound_s": round(end - t0, 2) if all_bound else None,
        "pods_per_s": round(len(watcher.bound) / (end - t0), 1) if end > t0 else None,
        "pods_per_s_binding": (round((len(times) - 1) / (times[-1] - times[0]), 1)
                               if len(times) > 1 and times[-1] > times[0] else None),
        "binds_per_half_second": _timeline(times, t0),
    }


def _timeline(times: list[float], t0: float, step: float = 0.5) -> list[int]:
    """Binds seen in each ``step`` seconds from the start: where a run lost its time."""
    counts: list[int] = []
    for t in times:
        slot = max(0, int((t - t0) / step))
        counts.extend([0] * (slot + 1 - len(counts)))
        counts[slot] += 1
    return counts


def _scheduler_metrics(cp: ControlPlane, kaid: KaidProcess | None, sched_pid: int | None, total: int,
                       deadline: float, t0: float, result: Obj) -> None:
    """kaid's /metrics once its binding cycle has ended (and its CPU then), or kube-scheduler's."""
    if kaid is not None:
        text = wait_kaid_cycle_end(kaid, total, timeout=max(30.0, deadline - time.monotonic()))
        result["cycle_end_s"] = round(time.monotonic() - t0, 2)
        result["kaid"] = parse_kaid_metrics(text) if text else None
        result["scheduler_cpu_s"] = proc_cpu_seconds(sched_pid)
        return
    try:
        result["kube_scheduler"] = parse_kube_scheduler_metrics(scrape_kube_scheduler(cp))
    except (OSError, ControlPlaneError, http.client.HTTPException, KeyError, ValueError) as err:
        result["kube_scheduler"] = {"error": str(err)}


def _keep_log(opts: Options, log_file: Path, name: str) -> None:
    """``--keep-logs DIR``: a scheduler's log copied there."""
    if opts.keep_logs:
        Path(opts.keep_logs).mkdir(parents=True, exist_ok=True)
        shutil.copy(log_file, Path(opts.keep_logs) / name)


def measure_starts(cp: ControlPlane, wl: Workload, scheduler: str, opts: Options, starts: int,
                   log: Callable[[str], None], startup_off: Sequence[str] = ()) -> Obj:
    """``starts`` cold starts of ``scheduler`` on the same backlog: the time from its start to the first
    bind the watch sees (and to the ``opts.start_binds``-th); the scheduler is killed right after, and the pods it
    bound are made again. For kaid, each of ``startup_off`` (start-up tricks to turn off, ``+`` between several) is
    measured too, and kaid of ``opts.kaid_base`` (``--kaid-base``), their starts interleaved with the plain ones."""
    client = admin_client(cp)
    namespace, gangs, precreate, pods = _fresh_namespace(cp, wl, scheduler, opts, f"bench-start-{scheduler}")
    variants = [("", "", REPO_ROOT)]  # (label, tricks off, tree)
    if scheduler == "kaid":
        variants += [(f"without {v}", v, REPO_ROOT) for v in startup_off]
        if opts.kaid_base is not None:
            variants.append((KAID_BASE, "", opts.kaid_base))
    firsts: dict[str, list[tuple[float, float]]] = {label: [] for label, _, _ in variants}
    try:
        if gangs:
            create_all(client, podgroup_objects(wl, namespace, precreate), lambda o: PODGROUP_PATH.format(
                ns=namespace))
        create_all(client, pods, lambda o: f"/api/v1/namespaces/{namespace}/pods")
        for i in range(starts):
            for label, off, tree in variants:
                first, nth = _one_start(cp, client, wl, scheduler, opts, namespace, pods, off,
                                        f"start{i}{off or ('base' if tree != REPO_ROOT else '')}", tree)
                firsts[label].append((first, nth))
                log(f"start {i}: {scheduler}{' ' + label if label else ''} first bind after {first} s"
                    + (f", bind {opts.start_binds} after {nth} s" if opts.start_binds > 1 else ""))
    finally:
        delete_namespace(cp, client, namespace, NAMESPACE_GONE_TIMEOUT_S)
    out = {"scheduler": scheduler, **_spread(firsts[""])}
    if len(variants) > 1:
        out["startup_off"] = {label: _spread(firsts[label]) for label, _, _ in variants[1:]}
    return out


def _spread(times: list[tuple[float, float]]) -> Obj:
    firsts, nths = [t[0] for t in times], [t[1] for t in times]
    return {"first_bind_s": firsts, "median_s": median(firsts), "min_s": min(firsts, default=None),
            "max_s": max(firsts, default=None), "nth_bind_s": nths, "nth_median_s": median(nths)}


def _one_start(cp: ControlPlane, client: KubeClient, wl: Workload, scheduler: str, opts: Options, namespace: str,
               pods: list[Obj], startup_off: str, run_id: str, tree: Path = REPO_ROOT) -> tuple[float, float]:
    """One cold start on the backlog: seconds to the first bind and to the ``opts.start_binds``-th; then the backlog
    is made whole again."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    pg_path = PODGROUP_PATH.format(ns=namespace)
    if wl.gangs and opts.podgroups != "precreated":  # each start makes the single pods' PodGroups again
        gang_names = {j.name for j in wl.gangs}
        for pg in client.get(pg_path).get("items") or []:
            if pg["metadata"]["name"] not in gang_names:
                with contextlib.suppress(ApiError):
                    client.request("DELETE", f"{pg_path}/{pg['metadata']['name']}")
    time.sleep(START_SETTLE_S)  # let the control plane finish with the clean-up (deletions, new pods)
    wait_quiet(cp)  # ... and with anything else, as the measured runs do
    watcher = BindWatcher(admin_client(cp, qps=50, burst=50), namespace, len(pods))
    watcher.start()
    kaid: KaidProcess | None = None
    t0 = time.monotonic()
    try:
        if scheduler == "kaid":
            kaid = KaidProcess(cp, opts, opts.workdir, run_id, startup_off.replace("+", ","), tree)
        else:
            cp.start_kube_scheduler([f"--kube-api-qps={opts.qps:g}", f"--kube-api-burst={opts.burst}"])
        wanted = min(opts.start_binds, len(pods))
        while len(watcher.bound) < wanted and time.monotonic() - t0 < opts.timeout:
            time.sleep(0.005)
    finally:
        if kaid is not None:
            kaid.kill()
            _keep_log(opts, kaid.log, kaid.log.name)
        else:
            cp.stop_kube_scheduler()
        watcher.close()
    if len(watcher.bound) < wanted:
        raise ControlPlaneError(f"{scheduler} bound {len(watcher.bound)} pods of {wanted} within {opts.timeout:.0f} s")
    times = sorted(t for _, t in watcher.bound.values())
    _unbind(client, path, {p["metadata"]["name"]: p for p in pods})
    return round(times[0] - t0, 3), round(times[wanted - 1] - t0, 3)


def _unbind(client: KubeClient, path: str, pods: dict[str, Obj]) -> None:
    """Delete the bound pods (binds still in flight included) and make them again, unbound."""
    deadline = time.monotonic() + NAMESPACE_GONE_TIMEOUT_S
    while time.monotonic() < deadline:
        time.sleep(0.5)  # binds the scheduler sent before it stopped may still land
        items = client.get(path).get("items") or []
        bound = {p["metadata"]["name"] for p in items if (p.get("spec") or {}).get("nodeName")}
        if not bound:
            missing = [pods[n] for n in pods if n not in {p["metadata"]["name"] for p in items}]
            if not missing:
                return
            create_all(client, missing, lambda o: path)
            continue
        for name in bound:
            with contextlib.suppress(ApiError):
                client.request("DELETE", f"{path}/{name}", params={"gracePeriodSeconds": "0"})
    raise ControlPlaneError("the pods bound during a start measurement were not gone in time")


def _check_placement(wl: Workload, watcher: BindWatcher) -> Obj:
    """No node holds more than its GPUs; gangs whole; how far apart in time each gang's pods were bound."""
    per_node: dict[str, int] = {}
    for node, _ in watcher.bound.values():
        per_node[node] = per_node.get(node, 0) + 1
    gang_times: dict[str, list[float]] = {j.name: [] for j in wl.gangs}
    for pod, (_, t) in watcher.bound.items():
        job = watcher.labels.get(pod, "")
        if job in gang_times:
            gang_times[job].append(t)
    sizes = {j.name: j.pods for j in wl.gangs}
    whole = sum(1 for g, ts in gang_times.items() if len(ts) == sizes[g])
    partial = sum(1 for g, ts in gang_times.items() if 0 < len(ts) < sizes[g])
    spreads = [max(ts) - min(ts) for g, ts in gang_times.items() if len(ts) == sizes[g]]
    return {
        "nodes_used": len(per_node),
        "max_gpus_on_a_node": max(per_node.values(), default=0),
        "overcommitted_nodes": sum(1 for v in per_node.values() if v > GPUS_PER_NODE),
        "gangs_whole": whole,
        "gangs_partial": partial,
        "gang_bind_spread_max_s": round(max(spreads), 2) if spreads else None,
        "gang_bind_spread_mean_s": round(statistics.fmean(spreads), 2) if spreads else None,
    }


# ============================================================================================ report
NUMERIC_KEYS: Final = ("create_s", "quiet_wait_s", "first_bind_s", "all_bound_s", "pods_per_s", "pods_per_s_binding",
                       "pods_bound",
                       "gangs_whole", "gangs_partial", "gang_bind_spread_max_s", "max_gpus_on_a_node",
                       "overcommitted_nodes", "scheduler_cpu_s", "scheduler_peak_rss_mb", "apiserver_cpu_s",
                       "apiserver_idle_cpu", "apiserver_cpu_above_idle_s", "apiserver_cpu_per_1000_binds",
                       "cpu_beyond_rest_s", "cpu_beyond_rest_per_1000_binds", "delete_s", "nodes_not_ready")


def summarise(runs: list[Obj]) -> Obj:
    """Per scheduler: the median of every numeric result over its runs, and kaid's cycle figures."""
    results: Obj = {}
    for sched in (*SCHEDULERS, KAID_BASE, RAW, RAW_WATCHES):
        mine = [r for r in runs if r["scheduler"] == sched]
        if not mine:
            continue
        res: Obj = {k: median([r.get(k) for r in mine]) for k in NUMERIC_KEYS}
        res["cpu_s"] = {name: median([(r.get("cpu_s") or {}).get(name) for r in mine])
                        for name in sorted({n for r in mine for n in r.get("cpu_s") or {}})}
        counted = sorted({key for r in mine for key in r.get("apiserver") or {}})
        res["apiserver"] = {key: median([(r.get("apiserver") or {}).get(key, 0) for r in mine]) for key in counted}
        res["runs"] = len(mine)
        res["all_bound_every_run"] = all(r.get("all_bound") for r in mine)
        if _is_kaid(sched):
            ms = [r["kaid"] for r in mine if r.get("kaid")]
            res["cycles"] = median([m["cycles"] for m in ms])
            res["cycle_ms_mean"] = median([m["cycle_ms_mean"] for m in ms])
            phases = sorted({p for m in ms for p in m["phases"]})
            res["phase_ms_mean"] = {p: median([m["phases"].get(p, {}).get("mean_ms") for m in ms]) for p in phases}
            res["phase_ms_sum"] = {p: median([m["phases"].get(p, {}).get("sum_ms") for m in ms]) for p in phases}
            res["cycle_ms_sum"] = median([m["cycle_ms_sum"] for m in ms])
            res["binding_cycles"] = [r.get("kaid_cycles") for r in mine]
        elif sched in (RAW, RAW_WATCHES):
            res["workers"] = median([(r.get("raw") or {}).get("workers") for r in mine])
            res["binds_failed"] = median([(r.get("raw") or {}).get("failed") for r in mine])
        else:
            ks = [r["kube_scheduler"] for r in mine if r.get("kube_scheduler") and "error" not in r["kube_scheduler"]]
            res["attempts"] = median([k["attempts"] for k in ks])
            res["attempt_ms_mean"] = median([k["attempt_ms_mean"] for k in ks])
        results[sched] = res
    return results


def format_report(report: Obj) -> str:
    res, wl, m = report["results"], report["workload"], report["machine"]
    k, s, w = res.get("kaid", {}), res.get("kube-scheduler", {}), res.get(RAW, {})
    rows: list[tuple[str, Any, Any, Any, Any, Any]] = []  # name, kaid, kube-scheduler, kaid/kube, raw, kaid/raw

    def row(name: str, key: str, ratio: bool = True, raw: bool = True) -> None:
        a, b, r = k.get(key), s.get(key), w.get(key) if raw else None
        rows.append((name, a, b, _ratio(a, b) if ratio else None, r, _ratio(a, r) if ratio and raw else None))

    def note(name: str, a: Any = None, b: Any = None, r: Any = None) -> None:
        rows.append((name, a, b, None, r, None))

    row("pods created before the start (s)", "create_s", ratio=False)
    row("then waited for a quiet control plane (s)", "quiet_wait_s", ratio=False)
    row("start to first bind (s)", "first_bind_s")
    row("start to all bound (s)", "all_bound_s")
    row("pods per second (start to all bound)", "pods_per_s")
    row("pods per second (first to last bind)", "pods_per_s_binding")
    row("pods bound", "pods_bound")
    note("every pod bound, every run", k.get("all_bound_every_run"), s.get("all_bound_every_run"),
         w.get("all_bound_every_run"))
    row("gangs whole", "gangs_whole", ratio=False, raw=False)
    row("gangs partly bound at the end", "gangs_partial", ratio=False, raw=False)
    row("gang bind spread, max (s)", "gang_bind_spread_max_s", raw=False)
    row("max GPUs on one node", "max_gpus_on_a_node", ratio=False)
    row("nodes seen NotReady during the run (kwok starved)", "nodes_not_ready", ratio=False)
    row("CPU time of the scheduler (raw: of its binds) (s)", "scheduler_cpu_s")
    row("peak RSS of the scheduler (MB)", "scheduler_peak_rss_mb")
    row("kube-apiserver CPU time in the run (s)", "apiserver_cpu_s")
    row("kube-apiserver CPU at rest before the start (CPUs)", "apiserver_idle_cpu", ratio=False)
    row("kube-apiserver CPU beyond rest, per 1,000 binds (s)", "apiserver_cpu_per_1000_binds")
    row("every process's CPU beyond rest, per 1,000 binds (s)", "cpu_beyond_rest_per_1000_binds")
    if w:
        note("raw: bind workers, binds failed", r=f"{fmt(w.get('workers'))}, {fmt(w.get('binds_failed'))}")
    if k:
        note("kaid cycles (until the binding one ended)", k.get("cycles"))
        note("  cycle, mean (ms)", k.get("cycle_ms_mean"))
        note("  cycle, total (ms)", k.get("cycle_ms_sum"))
        total = k.get("cycle_ms_sum") or 0.0
        phase_sum = 0.0
        for phase, ms in (k.get("phase_ms_sum") or {}).items():
            phase_sum += ms or 0.0
            note(f"  phase {phase}, total (ms)", ms)
        if total:
            note("  outside the phases, total (ms)", round(total - phase_sum, 1))
    if s:
        note("kube-scheduler attempts", b=s.get("attempts"))
        note("  attempt, mean (ms)", b=s.get("attempt_ms_mean"))
    width = max(len(r[0]) for r in rows)
    a = report["args"]
    lines = [
        f"bench_kube: {wl['nodes']} nodes x {GPUS_PER_NODE} GPUs, {wl['pods']} one-GPU pods ({wl['single_pods']} "
        f"single, {wl['gang_pods']} in {wl['gangs']} gangs of {wl['gang_size_min']}-{wl['gang_size_max']}), "
        f"{wl['queues']} queues; client QPS {a['qps']:g} / burst {a['burst']} for both; {a['repeat']} repeat(s); "
        f"kaid's single-pod PodGroups: {'made by kaid' if a['podgroups'] == 'kaid' else 'created beforehand'}"
        + ("; kaid under cProfile" if a.get("kaid_profile") else ""),
        f"control plane: Kubernetes {m['versions'].get('kubernetes')}, etcd {m['versions'].get('etcd')}, kwok "
        f"{m['versions'].get('kwok')} on loopback; kube-scheduler has no gangs: it binds gang pods one by one",
        f"machine: {m['cpus']} CPUs, load average (1, 5, 15 min) {m['loadavg_before']} before, {m['loadavg']} after, "
        f"Python {m['python']}, engine at commit {m['commit']}"
        f"{' with uncommitted changes in kaid/' if m['kaid_uncommitted_changes'] else ''}",
        "raw: the same pods bound by a bare loop of pods/binding calls (kaid's actuator, client, QPS, burst and bind "
        "workers; no scheduling), after the schedulers on the same control plane: the ceiling" if w else
        "raw: not measured (--no-raw)",
        "",
        f"{'metric':<{width}}  {'kaid':>10}  {'kube-sched':>10}  {'kaid/kube':>10}  {'raw':>10}  {'kaid/raw':>10}",
        f"{'-' * width}  {'-' * 10}  {'-' * 10}  {'-' * 10}  {'-' * 10}  {'-' * 10}",
    ]
    lines += [f"{name:<{width}}  {fmt(x):>10}  {fmt(y):>10}  {fmt(r):>10}  {fmt(z):>10}  {fmt(q):>10}"
              for name, x, y, r, z, q in rows]
    ratios = report["ratios"]
    lines += ["", f"pods/s kaid/kube-scheduler: {fmt(ratios.get('pods_per_s'))} (target >= 2); "
                  f"kaid/raw: {fmt(ratios.get('kaid_raw_pods_per_s'))} (target >= 0.8); "
                  f"raw/kube-scheduler (the ceiling's own ratio): {fmt(ratios.get('raw_kube_pods_per_s'))}"]
    base = res.get(KAID_BASE)
    if base:
        lines += ["", f"A/B: kaid of this tree against kaid of {a.get('kaid_base')} ({KAID_BASE}), interleaved, "
                      "medians: " + "; ".join(
                          f"{name} {fmt(k.get(key))} / {fmt(base.get(key))} ({fmt(_ratio(k.get(key), base.get(key)))})"
                          for name, key in (("pods/s", "pods_per_s"), ("first bind s", "first_bind_s"),
                                            ("all bound s", "all_bound_s"), ("kaid CPU s", "scheduler_cpu_s"))),
                  "  pods/s run by run: " + "; ".join(
                      f"{r['run']} {r['scheduler']} {fmt(r.get('pods_per_s'))}" for r in report["runs"]
                      if _is_kaid(r["scheduler"]))]
    for r in report["runs"]:
        if _is_kaid(r["scheduler"]) and r.get("kaid_cycles"):
            shown = ", ".join(f"#{x['cycle']}: {x['bound']} bound in {x['ms']} ms" for x in r["kaid_cycles"][:8])
            lines.append(f"{r['scheduler']} cycles that bound pods ({r['run']}): {shown}")
    lines.append("(medians over the repeats; times from the scheduler's start, seen by one watch on the pods)")
    lines += _apiserver_table(res)
    return "\n".join(lines)


def _apiserver_table(res: Obj) -> list[str]:
    """What the API server did from each start to the last bind (its counters, every client together; medians):
    requests, watch events and their bytes, the answers' bytes (lists); the raw loop with kaid's watches beside."""
    columns = [(name, res[sched]) for sched, name in (("kaid", "kaid"), ("kube-scheduler", "kube-sched"),
                                                       (RAW, "raw"), (RAW_WATCHES, "raw+watches")) if sched in res]
    keys = sorted({k for _, r in columns for k in r.get("apiserver") or {}})
    shown: list[tuple[str, list[Any]]] = [
        (f"CPU s, {name}", [(r.get("cpu_s") or {}).get(name) for _, r in columns])
        for name in ("total", *CONTROL_PLANE, "scheduler", "benchmark") if any(r.get("cpu_s") for _, r in columns)]
    for key in keys:
        values = [(r.get("apiserver") or {}).get(key, 0) for _, r in columns]
        if "bytes" in key:
            if max(values) >= 100_000:
                shown.append((key.replace("bytes", "MB"), [round(v / 1e6, 1) for v in values]))
        elif max(values) >= 10:
            shown.append((key, values))
    if not shown:
        return []
    width = max(len(k) for k, _ in shown)
    lines = ["", "From the start to the last bind: each process's CPU (scheduler: kaid, kube-scheduler or the raw "
             "loop; benchmark: its watches) and kube-apiserver's work (its /metrics, every client together); medians:",
             f"{'counter':<{width}}" + "".join(f"  {name:>11}" for name, _ in columns)]
    lines += [f"{key:<{width}}" + "".join(f"  {fmt(v):>11}" for v in values) for key, values in shown]
    if RAW_WATCHES in res:
        w = res[RAW_WATCHES]
        lines.append(f"raw+watches: the raw loop with kaid's informers open in its process: {fmt(w.get('pods_per_s'))} "
                     f"pods/s, API server CPU beyond rest {fmt(w.get('apiserver_cpu_per_1000_binds'))} s per 1,000 "
                     "binds")
    return lines


def machine_and_versions() -> Obj:
    try:
        versions = pinned_versions()
    except (OSError, ControlPlaneError):
        versions = {}
    return {**machine_info(), "versions": versions}


def compile_kaid(tree: Path = REPO_ROOT) -> None:
    """kaid's bytecode, as an installed kaid has it (pip compiles a wheel's modules when it installs them;
    the image does too): otherwise every run would first compile kaid's sources, with PYTHONDONTWRITEBYTECODE
    set or without a writable tree, and the start would measure the compiler. Written to __pycache__ beside
    the sources (ignored by git), only for modules whose sources changed."""
    compileall.compile_dir(str(tree / "kaid"), quiet=1)


def _begin(cp: ControlPlane, wl: Workload, schedulers: Sequence[str], log: Callable[[str], None],
           kaid_base: Path | None = None) -> list[float]:
    """kaid's bytecode and the cluster; returns the load average before."""
    load_before = [round(x, 2) for x in os.getloadavg()]
    if "kaid" in schedulers:
        compile_kaid()
    if "kaid" in schedulers and kaid_base is not None:
        compile_kaid(kaid_base)
    prepare_cluster(cp, wl, log)
    return load_before


def run_benchmark(cp: ControlPlane, wl: Workload, opts: Options, repeat: int = 1,
                  schedulers: Sequence[str] = SCHEDULERS, args: Obj | None = None, raw: bool = True,
                  raw_watches: bool = False) -> Obj:
    """``prepare_cluster`` then ``repeat`` runs of each scheduler (alternating which goes first), each repeat
    followed by the raw bind loop (``raw``), and by it again with kaid's informers open (``raw_watches``)."""
    if repeat < 1:
        raise ValueError("--repeat must be at least 1")
    if opts.kaid_profile and repeat > 1:
        raise ValueError("--kaid-profile profiles one run: use --repeat 1")

    log = progress(not opts.progress, "bench_kube")
    load_before = _begin(cp, wl, schedulers, log, opts.kaid_base)
    runs: list[Obj] = []
    total = repeat * (len(schedulers) + raw + raw_watches)
    kinds = tuple(res.kind for res in API_RESOURCES)
    for r in range(repeat):
        order = list(schedulers) if r % 2 == 0 else list(schedulers)[::-1]
        for sched in order:
            last = len(runs) + 1 == total  # its namespace goes with the control plane: no wait for its deletion
            name = {"kaid": "kaid", KAID_BASE: "base"}.get(sched, "kube")
            runs.append(run_once(cp, wl, sched, opts, f"{name}{r}", log, clean_up=not last))
        raws = [()] * raw + [kinds] * raw_watches
        for watches in raws if r % 2 == 0 else raws[::-1]:
            runs.append(run_raw(cp, wl, opts, f"raw{'w' if watches else ''}{r}", log, clean_up=len(runs) + 1 < total,
                                watches=watches))
    results = summarise(runs)
    k, s, w = results.get("kaid", {}), results.get("kube-scheduler", {}), results.get(RAW, {})
    ratios = {key: _ratio(k.get(key), s.get(key)) for key in ("pods_per_s", "pods_per_s_binding", "all_bound_s",
                                                              "first_bind_s", "scheduler_cpu_s", "apiserver_cpu_s",
                                                              "scheduler_peak_rss_mb")}
    for key in ("pods_per_s", "pods_per_s_binding", "scheduler_cpu_s", "apiserver_cpu_s"):
        ratios[f"kaid_raw_{key}"] = _ratio(k.get(key), w.get(key))
    ratios["raw_kube_pods_per_s"] = _ratio(w.get("pods_per_s"), s.get("pods_per_s"))
    return {
        "benchmark": "bench_kube",
        "args": args or {},
        "machine": {**machine_and_versions(), "loadavg_before": load_before},
        "workload": wl.summary(),
        "results": results,
        "ratios": ratios,
        "runs": runs,
    }


def run_starts(cp: ControlPlane, wl: Workload, opts: Options, starts: int, schedulers: Sequence[str],
               args: Obj | None = None, startup_off: Sequence[str] = ()) -> Obj:
    """``--starts N``: only the cold start, N times per scheduler on the same backlog."""
    log = progress(not opts.progress, "bench_kube")
    load_before = _begin(cp, wl, schedulers, log, opts.kaid_base)
    results = {sched: measure_starts(cp, wl, sched, opts, starts, log, startup_off) for sched in schedulers}
    k, s = results.get("kaid", {}), results.get("kube-scheduler", {})
    return {"benchmark": "bench_kube --starts", "args": args or {},
            "machine": {**machine_and_versions(), "loadavg_before": load_before}, "workload": wl.summary(),
            "starts": results, "ratio_first_bind": _ratio(k.get("median_s"), s.get("median_s"))}


def format_starts(report: Obj) -> str:
    w, m = report["workload"], report["machine"]
    nth = (report.get("args") or {}).get("start_binds") or 1
    lines = [f"bench_kube --starts: start to first bind on a backlog of {w['pods']} pods ({w['gangs']} gangs) on "
             f"{w['nodes']} nodes; load {m['loadavg_before']} before, {m['loadavg']} after",
             f"{'scheduler':<24}{'median s':>10}{'min s':>8}{'max s':>8}  every start (s)"]
    for sched, r in report["starts"].items():
        for name, v in [(sched, r), *((f"  {k}", v) for k, v in r.get("startup_off", {}).items())]:
            lines.append(f"{name:<24}{fmt(v['median_s']):>10}{fmt(v['min_s']):>8}{fmt(v['max_s']):>8}  "
                         f"{', '.join(str(x) for x in v['first_bind_s'])}")
            if nth > 1:
                lines.append(f"{'    to bind ' + str(nth):<24}{fmt(v.get('nth_median_s')):>10}{'':>16}  "
                             f"{', '.join(str(x) for x in v.get('nth_bind_s') or ())}")
    lines.append(f"first bind ratio kaid/kube-scheduler (median): {fmt(report['ratio_first_bind'])} (lower is sooner)")
    return "\n".join(lines)


# ============================================================================================ main
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_kube",
                                description="kaid against kube-scheduler on one kwok control plane: time to bind "
                                            "a backlog of one-GPU pods and gangs.")
    p.add_argument("--nodes", type=int, default=500, help="fake GPU nodes of 8 GPUs (default 500)")
    p.add_argument("--pods", type=int, default=4000, help="one-GPU pods in all, gang members included (default 4000)")
    p.add_argument("--gangs", type=int, default=50, help="gangs among them (default 50)")
    p.add_argument("--gang-min", type=int, default=8, help="smallest gang, pods (default 8)")
    p.add_argument("--gang-max", type=int, default=64, help="largest gang, pods (default 64)")
    p.add_argument("--queues", type=int, default=4, help="leaf queues, equal GPU quotas (default 4)")
    p.add_argument("--qps", type=float, default=100.0, help="client QPS of both schedulers (default 100)")
    p.add_argument("--burst", type=int, help="client burst of both schedulers (default 2 x QPS)")
    p.add_argument("--cycle-period", type=float, default=1.0, help="kaid's cyclePeriodSeconds (default 1)")
    p.add_argument("--podgroups", choices=("kaid", "precreated"), default="kaid",
                   help="single pods' PodGroups: made by kaid's podgrouper (default), or created with the pods")
    p.add_argument("--schedulers", default="kaid,kube-scheduler",
                   help="comma-separated subset of kaid,kube-scheduler (default both)")
    p.add_argument("--repeat", type=int, default=1, help="runs per scheduler (default 1)")
    p.add_argument("--no-raw", action="store_true",
                   help="skip the raw bind loop (the ceiling: kaid's actuator binding the same pods, no scheduling)")
    p.add_argument("--raw-watches", action="store_true",
                   help="run the raw bind loop once more per repeat with kaid's informers (every list and watch kaid "
                        "makes, decoded as kaid does) open in its process: what kaid's watches cost the API server")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run to wait for every bind (default 900)")
    p.add_argument("--kaid-log-level", default="info", help="kaid's --log-level (default info)")
    p.add_argument("--kaid-profile", metavar="FILE",
                   help="run kaid under cProfile (its main thread), dump the stats to FILE and print the top functions")
    p.add_argument("--profile-top", type=int, default=25, help="functions listed per ordering (default 25)")
    p.add_argument("--keep-logs", metavar="DIR", help="copy kaid's and kube-scheduler's logs to DIR")
    p.add_argument("--kaid-base", metavar="DIR",
                   help="A/B: each repeat also runs kaid from the source tree DIR (as kaid-base), interleaved with "
                        "this tree's kaid, and reports the two side by side (e.g. a `git archive` of main)")
    p.add_argument("--starts", type=int, default=0, metavar="N",
                   help="instead of the runs: start each scheduler N times on the backlog, kill it at its first "
                        "bind, and report start-to-first-bind times (the part of the runs that differs)")
    p.add_argument("--start-binds", type=int, default=1, metavar="N",
                   help="with --starts: each start lasts until N binds are seen, and their time is reported too (the "
                        "start's binding, not only its first bind)")
    p.add_argument("--startup-off", default="", metavar="TRICK,...",
                   help="with --starts: also measure kaid with each of these start-up tricks off (kaid.kube.startup;"
                        " join several with +), interleaved with the plain starts")
    output_args(p)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    schedulers = [x.strip() for x in args.schedulers.split(",") if x.strip()]
    burst = args.burst if args.burst is not None else max(1, int(2 * args.qps))
    try:
        if not schedulers or any(x not in SCHEDULERS for x in schedulers):
            raise ValueError(f"--schedulers takes a comma-separated subset of {','.join(SCHEDULERS)}")
        if args.qps <= 0:
            raise ValueError("--qps must be positive")
        if args.kaid_profile and args.repeat > 1:
            raise ValueError("--kaid-profile profiles one run: use --repeat 1")
        if args.kaid_base and not (Path(args.kaid_base) / "kaid" / "__init__.py").is_file():
            raise ValueError(f"--kaid-base {args.kaid_base}: no kaid package there")
        if args.kaid_base and "kaid" not in schedulers:
            raise ValueError("--kaid-base goes with runs of kaid")
        if args.start_binds < 1 or (args.start_binds > 1 and not args.starts):
            raise ValueError("--start-binds goes with --starts and is at least 1")
        if args.starts < 0 or (args.starts and args.kaid_profile):
            raise ValueError("--starts takes a positive count and no --kaid-profile")
        unknown = {t for v in args.startup_off.split(",") for t in v.split("+") if t} - set(STARTUP_TRICKS)
        if unknown or (args.startup_off and not args.starts):
            raise ValueError(f"--startup-off goes with --starts and names tricks of {', '.join(STARTUP_TRICKS)}")
        if args.kaid_base and not args.starts:
            schedulers.insert(schedulers.index("kaid") + 1, KAID_BASE)
        wl = build_workload(args.nodes, args.pods, args.gangs, args.gang_min, args.gang_max, args.queues, args.seed)
    except ValueError as err:
        print(f"bench_kube: {err}", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="bench-kube-"))
    opts = Options(qps=args.qps, burst=burst, cycle_period=args.cycle_period, timeout=args.timeout,
                   podgroups=args.podgroups, kaid_log_level=args.kaid_log_level, kaid_profile=args.kaid_profile,
                   profile_top=args.profile_top, keep_logs=args.keep_logs, progress=not args.quiet, workdir=workdir,
                   kaid_base=Path(args.kaid_base).resolve() if args.kaid_base else None, start_binds=args.start_binds)
    arg_record = {"nodes": args.nodes, "pods": args.pods, "gangs": args.gangs, "gang_min": args.gang_min,
                  "gang_max": args.gang_max, "queues": args.queues, "qps": args.qps, "burst": burst,
                  "cycle_period": args.cycle_period, "podgroups": args.podgroups, "schedulers": schedulers,
                  "repeat": args.repeat, "seed": args.seed, "kaid_profile": args.kaid_profile, "raw": not args.no_raw,
                  "raw_watches": args.raw_watches, "kaid_base": args.kaid_base}
    cp = ControlPlane(bindir=ensure_binaries(), controller_manager_args=CONTROLLER_MANAGER_ARGS)
    try:
        cp.start()
        if args.starts:
            off = [v for v in args.startup_off.split(",") if v]
            report = run_starts(cp, wl, opts, args.starts, schedulers,
                                {**arg_record, "starts": args.starts, "startup_off": off,
                                 "start_binds": args.start_binds}, off)
        else:
            report = run_benchmark(cp, wl, opts, args.repeat, schedulers, arg_record, raw=not args.no_raw,
                                   raw_watches=args.raw_watches)
    except ValueError as err:
        print(f"bench_kube: {err}", file=sys.stderr)
        return 2
    finally:
        cp.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(format_starts(report) if args.starts else format_report(report))
    if args.kaid_profile and "kaid" in schedulers and Path(args.kaid_profile).exists():
        print(profile_text(args.kaid_profile, "kaid main thread", args.profile_top))
    write_report("bench_kube", report, args, bulky=("runs",))
    return 0


if __name__ == "__main__":
    sys.exit(main())
