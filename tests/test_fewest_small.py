"""The knapsack for alike pods without numpy (``fewest._cheapest_small``, ``fewest._split_small``, used for small
tables until numpy is imported, so that a daemon's first gangs do not pay its import) gives the tables, the items
taken and the split of the numpy path, tie for tie, on random node groups and domains."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.placement.fewest import _NONE, _cheapest, _cheapest_small, _split, _split_small

ITEMS = st.lists(st.tuples(st.integers(1, 8), st.integers(0, 8), st.integers(1, 16)), max_size=8)


@settings(max_examples=300, deadline=None)
@given(ITEMS, st.integers(0, 40), st.integers(1, 400))
def test_the_cheapest_nodes_table_is_numpys(items: list[tuple[int, int, int]], need: int, w_nodes: int) -> None:
    cost, takes = _cheapest(items, need, w_nodes)  # (numpy is imported here: the numpy path)
    assert isinstance(cost, np.ndarray)
    small_cost, small_takes = _cheapest_small(items, need, w_nodes)
    assert small_cost == cost.tolist()
    assert small_takes == [list(map(bool, t)) for t in takes]


@settings(max_examples=300, deadline=None)
@given(st.lists(ITEMS, min_size=1, max_size=5), st.integers(0, 30), st.integers(1, 50), st.integers(1, 3000))
def test_the_split_over_domains_is_numpys(domains: list[list[tuple[int, int, int]]], need: int, w_nodes: int,
                                          w_dom: int) -> None:
    costs = [_cheapest(items, need, w_nodes)[0] for items in domains]
    split = _split(costs, need, w_dom)
    assert split == _split_small([[int(c) for c in cost] for cost in costs], need, w_dom)
    if split is not None:
        assert sum(split) == need and all(costs[i][j] < _NONE for i, j in enumerate(split))
