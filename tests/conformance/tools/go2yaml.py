"""Read one case of a KAI-Scheduler Go test table and restate it in the format of ``../kai/FORMAT.md``.

The Go source is read from a checkout of KAI-Scheduler (commit d5bc503a) given on the command line, never fetched.
Only the fields KAI's tables use are handled; an unknown Go field raises, so nothing is silently dropped.

``restate`` gives an integration-test scenario (``../kai/``, ``../kai-more/``: every action, several rounds,
``match_mode: projected``); ``act2yaml`` narrows it to one action on the raw session (``../kai-actions/``).

    python -m tests.conformance.tools.go2yaml --kai-source DIR FILE LINE CATEGORY      # one case to stdout

``check`` compares the files of the integration folders with what this module makes of their source.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

KAI_COMMIT = "d5bc503a"  # the KAI-Scheduler commit the files of tests/conformance restate
CONSTS = {
    "constants.PriorityTrainNumber": 50,
    "constants.PriorityInteractivePreemptibleNumber": 75,
    "constants.PriorityBuildNumber": 100,
    "constants.PriorityInferenceNumber": 125,
    "commonconstants.DefaultQueuePriority": 100,
    "time.Minute": 60,  # durations are read in seconds
    "time.Second": 1,
}

KEY_CONSTS = {"tasks_fake.NodeAffinityKey": "kai.scheduler/type"}  # constants used as map keys (node labels)
TOKEN = re.compile(r'\s+|//[^\n]*|"(?:[^"\\]|\\.)*"|`[^`]*`|[A-Za-z_][A-Za-z0-9_.]*|\d+(?:\.\d+)?(?:e\d+)?|:='
                   r'|[{}()\[\],:&*+\-/=!<>;%|.^]')


def tokens(text: str) -> list[str]:
    out = []
    pos = 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"bad char at {text[pos:pos + 30]!r}")
        t = m.group(0)
        pos = m.end()
        if t.isspace() or t.startswith("//"):
            continue
        out.append(t)
    return out


class Parser:
    """A recursive-descent reader of Go composite literals: keyed literals become dicts, others lists; scalar
    expressions are evaluated with ``consts`` (the string constants of the file being read)."""

    def __init__(self, toks: list[str], consts: dict[str, str] | None = None) -> None:
        self.t = toks
        self.i = 0
        self.consts = consts or {}

    def peek(self) -> str:
        return self.t[self.i]

    def take(self, want: str | None = None) -> str:
        tok = self.t[self.i]
        if want is not None and tok != want:
            raise ValueError(f"want {want} got {tok} at {self.t[self.i - 5:self.i + 5]}")
        self.i += 1
        return tok

    def composite(self) -> Any:
        """At '{': a list or a dict of elements."""
        self.take("{")
        keyed: dict[str, Any] = {}
        items: list[Any] = []
        while self.peek() != "}":
            # key ':' value ?
            if self.t[self.i + 1] == ":" and self.peek() not in "{":
                key = self.take()
                self.take(":")
                keyed[KEY_CONSTS.get(key, _unquote(key))] = self.value()
            else:
                items.append(self.value())
            if self.peek() == ",":
                self.take(",")
        self.take("}")
        if keyed and items:
            raise ValueError("mixed composite")
        return keyed if keyed else items

    def closure(self) -> Any:
        """func() *subgroup_info.SubGroupSet { ...; return root }() -> the sub-group tree it builds."""
        while self.peek() != "{":
            self.take()
        self.take("{")
        sets: dict[str, dict[str, Any]] = {}

        def call_args() -> list[list[str]]:
            self.take("(")
            args: list[list[str]] = []
            cur: list[str] = []
            depth = 0
            while True:
                tok = self.take()
                if tok in ("(", "{"):
                    depth += 1
                elif tok in (")", "}"):
                    if depth == 0:
                        if cur:
                            args.append(cur)
                        return args
                    depth -= 1
                if tok == "," and depth == 0:
                    args.append(cur)
                    cur = []
                else:
                    cur.append(tok)

        while True:
            tok = self.take()
            if tok == "return":
                root = sets[self.take()]
                self.take("}")
                self.take("(")
                self.take(")")
                return {"tree": root}
            if self.peek() == ":=":
                self.take(":=")
                fn = self.take()
                args = call_args()
                if fn != "subgroup_info.NewSubGroupSet" or len(args) != 2:
                    raise ValueError(f"closure: {fn} {args}")
                name = "<root>" if args[0] == ["subgroup_info.RootSubGroupSetName"] else _unquote(args[0][0])
                sets[tok] = {"name": name, **_constraint(args[1], self.consts)}
                continue
            var, _, method = tok.rpartition(".")
            args = call_args()
            node = sets[var]
            if method == "AddPodSet":
                a = args[0]
                if a[0] != "subgroup_info.NewPodSet" or a[1] != "(" or a[3] != "," or a[5] != "," or a[-1] != ")":
                    raise ValueError(f"closure pod set {a}")
                node.setdefault("pod_sets", []).append({"name": _unquote(a[2]), "min_available": int(a[4]),
                                                        **_constraint(a[6:-1], self.consts)})
            elif method == "AddSubGroup":
                node.setdefault("children", []).append(sets[args[0][0]])
            elif method == "SetMinSubGroup":
                node["min_subgroup"] = int([t for t in args[0] if t.isdigit()][-1])
            else:
                raise ValueError(f"closure method {method}")

    def value(self) -> Any:
        if self.peek() == "func":
            return self.closure()
        # skip a type prefix up to '{' if the expression is a composite literal
        start = self.i
        depth = 0
        j = self.i
        while True:
            tok = self.t[j]
            if tok == "(":
                depth += 1
            elif tok == ")":
                depth -= 1
            elif depth == 0 and tok in (",", "}", "{"):
                break
            j += 1
        if self.t[j] == "{":
            self.i = j
            return self.composite()
        expr = self.t[start:j]
        self.i = j
        return evaluate(expr, self.consts)


def _constraint(toks: list[str], consts: dict[str, str]) -> dict[str, Any]:
    """A sub-group set's or pod set's topology constraint argument: nil, or &topology_info.TopologyConstraintInfo{...}
    -> {'topology_constraint': {...}} (nothing for nil or an empty literal, which constrains nothing)."""
    if toks and toks[-1] == ",":  # a trailing comma before the call's ')'
        toks = toks[:-1]
    if toks == ["nil"]:
        return {}
    if toks[:3] != ["&", "topology_info.TopologyConstraintInfo", "{"]:
        raise ValueError(f"topology constraint {toks}")
    tc = Parser(toks[2:], consts).composite() or {}
    check(tc, {"Topology", "RequiredLevel", "PreferredLevel"}, "topology constraint")
    if not tc:
        return {}
    return {"topology_constraint": {"topology": tc.get("Topology"),
                                    **({"required_level": tc["RequiredLevel"]} if "RequiredLevel" in tc else {}),
                                    **({"preferred_level": tc["PreferredLevel"]} if "PreferredLevel" in tc else {})}}


def _unquote(s: str) -> str:
    return s[1:-1] if s.startswith('"') else s


def evaluate(expr: list[str], consts: dict[str, str]) -> Any:
    """A Go scalar expression (tokens): a string, number, bool, nil, a known constant, or a helper call."""
    if len(expr) == 1 and expr[0] in consts:
        return consts[expr[0]]
    if len(expr) == 1 and expr[0] in KEY_CONSTS:
        return KEY_CONSTS[expr[0]]
    if all(e.startswith('"') or e == "+" for e in expr):
        return "".join(_unquote(e) for e in expr if e != "+").encode().decode("unicode_escape")
    text = " ".join(expr)
    m = re.fullmatch(r"(?:pointer|ptr)\.(?:Int|Float64|To|Int32|Duration) \( (.+) \)", text)
    if m:
        return evaluate(m.group(1).split(" "), consts)
    m = re.fullmatch(r"(?:int64|int32|uint64|float64|int) \( (.+) \)", text)
    if m:
        return evaluate(m.group(1).split(" "), consts)
    m = re.fullmatch(r"pod_status\.(\w+)", text)
    if m:
        return m.group(1)
    if expr[:2] == ["subgroup_info.NewSubGroupSet", "("]:
        if "{" not in expr:
            return {"topology": None}
        inner = expr[expr.index("{"):]
        tc = Parser(inner, consts).composite()
        return {"topology": tc}
    m = re.fullmatch(r"test_utils\.CreateFloat64Pointer \( (.+) \)", text)
    if m:
        return evaluate(m.group(1).split(" "), consts)
    m = re.fullmatch(r"buildEvenlyDistributedTopologyNodes \( (\d+) , (\d+) , (\d+) , (\d+) , (\d+) \)", text)
    if m:  # allocateTopology_test.go:3162, restated
        zones, spines, racks, per_rack, gpus = map(int, m.groups())
        nodes: dict[str, Any] = {}
        for z in range(1, zones + 1):
            for sp in range(1, spines + 1):
                for r in range(1, racks + 1):
                    rack = r + (sp - 1) * racks + (z - 1) * spines * racks
                    for _ in range(per_rack):
                        nodes[f"node{len(nodes)}"] = {"GPUs": gpus, "Labels": {
                            "k8s.io/zone": f"zone{z}", "k8s.io/spine": f"spine{sp + (z - 1) * spines}",
                            "k8s.io/rack": f"rack{rack}"}}
        return nodes
    m = re.fullmatch(r"jobs_fake\.DefaultSubGroup \( (\d+) \)", text)
    if m:
        return {"default_subgroup": int(m.group(1))}
    if text == "nil":
        return None
    if text in ("true", "false"):
        return text == "true"
    env = {k.replace(".", "_"): v for k, v in CONSTS.items()}
    py = text
    for k in CONSTS:
        py = py.replace(k, k.replace(".", "_"))
    if re.fullmatch(r"[\w\s+\-*/().]+", py):
        try:
            return eval(py, {"__builtins__": {}}, env)  # arithmetic on known constants only
        except NameError as e:  # a name this module does not know (another package's constant)
            raise ValueError(f"cannot evaluate {text} ({e})") from None
    raise ValueError(f"cannot evaluate {text}")


def revision_warning(kai_source: Path) -> str | None:
    """A warning when ``kai_source`` is a git checkout at another commit than the files restate (d5bc503a)."""
    if not (kai_source / ".git").exists():
        return None
    head = subprocess.run(["git", "-C", str(kai_source), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=False).stdout.strip()
    if head.startswith(KAI_COMMIT):
        return None
    return f"warning: {kai_source} is at {head or 'an unknown commit'}, not {KAI_COMMIT}: files may differ"


def read_go(kai_source: Path, path: str) -> str:
    """The text of ``path`` (relative to the repository root) in the KAI checkout ``kai_source``."""
    return (kai_source / path).read_text()


def case_at(src: str, line: int) -> dict[str, Any]:
    """The Go composite literal that opens on line ``line`` (1-based) of the Go file text ``src``, read into dicts
    and lists (a table element, or a builder's ``return test_utils.TestTopologyBasic{``)."""
    consts = dict(re.findall(r'^\s*(\w+)\s*=\s*"([^"]*)"\s*$', src, re.M))
    lines = src.split("\n")
    body = "\n".join(lines[line - 1:])
    p = Parser(tokens(body), consts)
    if p.peek() != "{":  # e.g. 'return test_utils.TestTopologyBasic{' (a builder function)
        p.i = p.t.index("{")
    case = p.composite()
    if set(case) == {"name", "topology"}:  # stalegangeviction_test.go's table: {name, topology TestTopologyBasic}
        case = {**case["topology"], "Name": case["name"]}
    if "TestTopologyBasic" in case:
        extra = {k: v for k, v in case.items() if k != "TestTopologyBasic"}
        case = {**case["TestTopologyBasic"], **extra}
    return dict(case)


# ---------------------------------------------------------------------------------------------------
JOB_KEYS = {"RequiredMultiFractionDevicesPerTask", "IsBestEffortJob", "StaleDuration", "PerJobStalenessGracePeriod",
            "PreemptionDelay", "JobAgeInMinutes", "RequiredGpuMemory", "Name", "RequiredGPUsPerTask",
            "RequiredCPUsPerTask", "RequiredMemoryPerTask", "Priority", "QueueName", "Tasks", "RootSubGroupSet"}
TASK_KEYS = {"PodAffinityLabels", "PodAffinityTopologyKey", "PodAntiAffinityTopologyKey", "Name", "RequiredGPUs",
             "NodeAffinityNames", "SubGroupName", "NodeName", "State", "GPUGroups", "Priority"}
NODE_KEYS = {"GPUs", "CPUMillis", "CPUMemory", "Labels", "GPUMemory"}
QUEUE_KEYS = {"Name", "DeservedGPUs", "GPUOverQuotaWeight", "ParentQueue", "Priority", "DeservedCPUs",
              "DeservedMemory", "MaxAllowedGPUs", "MaxAllowedCPUs", "MaxAllowedMemory"}
DEPT_KEYS = {"Name", "DeservedGPUs", "MaxAllowedGPUs", "MaxAllowedCPUs"}
EXP_KEYS = {"GPUsAccepted", "ExpectedErrorMessage", "NodeName", "GPUsRequired", "MilliCpuRequired", "MemoryRequired",
            "Status", "GPUGroups", "DontValidateGPUGroup"}
SUBGROUP_ORDER = ("name", "min_subgroup", "topology_constraint", "pod_sets", "children")
CASE_KEYS = {"Name", "Jobs", "Nodes", "Queues", "Departments", "JobExpectedResults", "TaskExpectedResults", "Mocks",
             "RoundsUntilMatch", "RoundsAfterMatch", "DisableDefaultDepartment", "Topologies", "ExpectedNodesResources"}


def num(x: float) -> int | float:
    return int(x) if float(x).is_integer() else x


def check(d: dict[str, Any], allowed: set[str], what: str) -> None:
    extra = set(d) - allowed
    if extra:
        raise ValueError(f"{what}: unhandled fields {extra}")


def _ordered(t: dict[str, Any]) -> dict[str, Any]:
    """A sub-group set with its keys in the files' order, children too."""
    o = {k: t[k] for k in SUBGROUP_ORDER if k in t}
    if "children" in o:
        o["children"] = [_ordered(c) for c in o["children"]]
    return o


def restate(case: dict[str, Any], path: str, line: int, category: str) -> tuple[dict[str, Any], list[str]]:
    check(case, CASE_KEYS, "case")
    if case.get("ExpectedNodesResources") not in (None, "nil"):
        raise ValueError("ExpectedNodesResources set: not expressible")
    notes: list[str] = []
    rounds = case.get("RoundsUntilMatch", 0)
    if not rounds:
        rounds = 2
        notes.append("rounds: RoundsUntilMatch not set in source -> KAI default 2.")
    after = case.get("RoundsAfterMatch", 0) or 5
    nodes = []
    for name, nd in (case["Nodes"] or {}).items():  # 'map[...]{}' reads as an empty list
        nd = nd or {}  # an empty literal '{}' reads as an empty list
        check(nd, NODE_KEYS, "node")
        nodes.append({"name": name, "gpus": nd.get("GPUs", 0),
                      "cpu_millis": num(nd.get("CPUMillis", 20000) * 1000),
                      "memory_mb": num(nd.get("CPUMemory", 20_000_000_000) / 1e6),
                      "gpu_memory_mib": nd.get("GPUMemory") or 100, "labels": dict(nd.get("Labels", {}))})
    queues: list[dict[str, Any]] = []
    depts = case.get("Departments") or []
    no_default = case.get("DisableDefaultDepartment", False)
    if not depts and not no_default:
        notes.append("No Departments in source: KAI test utils add department 'default' (gpu quota -1, limit -1, "
                     "over_quota_weight -1) and make it the parent of every queue.")
        queues.append({"name": "default", "parent": None, "kind": "department", "priority": 100,
                       "created_offset_minutes": 0,
                       "gpu": {"quota": -1, "limit": -1, "over_quota_weight": -1},
                       "cpu": {"quota": -1, "limit": -1, "over_quota_weight": 1},
                       "memory": {"quota": -1, "limit": -1, "over_quota_weight": 1}})
    for i, d in enumerate(depts):
        check(d, DEPT_KEYS, "department")
        queues.append({"name": d["Name"], "parent": None, "kind": "department", "priority": 100,
                       "created_offset_minutes": i,
                       "gpu": {"quota": num(d.get("DeservedGPUs", 0)), "limit": num(d.get("MaxAllowedGPUs", 0) or -1),
                               "over_quota_weight": num(d.get("DeservedGPUs", 0))},
                       "cpu": {"quota": -1, "limit": num(d.get("MaxAllowedCPUs", -1)), "over_quota_weight": 1},
                       "memory": {"quota": -1, "limit": -1, "over_quota_weight": 1}})
    for i, q in enumerate(case["Queues"]):
        check(q, QUEUE_KEYS, "queue")
        parent = "default" if not depts and not no_default else (q.get("ParentQueue") or None)
        queues.append({"name": q["Name"], "parent": parent, "kind": "queue", "priority": q.get("Priority", 100),
                       "created_offset_minutes": i,
                       "gpu": {"quota": num(q.get("DeservedGPUs", 0)), "limit": num(q.get("MaxAllowedGPUs", 0) or -1),
                               "over_quota_weight": num(q.get("GPUOverQuotaWeight", 0))},
                       "cpu": {"quota": num(q["DeservedCPUs"]) if "DeservedCPUs" in q else -1,
                               "limit": num(q.get("MaxAllowedCPUs", -1)),
                               "over_quota_weight": 1},
                       "memory": {"quota": num(q["DeservedMemory"]) if "DeservedMemory" in q else -1,
                                  "limit": num(q.get("MaxAllowedMemory", -1)),
                                  "over_quota_weight": 1}})
        # queue memory is in MB as in the Queue spec (proportion.go multiplies it by mebibytes = 10^6): kept as is
    jobs_in = case["Jobs"]
    order = sorted(range(len(jobs_in)), key=lambda i: -jobs_in[i].get("Priority", 0))  # stable
    ago = {jobs_in[i]["Name"]: len(jobs_in) - rank for rank, i in enumerate(order)}
    for jb in jobs_in:  # jobs_fake: a job's JobAgeInMinutes, when not 0, replaces its default age
        if jb.get("JobAgeInMinutes"):
            ago[jb["Name"]] = jb["JobAgeInMinutes"]
            notes.append(f"job {jb['Name']}: JobAgeInMinutes {jb['JobAgeInMinutes']} in source -> created_minutes_ago.")
    jobs = []
    for jb in jobs_in:
        check(jb, JOB_KEYS, "job")
        prio = jb.get("Priority", 0)
        best_effort = bool(jb.get("IsBestEffortJob"))
        if best_effort:  # jobs_fake: a best-effort job's pods request nothing (BuildResourceList(nil, nil, nil))
            if jb.get("RequiredGPUsPerTask") or jb.get("RequiredGpuMemory"):
                raise ValueError("IsBestEffortJob with a GPU request: check by hand")
            notes.append(f"job {jb['Name']}: IsBestEffortJob: its pods request no resources (cpu and memory 0).")
        gpus = num(jb.get("RequiredGPUsPerTask", 0))
        job: dict[str, Any] = {"name": jb["Name"], "queue": jb["QueueName"], "priority": prio,
                               "preemptible": prio < 100, "gpus_per_task": gpus,
                               **({"gpu_memory_mib": jb["RequiredGpuMemory"]} if "RequiredGpuMemory" in jb else {}),
                               "cpu_millis": 0 if best_effort else num(jb.get("RequiredCPUsPerTask", 1) * 1000),
                               "memory_mb": 0 if best_effort else num(jb.get("RequiredMemoryPerTask", 1e9) / 1e6),
                               "created_minutes_ago": ago[jb["Name"]]}
        if "RequiredMultiFractionDevicesPerTask" in jb:  # the pod's gpu-fraction-num-devices annotation
            if not (0 < gpus < 1 or "RequiredGpuMemory" in jb):
                raise ValueError("RequiredMultiFractionDevicesPerTask on a whole-GPU job: check by hand")
            if any(t.get("NodeName") for t in jb["Tasks"]):
                raise ValueError("RequiredMultiFractionDevicesPerTask on a bound task (one group per device): by hand")
            job["gpu_fraction_devices"] = int(jb["RequiredMultiFractionDevicesPerTask"])
        if "StaleDuration" in jb:  # jobs_fake: StalenessInfo stale since now - StaleDuration
            job["stale_for_seconds"] = num(jb["StaleDuration"])
        if "PerJobStalenessGracePeriod" in jb:
            pg = jb["PerJobStalenessGracePeriod"]
            check(pg, {"Duration"}, "PerJobStalenessGracePeriod")
            job["staleness_grace_period_seconds"] = num(pg["Duration"])
        if "PreemptionDelay" in jb:
            pd = jb["PreemptionDelay"]
            check(pd, {"Duration"}, "PreemptionDelay")
            job["preemption_delay_seconds"] = num(pd["Duration"])
        if "RootSubGroupSet" in jb and "tree" in jb["RootSubGroupSet"]:
            tree = jb["RootSubGroupSet"]["tree"]
            job["subgroups"] = _ordered(tree)
            if "topology_constraint" in job["subgroups"]:  # the root set's constraint is the job's
                job["topology_constraint"] = job["subgroups"].pop("topology_constraint")
        elif "RootSubGroupSet" in jb and "topology" in jb["RootSubGroupSet"]:
            tc = jb["RootSubGroupSet"]["topology"]
            if tc is not None:
                job["topology_constraint"] = {
                    "topology": tc["Topology"],
                    **({"required_level": tc["RequiredLevel"]} if "RequiredLevel" in tc else {}),
                    **({"preferred_level": tc["PreferredLevel"]} if "PreferredLevel" in tc else {})}
            job["min_member"] = len(jb["Tasks"])
        elif "RootSubGroupSet" in jb:
            job["min_member"] = jb["RootSubGroupSet"]["default_subgroup"]
            notes.append(f"job {jb['Name']}: RootSubGroupSet jobs_fake.DefaultSubGroup("
                         f"{job['min_member']}) -> min_member {job['min_member']}.")
        else:
            job["min_member"] = len(jb["Tasks"])
        tasks = []
        for ti, t in enumerate(jb["Tasks"]):
            check(t, TASK_KEYS, "task")
            tname = f"{jb['Name']}-{ti}"
            if "Name" in t and t["Name"] != tname:  # jobs_fake names the pod <job>-<index> whatever the task says
                notes.append(f"task {tname}: Name '{t['Name']}' in source is not read by KAI's test utils (the pod "
                             "is <job>-<index>).")
            task: dict[str, Any] = {"name": tname, "state": t["State"]}
            if t.get("NodeName"):
                task["node"] = t["NodeName"]
                if t["State"] == "Pending":
                    notes.append(f"task {tname}: Pending task has NodeName '{t['NodeName']}' in source "
                                 "(pod.spec.nodeName); it is not counted on the node.")
            if "GPUGroups" in t:
                task["gpu_groups"] = list(t["GPUGroups"])
            elif 0 < gpus < 1 and t.get("NodeName") and t["State"] != "Pending":
                notes.append(f"task {tname}: bound fractional task without GPUGroups in source; KAI test utils "
                             "give it a fresh unique GPU group.")
            if "SubGroupName" in t:
                task["subgroup"] = t["SubGroupName"]
            if "Priority" in t:
                task["priority"] = t["Priority"]
            if "RequiredGPUs" in t:  # tasks_fake: the pod's own whole-GPU request, replacing the job's
                if 0 < gpus < 1 or "RequiredGpuMemory" in jb:
                    raise ValueError("RequiredGPUs on a task of a shared-GPU job: check by hand")
                task["gpus"] = int(t["RequiredGPUs"])
            if "PodAffinityLabels" in t:  # tasks_fake: pod labels, and the selector of its pod (anti-)affinity terms
                task["pod_labels"] = dict(t["PodAffinityLabels"])
            for gk, yk in (("PodAffinityTopologyKey", "pod_affinity_topology_key"),
                           ("PodAntiAffinityTopologyKey", "pod_anti_affinity_topology_key")):
                if t.get(gk):
                    if not t.get("PodAffinityLabels"):
                        raise ValueError(f"{gk} without PodAffinityLabels: no term in KAI's test utils")
                    task[yk] = KEY_CONSTS.get(t[gk], t[gk])
            if "NodeAffinityNames" in t:
                task["node_affinity"] = list(t["NodeAffinityNames"])
            tasks.append(task)
        job["tasks"] = tasks
        jobs.append(job)
    if any("node_affinity" in t or "kai.scheduler/type" in (t.get("pod_affinity_topology_key"),
                                                             t.get("pod_anti_affinity_topology_key"))
           for j in jobs for t in j["tasks"]):
        for nd in nodes:  # nodes_fake: the test's own labels override the default one
            nd["labels"].setdefault("kai.scheduler/type", nd["name"])
        notes.append("Tasks with NodeAffinityNames or a pod (anti-)affinity on tasks_fake.NodeAffinityKey: KAI's test "
                     "utils match 'kai.scheduler/type' and label every node kai.scheduler/type=<node name>; the "
                     "labels are written out here (node_affinity on the task); a label the test sets itself "
                     "(tasks_fake.NodeAffinityKey) replaces it.")
    expected: dict[str, Any] = {}
    e_name = [""]

    def exp(e: dict[str, Any]) -> dict[str, Any]:
        check(e, EXP_KEYS, "expected")
        if e.get("GPUsAccepted"):  # asserted only when not 0 (MatchExpectedAndRealTasks)
            raise ValueError("GPUsAccepted asserted: not expressible")
        out: dict[str, Any] = {"status": e["Status"]}
        if e.get("NodeName"):
            out["node"] = e["NodeName"]
            if e["Status"] == "Pending":
                notes.append(f"expected {e_name[0]}: status Pending with node '{e['NodeName']}' -- the node is the "
                             "pod.spec.nodeName given in the input for a Pending task, which KAI keeps; it is not "
                             "a placement.")
        out["gpus_required"] = num(e.get("GPUsRequired", 0))
        if "MilliCpuRequired" in e:
            out["cpu_millis_required"] = num(e["MilliCpuRequired"])
        if "MemoryRequired" in e:
            out["memory_mb_required"] = num(e["MemoryRequired"] / 1e6)
        if "ExpectedErrorMessage" in e:
            out["error_message"] = e["ExpectedErrorMessage"]
        if e.get("GPUGroups") and not e.get("DontValidateGPUGroup"):
            out["unverified_gpu_groups"] = list(e["GPUGroups"])
        return out

    if case.get("JobExpectedResults"):
        expected["jobs"] = {}
        for k, v in case["JobExpectedResults"].items():
            e_name[0] = k
            expected["jobs"][k] = exp(v)
    if case.get("TaskExpectedResults"):
        names = {t["name"] for j in jobs for t in j["tasks"]}
        expected["tasks"] = {}
        for k, v in case["TaskExpectedResults"].items():
            if k in names:
                expected["tasks"][k] = exp(v)
            else:
                notes.append(f"TaskExpectedResults key '{k}' in source matches no task (pod names are "
                             "<job>-<index>), so KAI never checks it; it is left out of expected.")
    mocks = (case.get("Mocks") or {}).get("CacheRequirements") or {}
    if case.get("Mocks", 0) is None:
        notes.append("Mocks: nil in source: the cache mock expects no Bind, Evict or TaskPipelined call.")
    expected["max_per_round"] = {"binds": mocks.get("NumberOfCacheBinds", 0),
                                 "evictions": mocks.get("NumberOfCacheEvictions", 0),
                                 "pipelines": mocks.get("NumberOfPipelineActions", 0)}
    topologies = [{"name": tp["ObjectMeta"]["Name"], "levels": [lv["NodeLabel"] for lv in tp["Spec"]["Levels"]]}
                  for tp in case.get("Topologies") or []]
    sc = {"name": case["Name"], "category": category, "source": path, "source_line": line,
          "actions": ["allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"],
          "match_mode": "projected", "rounds": rounds, "rounds_after_match": after,
          "nodes": nodes, "topologies": topologies, "queues": queues, "jobs": jobs, "expected": expected}
    return sc, notes


# ---------------------------------------------------------------------------------------------------
def scalar(v: Any) -> str:
    s = yaml.safe_dump(v, default_flow_style=True, width=10_000).strip()
    if s.endswith("\n...") or s.endswith("..."):
        s = s.split("\n")[0]
    return s


def flow(d: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {flow(v) if isinstance(v, dict) else scalar(v)}" for k, v in d.items()) + "}"


def dump(sc: dict[str, Any], notes: list[str]) -> str:
    """A scenario as the repository writes it (block style per node, queue and job; flow style inside)."""
    out = []
    head = {k: sc[k] for k in ("name", "category", "source", "source_line")}
    out.append(yaml.safe_dump(head, sort_keys=False, width=120).rstrip())
    out.append("actions: [" + ", ".join(sc["actions"]) + "]")
    for k in ("match_mode", "rounds", "rounds_after_match", "stale_gang_grace_seconds"):
        if k in sc:
            out.append(f"{k}: {sc[k]}")
    out.append("nodes:" if sc["nodes"] else "nodes: []")
    for n in sc["nodes"]:
        first = True
        for k, v in n.items():
            out.append(("- " if first else "  ") + f"{k}: {flow(v) if isinstance(v, dict) else scalar(v)}")
            first = False
    if sc.get("topologies"):
        out.append("topologies:")
        for tp in sc["topologies"]:
            out.append(f"- name: {tp['name']}\n  levels: [{', '.join(tp['levels'])}]")
    out.append("queues:")
    for q in sc["queues"]:
        first = True
        for k, v in q.items():
            val = "null" if v is None else (flow(v) if isinstance(v, dict) else scalar(v))
            out.append(("- " if first else "  ") + f"{k}: {val}")
            first = False
    out.append("jobs:" if sc["jobs"] else "jobs: []")
    for j in sc["jobs"]:
        first = True
        for k, v in j.items():
            if k == "subgroups":
                def emit(t: dict[str, Any], ind: str, first_prefix: str) -> None:
                    pre = first_prefix
                    for sk, sv in t.items():
                        if sk == "pod_sets":
                            out.append(f"{pre}pod_sets:")
                            out.extend(f"{ind}- {flow(ps)}" for ps in sv)
                        elif sk == "children":
                            out.append(f"{pre}children:")
                            for ch in sv:
                                emit(ch, ind + "  ", ind + "- ")
                        else:
                            out.append(f"{pre}{sk}: {flow(sv) if isinstance(sv, dict) else scalar(sv)}")
                        pre = ind
                out.append("  subgroups:")
                emit(v, "    ", "    ")
                continue
            if k == "tasks":
                out.append("  tasks:")
                for t in v:
                    if "gpu_groups" in t:
                        tf = True
                        for tk, tv in t.items():
                            out.append(("  - " if tf else "    ") + f"{tk}: {scalar(tv)}")
                            tf = False
                    else:
                        out.append("  - " + flow(t))
                continue
            out.append(("- " if first else "  ") + f"{k}: {flow(v) if isinstance(v, dict) else scalar(v)}")
            first = False
    out.append("expected:")
    for sect in ("jobs", "tasks"):
        if sect in sc["expected"]:
            out.append(f"  {sect}:")
            for name, e in sc["expected"][sect].items():
                if "unverified_gpu_groups" in e or "error_message" in e:
                    out.append(f"    {name}:")
                    for ek, ev in e.items():
                        if ek == "error_message":
                            class D(yaml.SafeDumper):
                                pass
                            D.add_representer(str, lambda d, v: d.represent_scalar(
                                "tag:yaml.org,2002:str", v, style='"' if "\n" in v else None))
                            txt = yaml.dump({"expected": {"jobs": {name: {ek: ev}}}}, Dumper=D, width=120,
                                            sort_keys=False).rstrip()
                            out.append("\n".join(txt.split("\n")[3:]))
                        else:
                            out.append(f"      {ek}: {scalar(ev)}")
                else:
                    out.append(f"    {name}: {flow(e)}")
    out.append("  max_per_round: " + flow(sc["expected"]["max_per_round"]))
    if not notes:
        out.append("notes: []")
    else:
        out.append(yaml.safe_dump({"notes": notes}, sort_keys=False, width=120).rstrip())
    return "\n".join(out) + "\n"


def convert(kai_source: Path, path: str, line: int, category: str) -> str:
    """One integration-test case (``../kai/``, ``../kai-more/``) as a file."""
    sc, notes = restate(case_at(read_go(kai_source, path), line), path, line, category)
    return dump(sc, notes)


def main(argv: list[str] | None = None, out: Callable[[str], object] = sys.stdout.write) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.conformance.tools.go2yaml", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kai-source", type=Path, required=True, help="a checkout of KAI-Scheduler at d5bc503a")
    ap.add_argument("file", help="the Go file, relative to the checkout")
    ap.add_argument("line", type=int, help="the line of the case's opening '{'")
    ap.add_argument("category", help="the category the file is named by (allocate, reclaim, ...)")
    args = ap.parse_args(argv)
    if warning := revision_warning(args.kai_source):
        print(warning, file=sys.stderr)
    out(convert(args.kai_source, args.file, args.line, args.category))
    return 0


if __name__ == "__main__":
    sys.exit(main())
