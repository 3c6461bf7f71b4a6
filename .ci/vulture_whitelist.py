"""Names that vulture (run by .ci/test over kaid, kaictl and benchmarks) cannot see used. Not imported by
anything; vulture only reads it.

1. Used by name by a framework, or read only by the tests: these stay.
2. What kaid/actions, kaid/fairshare and kaid/cycle.py still carry (dead code, and the vocabulary they have
   not adopted yet): issue 13's phase B empties this part once issue 12's rewrite of those files has landed.
3. Names of the GPU-sharing code (issue 14) that nothing reads yet: for their owner to use or remove.
"""

from ortools.sat.python import cp_model

from kaid.actions import allocate, evictions, session
from kaid.api import config
from kaid.kube import daemon, metrics
from kaid.model import objects, vocabulary
from kaid.sharing import nvml
from kaid.webhook import admission, server

parameters = cp_model.CpSolver().parameters

# 1. ---------------------------------------------------------------------------------------- stays
config.Action.RECLAIM  # members the config and the actions refer to by value
config.Action.PREEMPT
config.Action.STALE_GANG
metrics.serve.Handler.do_GET  # http.server's handler methods
metrics.serve.Handler.log_message
parameters.max_deterministic_time  # CP-SAT's parameters, set by kaid.placement.cpsat.new_solver
parameters.max_time_in_seconds
parameters.num_workers
parameters.random_seed
server._QuietServer.handle_error  # socketserver's and http.server's hooks and settings
server._QuietServer.daemon_threads
server.PlainHandler.protocol_version
server.PlainHandler.do_POST
daemon.Daemon.early_bound  # read by tests/e2e/test_kaid.py (what the early cycle bound)
objects.Job.subgroups  # PodGroup spec.subGroups, read for the contract, not scheduled on yet
objects.Queue.display  # Queue spec.displayName, read for the contract
allocate.AllocateStats.gangs_improved  # read by tests/test_allocate.py

# 2. ---------------------------------------------------------------------------------------- phase B
allocate.AllocateStats.jobs_placed  # counted, never read
allocate.AllocateStats.pods_placed
evictions.Runner  # an alias nothing uses
evictions.describe  # never called
session.Session.allocations  # never called
session.Session.of_kind
session.job_of
objects.Budget.covers  # to replace victims._matches
vocabulary.PLACED_THIS_CYCLE  # for the actions to adopt: ("Allocated", "Pipelined")
vocabulary.OpKind  # Op.kind
vocabulary.OpKind.PIPELINE
vocabulary.OpKind.EVICT
vocabulary.ReasonCode.GANG_UNSCHEDULABLE  # the codes the actions write as literals
vocabulary.ReasonCode.GANG_INCOMPLETE
vocabulary.ReasonCode.TOPOLOGY
vocabulary.ReasonCode.RECLAIM_NOT_POSSIBLE
vocabulary.ReasonCode.PREEMPT_NOT_POSSIBLE
vocabulary.ReasonCode.PREEMPTION_NEVER
vocabulary.ReasonCode.NOT_PLACED_THIS_CYCLE
vocabulary.ReasonCode.NOT_EXPLAINED

# 3. ---------------------------------------------------------------------------------------- GPU sharing
nvml.Gpu.memory_used
admission.PATHS
