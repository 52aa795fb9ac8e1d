"""RowHistogram's sums run over the bins that hold people only, with the table's rows
summed once (accounting/bounds.py). A cap choice replays identically only if those sums
are the very numbers the plain formulas give: these tests hold them to the formulas of
the module docstring, summed over every bin, bit for bit."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from accounting.bounds import (
    BINS,
    CapTarget,
    OutputKind,
    RowHistogram,
    choose_cap,
    typical,
)


def _plain(hist: RowHistogram, upper: bool) -> tuple[float, float]:
    people, rows = (
        (hist.threshold, typical(hist.hidden)) if upper and hist.hidden is not None else (0.0, 0.0)
    )
    return people, rows


def plain_rows(hist: RowHistogram, upper: bool) -> float:
    people, rows = _plain(hist, upper)
    return sum(c * typical(j) for j, c in enumerate(hist.counts)) + people * rows


def plain_kept(hist: RowHistogram, cap: float, upper: bool) -> float:
    people, rows = _plain(hist, upper)
    kept = sum(c * min(typical(j), cap) for j, c in enumerate(hist.counts))
    return kept + people * min(rows, cap)


def plain_cut(hist: RowHistogram, cap: float, upper: bool) -> float:
    people, rows = _plain(hist, upper)
    cut = sum(c * max(0.0, typical(j) - cap) for j, c in enumerate(hist.counts))
    cut += people * max(0.0, rows - cap)
    total = plain_rows(hist, upper)
    return cut / total if total > 0 else 0.0


noisy_bins = st.lists(
    st.one_of(
        st.just(0.0),
        st.floats(min_value=-50.0, max_value=1e7, allow_nan=False),
    ),
    min_size=BINS,
    max_size=BINS,
)


@settings(max_examples=300, deadline=None)
@given(
    noisy=noisy_bins,
    std=st.floats(min_value=0.01, max_value=100.0),
    caps=st.lists(st.floats(min_value=0.5, max_value=3e6, allow_nan=False), min_size=1, max_size=6),
)
def test_sums_over_the_bins_holding_people_are_the_plain_sums(
    noisy: list[float], std: float, caps: list[float]
) -> None:
    hist = RowHistogram.read(noisy, std)
    for upper in (False, True):
        assert hist.rows(upper=upper) == plain_rows(hist, upper)
        for cap in caps:
            assert hist.rows_kept(cap, upper=upper) == plain_kept(hist, cap, upper)
            assert hist.rows_cut(cap, upper=upper) == plain_cut(hist, cap, upper)


def test_a_histogram_built_directly_with_signed_zeros_sums_as_the_plain_formulas() -> None:
    counts = (-0.0, 0.0, 5.0, -0.0, 3.0) + (0.0,) * (BINS - 5)
    hist = RowHistogram(counts, threshold=1.0, hidden=5)
    for upper in (False, True):
        assert hist.rows(upper=upper) == plain_rows(hist, upper)
        for cap in (1.0, 3.0, 7.5, 100.0):
            assert hist.rows_kept(cap, upper=upper) == plain_kept(hist, cap, upper)
            assert hist.rows_cut(cap, upper=upper) == plain_cut(hist, cap, upper)


def test_the_cap_choice_rests_on_the_plain_sums() -> None:
    """The chosen cap and every candidate's error, against the errors the plain sums give
    (the formulas of target_error, written out)."""
    hist = RowHistogram.read([900.0, 400.0, 250.0, 90.0, 30.0, 12.0, 4.0] + [0.3] * 14, 1.0)
    targets = (
        CapTarget(OutputKind.TOTAL, noise_per_cap=3.0, row_scale=1.0),
        CapTarget(OutputKind.MEAN, noise_per_cap=3.0, row_scale=40.0),
        CapTarget(OutputKind.RANK, noise_per_cap=3.0, row_scale=1.0),
    )
    choice = choose_cap(hist, targets, groups=7.0, limit=64)
    for cap, error in choice.errors:
        squares = []
        for t in targets:
            if t.kind is OutputKind.TOTAL:
                bias = plain_cut(hist, cap, True)
                size = plain_rows(hist, True) / 7.0 * t.row_scale
            else:
                shift = 0.002 if t.kind is OutputKind.MEAN else 0.25
                bias = shift * plain_cut(hist, cap, False)
                size = plain_kept(hist, cap, False) / 7.0 * t.row_scale
            squares.append(math.hypot(bias, t.noise_per_cap * cap / size) ** 2)
        assert error == math.sqrt(sum(squares) / len(squares))
    assert choice.cap == min(choice.errors, key=lambda e: (e[1], e[0]))[0]
