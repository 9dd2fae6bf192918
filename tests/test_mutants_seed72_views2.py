"""Surviving mutants of seed 72 in ``nbprof.views`` (second part): how far the Memory tab's curve
widens the y axis of a nearly flat curve before its tick labels read apart (``views.memory._y_axis``)."""

from __future__ import annotations

import pytest

from nbprof.views.memory import _y_axis

_MIB = 1 << 20


def test_a_flat_curves_y_axis_doubles_its_one_byte_pad_until_its_ticks_read_apart():
    """A curve flat at exactly 100 MiB gets 1 B of pad each side (8 % of nothing is under 1 B), then
    each widening adds half the range on each side, so the range doubles: 100 MiB ± 2**k B. By hand,
    with three nice ticks labelled to 0.01 MiB: at ± 16 KiB (99.984375 to 100.015625 MiB) the step is
    0.02 MiB and only the 100 MiB tick falls inside; at ± 32 KiB (99.96875 to 100.03125 MiB) the step
    is 0.025 MiB and 99.975, 100 and 100.025 MiB read apart. So the axis is 100 MiB ± 32 KiB."""
    lo, hi, ticks = _y_axis(100.0 * _MIB, 100.0 * _MIB)
    assert (lo, hi) == (100 * _MIB - 32768, 100 * _MIB + 32768)
    assert [t for t, _ in ticks] == pytest.approx([99.975 * _MIB, 100 * _MIB, 100.025 * _MIB])
    assert len({text for _, text in ticks}) == 3, ticks
