"""A victim job handed out one unit at a time goes back into the victim order as what is left of it (KAI's
``pod_scenario_builder.addNextPotentialVictims`` pushes back a clone of the job with its tasks not handed out yet): its
key and what it holds are those of the rest (``evictions.rest_of``, ``ByQueue.push_rest``), so an elastic job brought
down to its minimum comes after another job of the same priority (kai-actions preempt-14/15, reclaim-27/28). Checked
on random clusters over several cycles against the plain reading: ``job_key`` and ``held_by`` of a copy of the job
holding only its pods not handed out."""

from __future__ import annotations

import copy

import pytest
from hypothesis import event, given

from kaid.actions import evictions
from kaid.actions.order import ByQueue, JobKey, VictimTree, job_key
from kaid.actions.scenario import held_by
from kaid.actions.session import Vec
from kaid.model.objects import Job
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


@SETTINGS
@given(case=cases())
def test_the_rest_of_a_victim_is_keyed_as_a_clone_of_it(case: Case) -> None:
    rest_of = evictions.rest_of
    seen = {"state": 0, "same": 0}

    def checked(job: Job, gone: set[int]) -> tuple[JobKey, Vec]:
        key, held = rest_of(job, gone)
        clone = copy.copy(job)
        clone.pods = [p for p in job.pods if id(p) not in gone]
        assert key == job_key(clone), job.key
        assert held == held_by(clone), job.key
        seen["state" if key[1] != job_key(job)[1] else "same"] += 1
        return key, held

    push_rest = ByQueue.push_rest

    def pushed(self: ByQueue, job: Job, key: JobKey, held: Vec) -> None:
        push_rest(self, job, key, held)
        assert self.held(job) == held and self._job_keys[id(job)] == key  # what the order reads of it from now on

    tree_push_rest = VictimTree.push_rest

    def tree_pushed(self: VictimTree, job: Job, key: JobKey, held: Vec) -> None:
        tree_push_rest(self, job, key, held)
        assert self._held_of(job) == held and self._job_keys[id(job)] == key

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evictions, "rest_of", checked)
        mp.setattr(ByQueue, "push_rest", pushed)
        mp.setattr(VictimTree, "push_rest", tree_pushed)
        decisions_over(case, 3)
    event(f"rest pushed back with another elastic state: {'some' if seen['state'] else 'none'}")
    event(f"with the same: {'some' if seen['same'] else 'none'}")
