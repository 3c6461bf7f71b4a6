"""The engine's model kept up to date from object events: the daemon's incremental snapshot.

``LiveModel`` takes the objects one by one as a watch reports them (``upsert``, ``delete``, ``resync`` after a
relist) and keeps, for each, what ``build_snapshot`` would read from it: a pod read once, a node with the pods that
hold resources on it accounted, a job with its pods, each queue's sums. An event marks what depends on its object
(a pod: its node, its job; a node: its pods' jobs when their GPU memory depends on it; an owner: the pods grouped
through it; a queue, a priority class or a topology: every job) and only that is read again when the next
snapshot is taken.

``snapshot`` hands out the model's own nodes, pods and jobs (queues are copied: there are few), with a
``Journal`` (``kaid.model.journal``) in which the cycle records every object it is about to change, as it was; the
model undoes that journal at its next call, before anything else. So a cycle costs a record per object it touches,
not a copy of every object, and the kept model never sees what a cycle decided. The snapshot must not be read once
the model has been called again (the daemon's status writer, which reads it on another thread, holds it:
``kaid.kube.livesnap``). ``LiveModel(shared=False)`` copies every object instead (a shallow copy of what a cycle
changes: a few microseconds an object), for a snapshot that must outlive the next call.

The snapshot is the one ``build_snapshot`` makes from the same objects in the same order (each kind in the order
it was first upserted, as a watch cache's dict keeps it): ``tests/test_live_model.py`` checks that on random
event sequences. Queue ``version`` counters differ (they only ever need to change within a cycle).

A node or a PodGroup of another scheduling shard (``kaid.model.partition``) is held in its place and read as absent;
a label that moves it out of the partition reads as its delete, one that moves it in as its add (a Queue's too: the
queues are read again as a whole)."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Any, TypeVar

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import SchedulerConfig
from kaid.model.build import complete_job, node_gone, other_scheduler, place_pod, pod_role, succeeded_ours
from kaid.model.fingerprint import ObjectParts, accounted, job_part, label_part, node_part, pod_part
from kaid.model.grouping import OWNER_KINDS, OwnerIndex, group_for_pod, owner_chain
from kaid.model.jobs import check_min_member, job_for_pod, read_podgroup
from kaid.model.journal import Journal
from kaid.model.nodes import hold_other, hold_reserved_device, occupy, read_node, reference_node
from kaid.model.objects import (
    UNWRITTEN,
    Budget,
    Job,
    Node,
    ObjectProblem,
    Pod,
    PriorityClass,
    Queue,
    Reason,
    Snapshot,
    malformed,
    own_errors,
    zero,
)
from kaid.model.partition import Partition, workload_owner
from kaid.model.pods import claims, is_reservation_pod, read_pod
from kaid.model.policy import read_budgets, read_priority_classes, read_topologies
from kaid.model.queues import pod_vector, read_queues
from kaid.model.selectors import Terms
from kaid.model.vocabulary import BOUND_OR_RUNNING, GPU, PodStatus
from kaid.model.volumes import ClaimModes, bound_claim, read_claims

Obj = dict[str, Any]
_R = (0, 1, 2)  # GPU, CPU, MEM as plain indices (an IntEnum index costs a call each time)
# kinds kept as plain objects, read again as a whole when one of them changes (there are few)
_POLICY = {"PriorityClass", "Topology", "PodDisruptionBudget"}


class _PodEntry:
    """One pod object and what the model read from it."""

    __slots__ = ("chain", "claims", "done", "foreign", "group", "included", "job", "node", "obj", "placed",
                 "problems", "rank", "reservation", "seq", "tpl", "waiting")

    def __init__(self, obj: Obj, seq: int) -> None:
        self.obj = obj
        self.seq = seq
        self.placed: Pod | None = None  # read and placed (status, node), before its node accounts it
        self.tpl: Pod | None = None  # as the snapshot has it: accounted on its node (devices, GPU group)
        self.problems: list[Reason] = []
        self.rank: int | None = None  # holds resources on ``node`` (when that node exists), in this order
        self.node: str | None = None
        self.included = False  # one of this scheduler's pods, in a job
        self.reservation = False
        self.group = ""  # a reservation pod's GPU group
        self.job: str | None = None
        self.chain: tuple[tuple[str, str, str], ...] = ()  # the owners looked up to group it
        self.waiting = ""  # its uid, while it is a pending shared-GPU pod (reservations wait for it)
        self.done: str | None = None  # the job of one of this scheduler's pods that has succeeded (``job_done``)
        self.foreign: str | None = None  # the PodGroup it names, while that is another shard's (``foreign_pods``)
        self.claims: tuple[str, ...] = ()  # the keys of the claims its volumes use (``claim_pods``)


class _JobEntry:
    """A job as read from its PodGroup and its pods (pods by key, in the job's order), and what it adds to its
    queue."""

    __slots__ = ("alloc_np", "allocated", "job", "keys", "queue", "requested")

    def __init__(self, job: Job, keys: list[str]) -> None:
        self.job = job
        self.keys = keys
        self.queue: str | None = None  # the queue it is accounted in (None: no such queue)
        self.requested = zero()
        self.allocated = zero()
        self.alloc_np = zero()


class LiveModel:
    """The objects of a cluster and the engine's model of them, kept up to date one event at a time."""

    def __init__(self, config: SchedulerConfig | None = None, wait_for_owners: bool = False,
                 shared: bool = True) -> None:
        self.cfg = config or SchedulerConfig()
        self.part = Partition(self.cfg)
        self.wait_for_owners = wait_for_owners
        self.shared = shared  # snapshots hand out the model's own objects, with a journal (else copies)
        self.journal: Journal | None = None  # the last shared snapshot's: undone at the next call
        self._seq = 0
        self.pods: dict[str, _PodEntry] = {}
        self.nodes: dict[str, Obj] = {}  # by name
        self.node_seq: dict[str, int] = {}
        self.podgroups: dict[str, Obj] = {}  # by key (namespace/name): the key of its job
        self.queue_objs: dict[str, Obj] = {}
        self.policy: dict[str, dict[str, Obj]] = {k: {} for k in _POLICY}
        self.namespaces: dict[str, Obj] = {}
        self.owners: OwnerIndex = {}
        self.volumes: dict[str, Obj] = {}  # PersistentVolumes by name
        self.bound: dict[str, Terms] = {}  # claim key -> the node affinity of the volume bound to it (``bound_claim``)
        self.volume_claims: dict[str, str] = {}  # volume name -> the claim it is bound to, in ``bound``
        self.claim_pods: dict[str, set[str]] = {}  # claim key -> the pods whose volumes use it
        self.claim_objs: dict[str, Obj] = {}  # PersistentVolumeClaims by key
        self.classes: dict[str, Obj] = {}  # StorageClasses by name
        self.claim_modes = ClaimModes(())  # how they bind their claims (made again when one changes)
        # the objects held that are another shard's (``kaid.model.partition``): as if absent, but kept in their place
        self.foreign_nodes: set[str] = set()
        self.foreign_pgs: set[str] = set()
        self.foreign_pods: dict[str, set[str]] = {}  # another shard's PodGroup -> this scheduler's pods naming it
        # what is derived
        self.node_tpl: dict[str, Node] = {}
        self.node_pods: dict[str, set[str]] = {}  # node name -> pods placed on it (holding or not)
        self.job_pods: dict[str, set[str]] = {}  # job key -> its pods
        self.job_done: dict[str, set[str]] = {}  # job key -> its pods that have succeeded (``Job.succeeded``)
        self.owner_pods: dict[tuple[str, str, str], set[str]] = {}  # owner looked up -> pods grouped through it
        self.jobs: dict[str, _JobEntry] = {}
        self.mem_jobs: set[str] = set()  # jobs with gpu-memory pods: their GPU share depends on the nodes
        self.waiting: dict[str, int] = {}  # uids of pending shared-GPU pods
        self.reserved: dict[str, set[str]] = {}  # a uid that may open a reservation's GPU group -> its nodes
        self.queues: dict[str, Queue] = {}
        self.queue_problems: list[ObjectProblem] = []
        self.node_problems: dict[str, ObjectProblem] = {}  # node -> why its GPUs are not read, or it is left out
        # the objects whose reading raised (``malformed``): left out as a cold build leaves them out, until they change
        self.pod_problems: dict[str, ObjectProblem] = {}  # pod key -> its problem
        self.pg_problems: dict[str, ObjectProblem] = {}  # PodGroup key -> its problem (its pods read as naming none)
        self.pcs: dict[str, PriorityClass] = {}
        self.topologies: dict[str, list[str]] = {}
        self.topology_aliases: dict[str, dict[str, str]] = {}  # topology -> alias -> node label
        self.policy_problems: list[ObjectProblem] = []
        self.budget_problems: list[ObjectProblem] = []
        self.budgets: list[Budget] = []
        self.sorted_nodes: list[str] | None = None
        self.ref: Node | None = None
        # what changed since the last snapshot
        self.dirty_pods: set[str] = set()
        self.dirty_nodes: set[str] = set()
        self.dirty_jobs: set[str] = set()
        self.relink: set[str] = set()  # jobs whose pods list is to be made again (a pod read again, or its node)
        # what the snapshots hand out, kept while nothing it depends on changes
        self.job_order: list[str] | None = None  # the jobs' keys as a cold build orders them
        self.job_view: dict[str, Job] | None = None  # the jobs in that order
        self.pod_view: list[Pod] | None = None  # this scheduler's pods (their templates) in the model's order
        self.queue_jobs: dict[str, list[Job]] = {}  # the queue jobs name -> those jobs, sorted as a queue's are
        self.queues_dirty = True
        self.policy_dirty = True
        self.all_jobs_dirty = False
        self.ref_dirty = False
        self._direct: dict[str, tuple[list[int], list[int], list[int]]] = {}  # queue -> its own jobs' sums
        # the fingerprint of the nodes, pods and jobs a snapshot hands out (``kaid.model.fingerprint``): each one's
        # part as last read, and those read again (or gone) since, whose parts are worked out again after a refresh
        self.parts = ObjectParts()
        self.node_parts: dict[str, int] = {}
        self.pod_parts: dict[str, tuple[int, str, int]] = {}  # pod key -> (its part, its namespace, its labels')
        self.job_parts: dict[str, int] = {}
        self.touched_nodes: set[str] = set()
        self.touched_pods: set[str] = set()
        self.touched_jobs: set[str] = set()
        self.hashed_order: list[str] | None = None  # the job order ``parts.order`` is the hash of

    # ------------------------------------------------------------------------------------------------ events
    def upsert(self, obj: Obj) -> None:
        """An object added or changed (the same dict again is a no-op). A pod or a PodGroup without a name or a
        namespace is left out: ValueError (after the other items of a List)."""
        if self.journal is not None:
            self.take_back()
        kind = obj.get("kind")
        if kind == "List":
            self._upsert_all([item for item in obj.get("items") or [] if isinstance(item, dict)])
            return
        if not isinstance(kind, str):
            return  # (no kind the model reads, as a cold build skips it)
        key = meta.store_key(obj)
        if (key[0] == "/" or key[-1] == "/") and kind in _JOB_KINDS:  # (``namespace/name`` without one of them)
            raise ValueError(f"a {kind} object {_unkeyed(obj)}: left out (the API server gives every one both)")
        if kind == "Pod":
            entry = self.pods.get(key)
            if entry is None:
                self._seq += 1
                self.pods[key] = _PodEntry(obj, self._seq)
            elif entry.obj is obj:
                return
            else:
                entry.obj = obj
            self.dirty_pods.add(key)
        elif kind == "Node":
            name = meta.name(obj)
            if self.nodes.get(name) is obj:
                return
            if name not in self.nodes:
                self._seq += 1
                self.node_seq[name] = self._seq
                self.sorted_nodes = None
            if self.part.takes_node(obj) == (name in self.foreign_nodes):  # into the partition or out of it
                self.foreign_nodes ^= {name}
                self.sorted_nodes = None
            self.nodes[name] = obj
            self._node_changed(name)
        elif kind == "PodGroup":
            if self.podgroups.get(key) is obj:
                return
            if key not in self.podgroups:
                self.job_order = None
                self.dirty_pods |= self.foreign_pods.get(key, set())  # (those of its workload, in another shard)
            if self.part.takes_podgroup(obj) == (key in self.foreign_pgs):
                self._pg_moved(key)
            self.podgroups[key] = obj
            self.dirty_jobs.add(key)
        elif kind == "Queue":
            self.queue_objs[key] = obj
            self.queues_dirty = True
        elif kind == "PersistentVolume":
            name = meta.name(obj)
            if self.volumes.get(name) is not obj:
                self.volumes[name] = obj
                self._volume_changed(name, obj)
        elif kind == "PersistentVolumeClaim":
            claim = meta.object_key(obj)
            if self.claim_objs.get(claim) is not obj:
                self.claim_objs[claim] = obj
                self.dirty_pods |= self.claim_pods.get(claim, set())
        elif kind == "StorageClass":
            self.classes[meta.name(obj)] = obj
            self._classes_changed()
        elif kind in _POLICY:
            self.policy[str(kind)][key] = obj
            self.policy_dirty = True
        elif kind == "Namespace":
            self.namespaces[meta.name(obj)] = obj
            self.all_jobs_dirty = True
        elif kind in OWNER_KINDS:
            okey = (meta.namespace(obj), str(kind), meta.name(obj))
            if self.owners.get(okey) is obj:
                return
            self.owners[okey] = obj
            self._owner_changed(okey)

    def delete(self, kind: str, key: str) -> None:
        """An object deleted: ``key`` is its watch-cache key (``meta.store_key``: ``namespace/name``, an empty
        namespace for cluster-scoped objects)."""
        if self.journal is not None:
            self.take_back()
        if kind == "Pod":
            entry = self.pods.pop(key, None)
            if entry is not None:
                self._unplace(key, entry)
        elif kind == "Node":
            name = key.rpartition("/")[2]
            if self.nodes.pop(name, None) is not None:
                self.foreign_nodes.discard(name)
                self.node_seq.pop(name, None)
                self.sorted_nodes = None
                self._node_changed(name)
        elif kind == "PodGroup":
            if self.podgroups.pop(key, None) is not None:
                if key in self.foreign_pgs:
                    self._pg_moved(key)
                elif self.part.key:  # its workload's pods that name none: their labels decide again
                    self.dirty_pods |= self.job_pods.get(key, set())
                self.job_order = None
                self.dirty_jobs.add(key)
        elif kind == "Queue":
            if self.queue_objs.pop(key, None) is not None:
                self.queues_dirty = True
        elif kind == "PersistentVolume":
            name = key.rpartition("/")[2]
            if self.volumes.pop(name, None) is not None:
                self._volume_changed(name, None)
        elif kind == "PersistentVolumeClaim":
            ns, _, name = key.partition("/")
            claim = f"{ns or meta.DEFAULT_NAMESPACE}/{name}"
            if self.claim_objs.pop(claim, None) is not None:
                self.dirty_pods |= self.claim_pods.get(claim, set())
        elif kind == "StorageClass":
            if self.classes.pop(key.rpartition("/")[2], None) is not None:
                self._classes_changed()
        elif kind in _POLICY:
            if self.policy[kind].pop(key, None) is not None:
                self.policy_dirty = True
        elif kind == "Namespace":
            if self.namespaces.pop(key.rpartition("/")[2], None) is not None:
                self.all_jobs_dirty = True
        elif kind in OWNER_KINDS:
            ns, _, name = key.partition("/")
            okey = (ns or meta.DEFAULT_NAMESPACE, kind, name)
            if self.owners.pop(okey, None) is not None:
                self._owner_changed(okey)

    def resync(self, kind: str, objects: Iterable[Obj]) -> None:
        """Every object of ``kind`` as a new list has them (after a relist: ``410 Gone``, a restarted watch): those
        missing are deleted, the rest upserted, and the kind's order becomes the list's."""
        if self.journal is not None:
            self.take_back()
        objs = [o for o in objects if isinstance(o, dict)]
        for o in objs:
            o.setdefault("kind", kind)
        keep = {meta.store_key(o) for o in objs}
        for key in [k for k in self._keys(kind) if k not in keep]:
            self.delete(kind, key)
        if kind == "Pod":  # a new order: every pod entry afresh (as a cold build would read them)
            for key, entry in list(self.pods.items()):
                self._unplace(key, entry)
                del self.pods[key]
        elif kind == "Node":
            for name in list(self.nodes):
                self.delete("Node", f"/{name}")
        elif kind == "PodGroup":
            self.dirty_jobs.update(self.podgroups)
            for key in list(self.foreign_pgs):
                self._pg_moved(key)
            self.podgroups = {}
            self.job_order = None
        elif kind == "Queue":
            self.queue_objs = {}
            self.queues_dirty = True
        elif kind in _POLICY:
            self.policy[kind] = {}
            self.policy_dirty = True
        self._upsert_all(objs)

    def _upsert_all(self, objs: list[Obj]) -> None:
        """Each object upserted; the first error raised once all are (one bad object stops no other)."""
        first: Exception | None = None
        for o in objs:
            try:
                self.upsert(o)
            except Exception as err:
                first = first or err
        if first is not None:
            raise first

    def _keys(self, kind: str) -> list[str]:
        if kind == "Pod":
            return list(self.pods)
        if kind == "Node":
            return [f"/{n}" for n in self.nodes]
        if kind == "PodGroup":
            return list(self.podgroups)
        if kind == "Queue":
            return list(self.queue_objs)
        if kind == "PersistentVolume":
            return [f"/{n}" for n in self.volumes]
        if kind == "PersistentVolumeClaim":
            return list(self.claim_objs)
        if kind == "StorageClass":
            return [f"/{n}" for n in self.classes]
        if kind in _POLICY:
            return list(self.policy[kind])
        if kind == "Namespace":
            return [f"/{n}" for n in self.namespaces]
        return [f"{ns}/{name}" for ns, k, name in self.owners if k == kind]

    def take_back(self) -> None:
        """Undo what the cycle on the last snapshot changed on the model's objects (its journal)."""
        if self.journal is not None:
            self.journal.undo()
            self.journal = None

    def objects(self) -> list[Obj]:
        """Every object held, each kind in the model's order: ``build_snapshot`` of these is ``snapshot``."""
        out: list[Obj] = [e.obj for e in self.pods.values()]
        out += sorted(self.nodes.values(), key=lambda o: self.node_seq[meta.name(o)])
        out += [*self.podgroups.values(), *self.queue_objs.values(), *self.namespaces.values(),
                *self.owners.values(), *self.volumes.values(), *self.claim_objs.values(), *self.classes.values()]
        for objs in self.policy.values():
            out += objs.values()
        return out

    def pod_objects(self, job: str) -> list[Obj]:
        """The objects of a job's pods (this scheduler's, live), in the model's order."""
        entries = [self.pods[k] for k in self.job_pods.get(job, ()) if k in self.pods]
        return [e.obj for e in sorted(entries, key=lambda e: e.seq)]

    def implicit_jobs(self) -> list[str]:
        """The jobs of pods that no PodGroup object names (the daemon makes their PodGroups)."""
        return [k for k in self.job_pods if k not in self.podgroups]

    # -------------------------------------------------------------------------------------------- marking
    def _node_changed(self, name: str) -> None:
        self.dirty_nodes.add(name)
        self.ref_dirty = True
        self.dirty_jobs |= self.mem_jobs  # their GPU share reads the nodes' GPU memory

    def _pg_moved(self, key: str) -> None:
        """A PodGroup into another shard's partition or out of it (or gone from it): the pods that name it are read
        again, in its job or out of every job."""
        self.foreign_pgs ^= {key}
        self.dirty_pods |= self.job_pods.get(key, set()) | self.foreign_pods.get(key, set())
        self.job_order = None

    def _volume_changed(self, name: str, obj: Obj | None) -> None:
        """A PersistentVolume added, changed or gone (None): the pods of the claim it was bound to, and of the one it
        is bound to now, are read again (``kaid.model.volumes``)."""
        was = self.volume_claims.pop(name, None)
        if was is not None:
            self.bound.pop(was, None)
            self.dirty_pods |= self.claim_pods.get(was, set())
        found = bound_claim(obj) if obj is not None else None
        if found is not None:
            claim, terms = found
            self.volume_claims[name] = claim
            self.bound[claim] = terms
            self.dirty_pods |= self.claim_pods.get(claim, set())

    def _classes_changed(self) -> None:
        """A StorageClass added, changed or gone: every pod with a claim is read again (there are few classes, and
        they change seldom)."""
        self.claim_modes = ClaimModes(self.classes.values())
        for pods in self.claim_pods.values():
            self.dirty_pods |= pods

    def _owner_changed(self, okey: tuple[str, str, str]) -> None:
        self.dirty_pods |= self.owner_pods.get(okey, set())  # grouped again: their job may be another

    def _unplace(self, key: str, entry: _PodEntry) -> None:
        """Take a pod out of the indexes (it is read again, or gone)."""
        self.dirty_pods.discard(key)
        self.touched_pods.add(key)
        if entry.node is not None:
            pods = self.node_pods.get(entry.node)
            if pods is not None:
                pods.discard(key)
            if entry.rank is not None:
                self.dirty_nodes.add(entry.node)
            if entry.group:
                self._index_reservation(entry.group, entry.node, -1)
        if entry.job is not None:
            members = self.job_pods.get(entry.job)
            if members is not None:
                members.discard(key)
                if not members:
                    del self.job_pods[entry.job]
                if not members or not self._named(entry.job):  # (its first pod may be another)
                    self.job_order = None
            self.dirty_jobs.add(entry.job)
        for okey in entry.chain:
            _drop(self.owner_pods, okey, key)
        for claim in entry.claims:
            _drop(self.claim_pods, claim, key)
        entry.claims = ()
        if entry.foreign is not None:
            _drop(self.foreign_pods, entry.foreign, key)
        if entry.waiting:
            self._wait(entry.waiting, -1)
        if entry.done is not None:
            _drop(self.job_done, entry.done, key)
            self.dirty_jobs.add(entry.done)
        entry.node = entry.job = entry.done = entry.foreign = None
        entry.rank = None
        entry.chain = ()
        entry.waiting = entry.group = ""
        entry.included = entry.reservation = False
        entry.tpl = None
        self.pod_view = None
        if self.pod_problems:
            self.pod_problems.pop(key, None)

    def _named(self, job: str) -> bool:
        """Whether a PodGroup object read as one names the job (else its first pod places it in the job order)."""
        return job in self.podgroups and job not in self.pg_problems

    def _wait(self, uid: str, sign: int) -> None:
        n = self.waiting.get(uid, 0) + sign
        if n > 0:
            self.waiting[uid] = n
        else:
            self.waiting.pop(uid, None)
        if (n > 0) != (n - sign > 0):  # waiting or no longer: the reservations it may open are held otherwise
            self.dirty_nodes |= self.reserved.get(uid, set())

    def _index_reservation(self, group: str, node: str, sign: int) -> None:
        for opener in {group, group.rpartition("-")[0]}:
            nodes = self.reserved.setdefault(opener, set())
            if sign > 0:
                nodes.add(node)
            else:
                nodes.discard(node)
                if not nodes:
                    del self.reserved[opener]

    # ------------------------------------------------------------------------------------------- reading
    def _read_pod(self, key: str, entry: _PodEntry) -> None:
        """Read (or group again) one pod; its old node and job, and its new ones, are marked. A pod whose reading
        raises is left out (it holds nothing, in no job), its problem kept until it changes, as a cold build leaves
        it out: one bad object does not stop every snapshot."""
        self._unplace(key, entry)
        entry.placed = None
        try:
            self._read_pod_object(key, entry)
        except Exception as err:
            self._unplace(key, entry)  # (what it indexed before it raised)
            entry.placed = None
            self.pod_problems[key] = malformed("Pod", entry.obj, err)

    def _read_pod_object(self, key: str, entry: _PodEntry) -> None:
        obj = entry.obj
        wanted, ours = pod_role(obj, self.cfg)
        if not wanted:
            if succeeded_ours(obj, self.cfg.schedulerName):  # counted for its job, nothing more (``Job.succeeded``)
                entry.done = job = self._job_key(key, entry, obj, meta.namespace(obj))
                self.job_done.setdefault(job, set()).add(key)
                self.dirty_jobs.add(job)
            return
        entry.problems = []
        placed = read_pod(obj, entry.problems)
        names = claims(obj) if (obj.get("spec") or _NO_SPEC).get("volumes") else ()  # (most pods: none)
        if names:  # (indexed, so that a volume bound to one of them reads the pod again)
            entry.claims = tuple(f"{placed.namespace}/{n}" for n in names)
            for claim in entry.claims:
                self.claim_pods.setdefault(claim, set()).add(key)
            waits = read_claims(placed, names, self.bound, self.claim_objs, self.claim_modes)
            if waits is not None:
                entry.problems.append(waits)
        if self.part.restrict:
            self.part.pod_role(placed)
        entry.reservation = is_reservation_pod(obj, self.cfg.gpuSharing)
        pg_name: str | None = None  # (read once here for ``_job_key``)
        job_key: str | None = ""  # (its job's key, where the partition's check has found it)
        if ours and not entry.reservation and (self.part.key or self.foreign_pgs):
            pg_name = meta.annotation(obj, c.POD_GROUP_ANNOTATION)
            if self.foreign_pgs or not pg_name:
                job_key = self._in_partition(key, entry, obj, placed.namespace, pg_name)
            if job_key is None:
                ours = False  # another shard's: what it holds on a node of the partition, nothing more
                if not placed.node:
                    return
        entry.rank = (1 if placed.node else None) if entry.reservation else place_pod(obj, placed, ours)
        entry.placed = placed
        entry.tpl = placed
        self.pod_view = None
        entry.node = placed.node
        if entry.node is not None:
            self.node_pods.setdefault(entry.node, set()).add(key)
            if entry.rank is not None:
                self.dirty_nodes.add(entry.node)
            if entry.reservation and placed.gpu_group:
                entry.group = placed.gpu_group
                self._index_reservation(entry.group, entry.node, 1)
        if entry.reservation or not ours or (not placed.node and placed.releasing):
            return
        entry.included = True
        entry.job = job = self._job_key(key, entry, obj, placed.namespace, pg_name, job_key or "")
        members = self.job_pods.get(job)
        if members is None or job not in self.podgroups or job in self.pg_problems:  # (``_named``)
            self.job_order = None
        self.job_pods.setdefault(job, set()).add(key)
        self.dirty_jobs.add(job)
        if placed.status == PodStatus.PENDING and placed.frac_devices:
            entry.waiting = placed.uid
            self._wait(placed.uid, 1)

    def _in_partition(self, key: str, entry: _PodEntry, obj: Obj, namespace: str, pg_name: str) -> str | None:
        """``build.in_partition``: its job's key, or None out of the partition; a pod out of it is indexed by what put
        it out: the PodGroup it names (``foreign_pods``), else the owners looked up (``owner_pods``). ``pg_name``: its
        PodGroup annotation."""
        if pg_name:
            pg = f"{namespace}/{pg_name}"
            if pg not in self.foreign_pgs:
                return pg
        else:
            info = group_for_pod(obj, self.owners)
            pg = f"{namespace}/{info.name}"
            if pg not in self.foreign_pgs and (pg in self.podgroups or
                                               self.part.takes_owned(obj, workload_owner(obj, info, self.owners))):
                return pg
            entry.chain = _owner_chain(obj, self.owners)
            for okey in entry.chain:
                self.owner_pods.setdefault(okey, set()).add(key)
        entry.foreign = pg  # (a PodGroup of that name in the partition would take it)
        self.foreign_pods.setdefault(pg, set()).add(key)
        return None

    def _job_key(self, key: str, entry: _PodEntry, obj: Obj, namespace: str, pg_name: str | None = None,
                 known: str = "") -> str:
        """The key of the pod's job: the PodGroup it names, else its workload's (the owners looked up are indexed,
        so that the pod is grouped again when one of them changes). ``pg_name``: its PodGroup annotation, where the
        caller has read it; ``known``: the key, where the caller has found it (``_in_partition``)."""
        if pg_name is None:
            pg_name = meta.annotation(obj, c.POD_GROUP_ANNOTATION)
        if pg_name:
            return f"{namespace}/{pg_name}"
        entry.chain = _owner_chain(obj, self.owners)
        for okey in entry.chain:
            self.owner_pods.setdefault(okey, set()).add(key)
        return known or f"{namespace}/{group_for_pod(obj, self.owners).name}"

    def _read_node(self, name: str) -> None:
        """A node with the pods that hold resources on it accounted, in a cold build's order."""
        obj = None if name in self.foreign_nodes else self.nodes.get(name)  # (another shard's: as if absent)
        self.touched_nodes.add(name)
        keys = [k for k in self.node_pods.get(name, ()) if k in self.pods]
        holders = [self.pods[k] for k in keys]
        before = [e.tpl for e in holders]
        self.relink.update(e.job for e in holders if e.job is not None)  # their pods are made again here
        self.pod_view = None
        was = name in self.node_tpl
        self._account(name, obj, holders)
        if (name in self.node_tpl) != was:  # (a node read, or left out: absent, another shard's, malformed)
            self.sorted_nodes = None
        # the parts again of the templates that differ from the last ones (made from the same reading of the pod,
        # else the pod was read again and touched then: ``_unplace``) in what accounting writes; 6,979 pods were
        # hashed again for 495 changed in the steady cycle at 4,000 nodes (issue 15)
        self.touched_pods.update(k for k, old, e in zip(keys, before, holders, strict=True)
                                 if old is None or e.tpl is None or accounted(old) != accounted(e.tpl))

    def _account(self, name: str, obj: Obj | None, holders: list[_PodEntry]) -> None:
        """The node read from ``obj`` and the templates of the pods it holds made again from what was read of them
        (``_PodEntry.placed``): copies with what the node's accounting writes (``fingerprint.accounted``)."""
        if obj is None:  # (no such node, or not yet): its pods hold nothing, those bound there are NODE_GONE
            self.node_tpl.pop(name, None)
            self.node_problems.pop(name, None)
            for e in holders:
                e.tpl = e.placed
                if e.rank is not None and e.placed is not None and e.placed.status in BOUND_OR_RUNNING:
                    e.tpl = e.placed.copy()
                    node_gone(e.tpl)
            return
        bad: list[ObjectProblem] = []
        try:
            node = read_node(obj, bad)
        except Exception as err:  # (left out, as a cold build leaves it out: its pods are NODE_GONE)
            self._account(name, None, holders)
            self.node_problems[name] = malformed("Node", obj, err, namespaced=False)
            return
        node.roles = self.part.node_roles(node.labels)
        if bad:
            self.node_problems[name] = bad[0]
        else:
            self.node_problems.pop(name, None)
        holders = sorted(holders, key=lambda e: (e.rank if e.rank is not None else 9, e.seq))
        reservations: list[Pod] = []
        scheduler = self.cfg.schedulerName
        for e in holders:
            if e.rank is None or e.placed is None:
                e.tpl = e.placed
                continue
            pod = e.placed.copy()
            if e.reservation:
                pod.gpu_whole = 0
                reservations.append(pod)
            elif not e.included and other_scheduler(e.obj.get("spec") or _NO_SPEC, scheduler):
                hold_other(node, pod)
            occupy(node, pod)
            e.tpl = pod
        for pod in reservations:
            if pod.gpu_group and not (pod.gpu_group in self.waiting or
                                      pod.gpu_group.rpartition("-")[0] in self.waiting):
                hold_reserved_device(node, pod.gpu_group)
        self.node_tpl[name] = node

    def _read_job(self, key: str) -> None:
        old = self.jobs.pop(key, None)
        self.job_view = None
        self.touched_jobs.add(key)
        if old is not None:
            filed = self.queue_jobs[old.job.queue]
            del filed[bisect_left(filed, _job_rank(old.job), key=_job_rank)]
        if old is not None and old.queue is not None:
            self._charge(old, -1)
        self.mem_jobs.discard(key)
        pg = None if key in self.foreign_pgs else self.podgroups.get(key)
        was_bad = self.pg_problems.pop(key, None) is not None
        jobs: dict[str, Job] = {}
        if pg is not None:
            try:
                read_podgroup(pg, jobs)
            except Exception as err:  # (left out, as a cold build leaves it out: its pods read as naming none)
                self.pg_problems[key] = malformed("PodGroup", pg, err)
                jobs, pg = {}, None
        if was_bad != (key in self.pg_problems):
            self.job_order = None
        members = sorted((self.pods[k] for k in self.job_pods.get(key, ()) if k in self.pods), key=lambda e: e.seq)
        if pg is None and not members:
            return
        for e in members:
            assert e.placed is not None
            job = job_for_pod(e.obj, e.placed, jobs, self.owners, self.namespaces, self.cfg, self.wait_for_owners)
            if e.problems:
                own_errors(job).extend(e.problems)
            job.pods.append(e.placed)
        job = jobs[key]
        job.succeeded = len(self.job_done.get(key, ()))
        complete_job(job, self.queues, self.pcs, self.topologies, self.topology_aliases)
        check_min_member(jobs, self.owners)
        entry = _JobEntry(job, [p.key for p in job.pods])
        if any(p.gpu_mem_mib and p.frac_devices for p in job.pods):
            self.mem_jobs.add(key)
        if job.queue in self.queues:
            entry.queue = job.queue
            request = 0
            for pod in job.pods:
                if pod.releasing:
                    continue
                node = self.node_tpl.get(pod.node) if pod.node else self.ref
                vec = pod_vector(pod, node)
                request += vec[GPU]
                for r in _R:
                    entry.requested[r] += vec[r]
                if pod.active:
                    for r in _R:
                        entry.allocated[r] += vec[r]
                        if not job.preemptible:
                            entry.alloc_np[r] += vec[r]
            job.request_milli = request
            self._charge(entry, 1)
        job.pods = []  # the pods' templates, once the nodes have accounted them (``relink``)
        self.jobs[key] = entry
        self.relink.add(key)
        insort(self.queue_jobs.setdefault(job.queue, []), job, key=_job_rank)

    def _charge(self, entry: _JobEntry, sign: int) -> None:
        q = self._direct.setdefault(str(entry.queue), (zero(), zero(), zero()))
        for r in _R:
            q[0][r] += sign * entry.requested[r]
            q[1][r] += sign * entry.allocated[r]
            q[2][r] += sign * entry.alloc_np[r]

    # ------------------------------------------------------------------------------------------ snapshot
    def refresh(self, implicit: bool = True) -> None:
        """Read again what the events since the last call changed. ``implicit`` False: the jobs that no PodGroup names
        are left to a later call (their PodGroups are about to be made from memory: read once, with them; bench_kube's
        start read 2,141 jobs twice)."""
        if self.journal is not None:
            self.take_back()
        if self.policy_dirty:
            problems: list[ObjectProblem] = []
            self.pcs = read_priority_classes(list(self.policy["PriorityClass"].values()), problems)
            self.topology_aliases = {}
            self.topologies = read_topologies(list(self.policy["Topology"].values()), problems, self.topology_aliases)
            self.policy_problems = problems
            self.budget_problems = []
            self.budgets = read_budgets(list(self.policy["PodDisruptionBudget"].values()), self.budget_problems)
            self.all_jobs_dirty = True
            self.policy_dirty = False
        if self.queues_dirty:
            problems = []
            self.queues = read_queues([q for q in self.queue_objs.values() if self.part.takes(q)], problems,
                                      self.cfg.unmentionedQueueResources == "unmanaged")
            for q in self.queues.values():
                problems.extend(ObjectProblem("Queue", q.name, None, err) for err in q.errors)
            self.queue_problems = problems
            self.all_jobs_dirty = True
            self.queues_dirty = False
        for key in list(self.dirty_pods):
            entry = self.pods.get(key)
            if entry is not None:
                self._read_pod(key, entry)
        self.dirty_pods.clear()
        if self.dirty_nodes:
            for name in self.dirty_nodes:
                self._read_node(name)
            self.dirty_nodes = set()
        if self.sorted_nodes is None:
            self.sorted_nodes = sorted(n for n in self.nodes if n in self.node_tpl)  # (those read: ``_account``)
        if self.ref_dirty:
            self.ref = reference_node([self.node_tpl[n] for n in self.sorted_nodes])
            self.ref_dirty = False
        if self.all_jobs_dirty:
            self.dirty_jobs = set(self.jobs) | set(self.job_pods) | set(self.podgroups)
            self.all_jobs_dirty = False
        later: set[str] = set() if implicit else {key for key in self.dirty_jobs if key not in self.podgroups}
        for key in self.dirty_jobs:
            if key not in later:
                self._read_job(key)
        self.dirty_jobs = later
        for key in self.relink:
            if key not in later:
                self._relink(key)
        self.relink = self.relink & later
        # a pod's part names its job (``pod_fields``): the pods of the jobs left are settled once those are read
        held = {k for k in self.touched_pods if (e := self.pods.get(k)) is not None and e.job in later} if later \
            else set()
        self.touched_pods -= held
        self._settle_parts()
        self.touched_pods = held

    def _settle_parts(self) -> None:
        """The parts of the nodes, pods and jobs read again (or gone) since the last call, in the sums."""
        parts = self.parts
        for name in self.touched_nodes:
            parts.nodes -= self.node_parts.pop(name, 0)
            node = self.node_tpl.get(name)
            if node is not None:
                part = self.node_parts[name] = node_part(node)
                parts.nodes += part
        self.touched_nodes = set()
        labels = parts.labels
        for key in self.touched_pods:
            old = self.pod_parts.pop(key, None)
            if old is not None:
                parts.pods -= old[0]
                labels[old[1]] -= old[2]
            entry = self.pods.get(key)
            if entry is not None and entry.included and entry.tpl is not None:
                pod = entry.tpl
                new = self.pod_parts[key] = (pod_part(pod, entry.seq), pod.namespace, label_part(pod, entry.seq))
                parts.pods += new[0]
                labels[new[1]] = labels.get(new[1], 0) + new[2]
        self.touched_pods = set()
        for key in self.touched_jobs:
            parts.jobs -= self.job_parts.pop(key, 0)
            filed = self.jobs.get(key)
            if filed is not None:
                part = self.job_parts[key] = job_part(filed.job, tuple(filed.keys))
                parts.jobs += part
        self.touched_jobs = set()

    def _relink(self, key: str) -> None:
        """A job's pods list made of its pods' templates, each pointing back at the job."""
        filed = self.jobs.get(key)
        if filed is None:
            return
        job = filed.job
        job.pods = []
        for k in filed.keys:
            pod = self.pods[k].tpl
            assert pod is not None  # (one of this scheduler's pods, read)
            pod.job = job
            job.pods.append(pod)

    def snapshot(self, now: float = 0.0, usage: Mapping[str, list[float]] | None = None) -> Snapshot:
        """A Snapshot of the current objects, the engine's to change until the next call: the model's own nodes, pods
        and jobs with a journal of the changes (``shared``), else a fresh copy of each; queues always a copy."""
        self.refresh()
        assert self.sorted_nodes is not None
        order = self._job_order()
        if self.hashed_order is not order:
            self.parts.order = hash(tuple(order))
            self.hashed_order = order
        journal: Journal | None = None
        if self.shared:
            nodes = [self.node_tpl[n] for n in self.sorted_nodes]
            if self.pod_view is None:
                self.pod_view = [e.tpl for e in self.pods.values() if e.included and e.tpl is not None]
            pods = list(self.pod_view)
            if self.job_view is None:
                self.job_view = {key: self.jobs[key].job for key in order}
            jobs = dict(self.job_view)
            self.journal = journal = Journal()
        else:
            nodes = [_copy_node(self.node_tpl[n]) for n in self.sorted_nodes]
            view: dict[str, Pod] = {}
            pods = []
            jobs = {}
            for key, entry in self.pods.items():
                if entry.included and entry.tpl is not None:
                    pod = entry.tpl.copy()
                    view[key] = pod
                    pods.append(pod)
            for key in order:
                tpl = self.jobs[key]
                job = _copy_job(tpl.job)
                job.pods = [view[k] for k in tpl.keys]
                for pod in job.pods:
                    pod.job = job
                jobs[key] = job
        queues = self._queues(jobs, usage)
        problems = self._problems()
        budgets = [Budget(b.namespace, b.name, b.selector, b.disruptions_allowed) for b in self.budgets]
        return Snapshot(nodes, queues, jobs, pods, dict(self.topologies), dict(self.pcs), now, problems, budgets,
                        {n.name: n for n in nodes}, journal, self.parts.copy())

    def _problems(self) -> list[ObjectProblem]:
        """The objects' problems in a cold build's order: policy, queues, nodes by name, PodGroups, pods, budgets."""
        out = [*self.policy_problems, *self.queue_problems, *(p for _, p in sorted(self.node_problems.items()))]
        if self.pg_problems:
            out += [self.pg_problems[k] for k in self.podgroups if k in self.pg_problems]
        if self.pod_problems:
            out += [self.pod_problems[k] for k in sorted(self.pod_problems, key=lambda k: self.pods[k].seq)]
        return out + self.budget_problems

    def _job_order(self) -> list[str]:
        """The jobs' keys as a cold build orders them: the PodGroups' in their order, then the others by their first
        pod."""
        if self.job_order is None:
            pgs_read, bad = self.podgroups, self.pg_problems  # (``_named`` inlined: one test per job)
            firsts = sorted((min(self.pods[k].seq for k in members), key) for key, members in self.job_pods.items()
                            if key not in pgs_read or key in bad)
            left_out = self.foreign_pgs | self.pg_problems.keys()
            pgs = [k for k in self.podgroups if k not in left_out] if left_out else self.podgroups
            self.job_order = [*pgs, *(key for _, key in firsts)]
            self.job_view = None
        return self.job_order

    def _queues(self, jobs: Mapping[str, Job], usage: Mapping[str, list[float]] | None) -> dict[str, Queue]:
        out = {name: _copy_queue(q) for name, q in self.queues.items()}
        for name, q in out.items():
            tpl = self.queues[name]
            if tpl.parent is not None:
                q.parent = out[tpl.parent.name]
            q.children = [out[ch.name] for ch in tpl.children]
            if usage and name in usage:
                q.usage = list(usage[name])
        for name, q in out.items():
            direct = self._direct.get(name)
            if direct is not None:
                for anc in q.path():
                    for r in _R:
                        anc.requested[r] += direct[0][r]
                        anc.allocated[r] += direct[1][r]
                        anc.alloc_np[r] += direct[2][r]
        for name, q in out.items():
            filed = self.queue_jobs.get(name)
            if filed:
                q.jobs = list(filed) if self.shared else [jobs[j.key] for j in filed]
        return out


_NO_SPEC: Obj = {}
_JOB_KINDS = ("Pod", "PodGroup")  # held by ``namespace/name`` as written, read into jobs by the namespace defaulted


def _unkeyed(obj: Obj) -> str:
    """What keeps a pod or a PodGroup from being held by its key (its name or its namespace missing: the key the
    model holds it by and the one its job is read with would differ), or "" for one that has both."""
    m = obj.get("metadata")
    name = m.get("name") if isinstance(m, dict) else None
    if not isinstance(name, str) or not name:
        return "without a name"
    assert isinstance(m, dict)
    if not isinstance(m.get("namespace"), str) or not m["namespace"]:
        return f"{name} without a namespace"
    return ""


def _job_rank(job: Job) -> tuple[int, float, str]:
    """Where a job comes in its queue's list (``Queue.jobs``): higher priority first, then older, then by key."""
    return -job.priority, job.created, job.key


def _owner_chain(pod: Obj, owners: OwnerIndex) -> tuple[tuple[str, str, str], ...]:
    """Every owner key ``grouping.top_owner`` looks up for this pod, found or not: a change to any of them may group
    the pod otherwise."""
    ns = meta.namespace(pod)
    return tuple(dict.fromkeys((ns, kind, name) for kind, name, _ in islice(owner_chain(pod, owners), 1, None)))


def _copy_node(n: Node) -> Node:
    new = Node.__new__(Node)
    new.alloc_cpu, new.alloc_mem, new.alloc_pods = n.alloc_cpu, n.alloc_mem, n.alloc_pods
    new.dev_group, new.dev_used = list(n.dev_group), list(n.dev_used)
    new.gpu_mem_mib, new.gpus, new.idle, new.index = n.gpu_mem_mib, n.gpus, n.idle, n.index
    new.labels, new.name, new.ready, new.taints = n.labels, n.name, n.ready, n.taints
    new.unschedulable, new.used_cpu, new.used_mem, new.used_pods = n.unschedulable, n.used_cpu, n.used_mem, n.used_pods
    new.ext_alloc, new.ext_used = n.ext_alloc, None if n.ext_used is None else dict(n.ext_used)
    new.roles, new.other_held = n.roles, n.other_held
    return new


def _copy_job(j: Job) -> Job:
    new = Job.__new__(Job)
    new.created, new.explicit, new.key = j.created, j.explicit, j.key
    new.errors = list(j.errors) if j.errors else UNWRITTEN
    new.min_member, new.min_subgroup, new.name, new.namespace = j.min_member, j.min_subgroup, j.name, j.namespace
    new.preempt_never, new.preemptibility, new.preemptible = j.preempt_never, j.preemptibility, j.preemptible
    new.preferred_level, new.priority, new.priority_class = j.preferred_level, j.priority, j.priority_class
    new.queue, new.raw, new.request_milli, new.required_level = j.queue, j.raw, j.request_milli, j.required_level
    new.stale_grace, new.stale_since, new.subgroups = j.stale_grace, j.stale_since, j.subgroups
    new.preemption_delay, new.last_eviction = j.preemption_delay, j.last_eviction
    new.topology, new.succeeded, new.mark_unschedulable = j.topology, j.succeeded, j.mark_unschedulable
    new.scheduling_backoff = j.scheduling_backoff
    new.warnings = list(j.warnings) if j.warnings else UNWRITTEN
    return new


def _copy_queue(q: Queue) -> Queue:
    new = Queue(q.name)
    new.display, new.parent_name, new.priority = q.display, q.parent_name, q.priority
    new.quota, new.limit, new.weight = list(q.quota), list(q.limit), list(q.weight)
    new.errors, new.depth, new.created = list(q.errors), q.depth, q.created
    new.usage = list(q.usage)
    new.preempt_min_runtime, new.reclaim_min_runtime = q.preempt_min_runtime, q.reclaim_min_runtime
    return new


_K = TypeVar("_K")


def _drop(table: dict[_K, set[str]], at: _K, key: str) -> None:
    """``key`` out of ``table[at]``, and the set out of the table once empty."""
    members = table.get(at)
    if members is not None:
        members.discard(key)
        if not members:
            del table[at]
