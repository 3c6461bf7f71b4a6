"""Names that vulture (run by .ci/test over kaid, kaictl and benchmarks) cannot see used. Not imported by
anything; vulture only reads it.

Only names used by a framework (by name, not by a call vulture can see) or read only by the tests belong here;
dead code is removed, not listed.
"""

from ortools.sat.python import cp_model

from kaid.actions import allocate
from kaid.api import config
from kaid.kube import daemon, metrics
from kaid.model import objects
from kaid.webhook import server

parameters = cp_model.CpSolver().parameters

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
bench_allocate._rss_here  # run by name in a fresh interpreter (bench_allocate.rss_probe)
limits.above_limit  # the plain reading of scenario.above, read by tests/test_scenario_limits.py
