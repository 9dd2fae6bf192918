"""Tests pinned where the seed 75 mutation sample (analysis part) found the suite loose: the points a memory chart
keeps numbered from 0, an allocation without a stack not put on the user's code, a copy of 3 GB read back
from a rank's timeline cache, and the line the memory chart's static drawing shows where it is not styled.

Oracles: curves, traces and stacks built by hand here, whose numbers say the answer (the points
``downsample_max`` keeps counted by hand; the copy's size as written in the trace; ``format.fmt_bytes`` of it)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .snapshots import MODULE, TORCH_EMPTY, frame
from .synthetic import Trace


def test_the_points_a_memory_chart_keeps_are_numbered_from_zero(tmp_path):
    # kills nbprof.analysis.memory.x_drawn_curve__mutmut_30
    # what a rank's worker sends (rank_summaries()[r].memory.curve): numbered 0.. as every table nbprof hands out,
    # not by the positions the points had in the whole curve
    from nbprof.analysis.memory import drawn_curve

    # 10 points at t = 0..9 µs, 2 buckets: t 0..4 fall in bucket 0 (4/9*2 < 1), t 5..9 in bucket 1; kept: each
    # bucket's first point (t 0, t 5), each bucket's highest (t 4: 9 B, t 8: 8 B) and the last (t 9)
    alloc = [1, 5, 2, 3, 9, 4, 1, 2, 8, 0]
    curve = pd.DataFrame({"device": "cuda:0", "time_us": np.arange(10.0), "allocated_bytes": alloc,
                          "reserved_bytes": 16, "delta_bytes": np.diff(np.r_[0, alloc]), "op": "aten::empty"})
    drawn = drawn_curve(curve, 2)
    assert drawn["time_us"].tolist() == [0.0, 4.0, 5.0, 8.0, 9.0]
    assert drawn["allocated_bytes"].tolist() == [1, 9, 4, 8, 0]
    assert drawn.index.tolist() == [0, 1, 2, 3, 4]
    assert drawn.loc[1, "allocated_bytes"] == 9  # the second point kept: the first bucket's peak


def test_an_allocation_without_a_stack_is_not_put_on_the_users_code(tmp_path):
    # kills nbprof.analysis.snapshot.x_user_lines__mutmut_153
    from nbprof.analysis.snapshot import NO_STACK, user_lines
    from nbprof.collect.user_code import UserCode

    script = tmp_path / "train.py"  # the user's script: a file outside the library folders
    script.write_text("x = 1\n" * 10)
    stacks = [[TORCH_EMPTY, MODULE, frame(str(script), 7, "step")],  # called from the script's line 7
              [TORCH_EMPTY, MODULE]]  # torch's frames only
    who = user_lines(stacks, np.array([-1, 0, 1, -1]), UserCode(None))
    assert who["user"].tolist() == [False, True, False, False]
    assert who["label"].iloc[0] == who["label"].iloc[3] == NO_STACK
    assert who["cell"].iloc[0] is None and who["file"].iloc[0] is None
    assert (who["file"].iloc[1], int(who["line"].iloc[1]), who["function"].iloc[1]) == (str(script), 7, "step")


def three_gb_copy() -> Trace:
    """An op that copies 3,000,000,000 bytes (over 31 bits, under 32) to the device in 30 µs."""
    t = Trace()
    e = t.op("aten::copy_", 0.0, 50.0)
    t.launch("Memcpy HtoD", e, 10.0, 5.0, 20.0, 30.0, runtime="cudaMemcpyAsync", cat="gpu_memcpy",
             nbytes=3_000_000_000)
    return t


def test_a_copy_of_3_gb_reads_back_from_the_ranks_timeline_cache(tmp_path):
    # kills nbprof.cluster.timeline.x__narrow__mutmut_30
    # 3,000,000,000 does not fit in 32 signed bits: narrowed to int32 it would read back as -1,294,967,296
    from nbprof.cluster import timeline as ct
    from nbprof.format import fmt_bytes

    p = three_gb_copy().load(tmp_path)
    folder = tmp_path / "cache"
    ct.write_cache(folder, p._events, p.meta)
    assert np.load(folder / "bytes.npy").max() == 3_000_000_000
    frame = ct._RankCache(str(folder)).full_frame()
    by_name = dict(zip(frame["name"].astype(str), frame["bytes"].tolist()))
    assert by_name["Memcpy HtoD"] == 3_000_000_000
    # the copy's hover text in the rank's full view (what the stacked timeline shows): its size and rate
    try:
        data, _ = ct.full_part(str(folder), str(tmp_path / "trace.json"), 2000, np.zeros(0, np.int64))
    finally:
        for f in [f for f in ct._OPEN if f.startswith(str(tmp_path))]:
            ct._OPEN.pop(f)
    hover = data.rects.loc[data.rects["name"] == "Memcpy HtoD", "hover"].tolist()
    assert len(hover) == 1
    assert f"{fmt_bytes(3_000_000_000)} · 100000.0 GB/s" in hover[0]  # 3e9 B / 30 µs = 1e14 B/s


def test_the_memory_charts_unstyled_note_names_it_as_a_sentence(tmp_path):
    # kills nbprof.views.memory.x_memory_curve_figure__mutmut_18
    t = Trace()
    t.op("aten::empty", 0.0, 10.0)
    t.memory(2.0, 1024, 1024, 2 * 1024 * 1024)
    t.memory(6.0, -1024, 0, 2 * 1024 * 1024)
    html = t.load(tmp_path).memory_curve()._repr_mimebundle_()["text/html"]
    assert "<svg" in html
    assert "The memory chart is a drawing that shows once the notebook is trusted" in html
