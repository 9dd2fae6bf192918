"""Seed 73, ``--lines`` of ``%%cprofile``: the ``hot_line`` finding's place among a Python
profile's findings of the same severity (ordered by how much of the run each one covers)."""

from __future__ import annotations

import pandas as pd
import pytest


def _profile_with_a_hot_line(wall_s: float, line_own_us: float):
    """A PythonProfile of 1.000 s (cProfile's total): ``work`` (3 calls) has 0.6 s of its own, the
    cell's <module> the other 0.4 s; ``--lines`` saw one line, In [3] line 2, with ``line_own_us``
    of its own time, in a run of ``wall_s``."""
    from nbprof.collect.python_lines import LINE_COLUMNS
    from nbprof.meta import PythonMeta
    from nbprof.model import PythonProfile

    main = ("main.py", 1, "<module>")
    raw = {main: (1, 1, 0.4, 1.0, {}), ("main.py", 10, "work"): (3, 3, 0.6, 0.6, {main: (3, 3, 0.6, 0.6)})}
    lines = pd.DataFrame([{"cell": "In [3]", "file": "<ipython-input-3-abc>", "line": 2, "function": "<module>",
                           "function_line": 1, "source": "y = work(x)", "hits": 3, "time_us": line_own_us,
                           "per_hit_us": line_own_us / 3, "self_time_us": line_own_us}])[list(LINE_COLUMNS)]
    meta = PythonMeta(wall_s=wall_s, with_lines=True)
    return PythonProfile(raw, meta, lines=lines)


def test_a_hot_line_covering_more_of_the_run_than_the_top_function_is_listed_first():
    # the line: 900 ms of a 1 s run (90 %, medium); work: 600 ms of cProfile's 1 s (60 %, medium).
    # Findings of one severity come larger share first: the line, then the function.
    p = _profile_with_a_hot_line(wall_s=1.0, line_own_us=900_000.0)
    f = p.findings
    assert f["kind"].tolist() == ["hot_line", "top_function"]
    assert f["severity"].tolist() == ["medium", "medium"]
    assert f["evidence"].iloc[0]["share_of_wall"] == pytest.approx(0.9)
    assert f["evidence"].iloc[1]["share"] == pytest.approx(0.6)


def test_a_hot_line_covering_less_of_the_run_than_the_top_function_is_listed_after_it():
    # the line: 400 ms of the 1 s run (40 %, medium) against work's 60 %: the function first
    p = _profile_with_a_hot_line(wall_s=1.0, line_own_us=400_000.0)
    f = p.findings
    assert f["kind"].tolist() == ["top_function", "hot_line"]
    assert f["severity"].tolist() == ["medium", "medium"]
