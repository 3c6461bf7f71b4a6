"""A short cut against its plain reading: the same decisions in every cycle of a run (the equivalence property
tests of the victim search)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from kaid.cycle import Decisions
from tests.test_search_memory import _digest

Patch = tuple[object, str, object]  # (module or class, attribute, what it is set to)


def assert_same_decisions(run: Callable[[], list[Decisions]], short: Sequence[Patch], plain: Sequence[Patch]) -> None:
    """``run`` with the ``short`` patches (the short cut, perhaps counting what it does), then with the ``plain``
    ones, decides the same in every cycle."""
    runs = []
    for patches in (short, plain):
        with pytest.MonkeyPatch.context() as mp:
            for target, name, value in patches:
                mp.setattr(target, name, value)
            runs.append(run())
    fast, slow = runs
    for k, (a, b) in enumerate(zip(slow, fast, strict=True)):
        assert _digest(a) == _digest(b), f"cycle {k + 1} differs"
