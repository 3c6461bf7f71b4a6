"""``division._share_weights`` reads each float once as an exact fraction (``_exact``, remembered) and skips the usage
term where k is 0: the same weights, exactly, as the plain reading below (KAI's resource_division weights)."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from kaid.fairshare.division import Share, _share_weights


def plain(shares: list[Share], k_value: float) -> dict[str, Fraction]:
    total_weight = sum(Fraction(s.weight) for s in shares if s.remaining_request > 0)
    if total_weight == 0:
        return {}
    out = {}
    for s in shares:
        if s.satisfied:
            continue
        w = Fraction(s.weight) / total_weight
        out[s.name] = max(Fraction(0), w + Fraction(k_value) * (w - Fraction(s.usage)))
    return out


_share = st.builds(
    lambda i, w, req, fair, lim, u: Share(f"q{i}", 100, 0.0, 0, lim, w, req, u, fair),
    st.integers(0, 10**6), st.sampled_from([0.0, 0.5, 1.0, 1, 2.0, 3.0, 0.1, 7.25]), st.integers(0, 5000),
    st.integers(0, 5000), st.sampled_from([-1, 0, 1000, 3000]), st.floats(0.0, 1.0))


@given(st.lists(_share, max_size=12, unique_by=lambda s: s.name),
       st.sampled_from([0.0, 0.0, 1.0, 0.5, 2.0, 10.0]))
def test_the_weights_are_the_plain_readings(shares: list[Share], k_value: float) -> None:
    got, want = _share_weights(shares, k_value), plain(shares, k_value)
    assert got == want
    assert all(type(v) is Fraction for v in got.values())
