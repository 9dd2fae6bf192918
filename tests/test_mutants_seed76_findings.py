"""What seed 76's sample of mutants (the cProfile findings ``top_function`` and ``hot_function``) showed
no test held, each against an answer of its own: cProfile rows written here by hand (calls, own and
cumulative seconds) whose times sit just under a rounding edge of the message's numbers, so the
expected text is worked out by hand in the comments, and a DataLoader loop recorded by hand
(tests/test_data_loading_findings.py's ``loop_record``) whose steady share is known from its waits."""

from __future__ import annotations

import pytest

from .test_data_loading_findings import loop_record
from .test_mutants_findings import finding

TOP_TAIL = "Sort by cumtime (-s cumtime) to see which caller is behind it; .callers(name) lists them."


def _profile(rows: dict[str, tuple[int, float, float]], total_s: float, data_loading=None):
    """A PythonProfile: ``{function: (ncalls, tottime_s, cumtime_s)}`` in main.py (line 10, 20, ...)
    called by <module> (line 1), whose own time makes cProfile's total ``total_s``."""
    from nbprof.meta import PythonMeta
    from nbprof.model import PythonProfile

    main = ("main.py", 1, "<module>")
    raw = {main: (1, 1, total_s - sum(tt for _, tt, _ in rows.values()), total_s, {})}
    for i, (fn, (nc, tt, ct)) in enumerate(rows.items()):
        raw[("main.py", 10 * (i + 1), fn)] = (nc, nc, tt, ct, {main: (nc, nc, tt, ct)})
    return PythonProfile(raw, PythonMeta(data_loading=data_loading))


# ------------------------------------------------------------------------------- top_function


def test_top_functions_own_time_just_under_a_second_reads_in_ms_and_its_share_is_of_the_total():
    """``work`` has 0.9999995 s of its own in a 2 s run (``other`` 0.5 s, <module> 0.5000005 s):
    999,999.5 µs is under a second, so "1000.00 ms"; its share is 0.9999995 / 2 = 49.999975 %, "50%",
    under one half: "low"."""
    p = _profile({"work": (4, 0.9999995, 0.9999995), "other": (1, 0.5, 0.5)}, total_s=2.0)
    sev, msg, ev = finding(p, "top_function")
    # kills nbprof.analysis.findings.top_function.x_find__mutmut_11
    assert sev == "low" and ev["share"] == pytest.approx(0.49999975, rel=1e-12)
    # kills nbprof.analysis.findings.top_function.x_find__mutmut_19
    assert msg == ("main.py:10(work) spends the most time in its own code: 1000.00 ms, 50% of 2.000 s, "
                   "over 4 calls. " + TOP_TAIL)


def test_a_total_just_under_a_second_reads_in_ms():
    """A run of 0.9999995 s (999,999.5 µs: "1000.00 ms"), ``work`` with 0.6 s of its own, 60 %."""
    p = _profile({"work": (3, 0.6, 0.6)}, total_s=0.9999995)
    sev, msg, ev = finding(p, "top_function")
    # kills nbprof.analysis.findings.top_function.x_find__mutmut_23
    assert msg == ("main.py:10(work) spends the most time in its own code: 600.00 ms, 60% of 1000.00 ms, "
                   "over 3 calls. " + TOP_TAIL)
    assert sev == "medium" and ev["share"] == pytest.approx(0.6 / 0.9999995, rel=1e-12)


# ------------------------------------------------------------------------------- hot_function


def test_a_hot_functions_time_per_call_is_rounded_down_just_under_the_edge():
    """``tiny``: 20,000 calls for 1.0009998 s (with what it calls) of a 2 s run: 50.04999 µs a
    call, which rounds to "50.0 µs" (a millionth more, 50.05004, would read "50.1 µs"); 50.05 %
    of the run, "high"."""
    p = _profile({"tiny": (20_000, 1.0009998, 1.0009998)}, total_s=2.0)
    sev, msg, ev = finding(p, "hot_function")
    # kills nbprof.analysis.findings.hot_function.x_find__mutmut_40
    assert msg.startswith("main.py:10(tiny) was called 20,000 times, 50.0 µs per call, 50% of the time with what "
                          "it calls: the cost is in the number of calls. ")
    assert sev == "high" and ev["per_call_s"] == pytest.approx(5.004999e-5, rel=1e-12)


def test_a_hot_function_comes_before_a_smaller_wait_for_data_of_the_same_severity():
    """Two "medium" findings besides <module>'s own 80 % (``top_function``, medium, first): ``tiny``
    called 20,000 times for 20 % of the run, and the loop waiting for its batches 10 % of its steady
    time (after the first batch: 5 waits of 200 µs against 5 steps of 1000 µs, the last step and a
    3000 µs StopIteration call: 1000 / 10000). One severity orders by share, larger first: the hot
    function, then the wait."""
    rec = loop_record([400.0] + [200.0] * 5, step_us=1000.0, make_us=3000.0, start_us=100.0, stop_us=3000.0)
    p = _profile({"tiny": (20_000, 0.2, 0.2)}, total_s=1.0, data_loading=rec)
    f = p.findings
    # kills nbprof.analysis.findings.hot_function.x_find__mutmut_54
    assert f["kind"].tolist() == ["top_function", "hot_function", "data_bound"]
    assert f["severity"].tolist() == ["medium"] * 3
    assert f["evidence"].iloc[1]["share"] == pytest.approx(0.2)
    assert f["evidence"].iloc[2]["steady_share"] == pytest.approx(0.1)
