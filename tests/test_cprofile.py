"""%%cprofile against pstats computed from the same cProfile run (``result.profiler``)."""

from __future__ import annotations

import pstats

import pytest

from nbprof.errors import OptionError

from .conftest import reports, run

WORKLOAD = """
def leaf(n):
    return sum(range(n))

def middle(n):
    return [leaf(n) for _ in range(3)]

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def top():
    middle(50)
    middle(500)
    return fib(12)

top()
sorted([3, 1, 2])
"""


@pytest.fixture
def profiled(shell):
    result, captured = run(shell, "%%cprofile -q -o cp\n" + WORKLOAD)
    assert result.error_in_exec is None
    return shell.user_ns["cp"]


def _pstats_rows(profile) -> dict:
    """pstats' view of the same run, without nbprof's own functions."""
    st = pstats.Stats(profile.profiler)
    return {k: v for k, v in st.stats.items() if "nbprof" not in k[0] and not k[2].startswith("<method 'disable'")}


def test_stats_equal_pstats(profiled):
    expected = _pstats_rows(profiled)
    stats = profiled.stats
    assert list(stats.columns) == ["function", "filename", "lineno", "ncalls", "primitive_calls", "tottime_s",
                                   "cumtime_s", "tottime_per_call_s", "cumtime_per_call_s"]
    ours = {(r.filename, r.lineno, r.function): r for r in stats.itertuples()}
    assert set(ours) == set(expected)
    for key, (cc, nc, tt, ct, _) in expected.items():
        r = ours[key]
        assert (r.ncalls, r.primitive_calls) == (nc, cc)
        assert r.tottime_s == tt and r.cumtime_s == ct
        assert r.tottime_per_call_s == pytest.approx(tt / nc)
        assert r.cumtime_per_call_s == pytest.approx(ct / cc)
    fib = stats[stats["function"] == "fib"].iloc[0]
    assert fib["ncalls"] == 465 and fib["primitive_calls"] == 1  # recursion: 465/1 in pstats
    assert not stats["filename"].str.contains("nbprof").any()


def test_callers_and_callees_equal_pstats(profiled):
    st = pstats.Stats(profiled.profiler)
    st.calc_callees()
    leaf_key = next(k for k in st.stats if k[2] == "leaf")
    middle_key = next(k for k in st.stats if k[2] == "middle")

    callers = profiled.callers("leaf")
    [(caller, (nc, cc, tt, ct))] = [(c, v) for c, v in st.stats[leaf_key][4].items()]
    assert len(callers) == 1
    row = callers.iloc[0]
    assert (row["filename"], row["lineno"], row["function"]) == caller
    assert (row["ncalls"], row["primitive_calls"], row["tottime_s"], row["cumtime_s"]) == (nc, cc, tt, ct)

    callees = profiled.callees(middle_key)
    expected = st.all_callees[middle_key]
    assert len(callees) == len(expected)
    for r in callees.itertuples():
        nc, cc, tt, ct = expected[(r.filename, r.lineno, r.function)]
        assert (r.ncalls, r.primitive_calls, r.tottime_s, r.cumtime_s) == (nc, cc, tt, ct)


def test_functions_can_be_named_several_ways(shell, profiled):
    by_name = profiled.callees("top")
    by_object = profiled.callees(shell.user_ns["top"])
    assert by_name.equals(by_object)
    assert set(by_name["function"]) == {"middle", "fib"}
    with pytest.raises(OptionError, match="not in this profile"):
        profiled.callers("no_such_function")


def test_dump_opens_in_pstats(profiled, tmp_path):
    path = profiled.dump(tmp_path / "cell.prof")
    loaded = pstats.Stats(str(path))
    assert loaded.stats == profiled.pstats.stats
    assert loaded.total_calls == profiled.stats["ncalls"].sum()


def test_dump_flag_and_report(shell, tmp_path):
    target = tmp_path / "out.prof"
    result, captured = run(shell, f"%%cprofile --dump {target} -s cumtime -l 3\n{WORKLOAD}")
    assert target.exists() and pstats.Stats(str(target)).total_calls > 0
    [report] = reports(captured)
    text = report["text/plain"]
    assert text.startswith("cProfile: ")
    assert "3 of " in text  # the limit
    assert "In [" in text  # the cell's functions are named after the cell, not a temp file


def test_line_magic_profiles_the_statement_without_nbprof_or_ipython_rows(shell):
    result, _ = run(shell, "def work(n):\n    return sum(i * i for i in range(n))")
    result, _ = run(shell, "%cprofile -q -o line_cp work(20000)")
    stats = shell.user_ns["line_cp"].stats
    assert (stats["ncalls"] > 0).all()
    assert not stats["filename"].str.contains("interactiveshell|nbprof").any()
    work = stats[stats["function"] == "work"].iloc[0]
    assert work["ncalls"] == 1 and work["cumtime_s"] > 0
    tree = shell.user_ns["line_cp"].call_tree()
    assert len(tree) > 1 and tree.loc[tree["parent"] == -1, "value_s"].iloc[0] > 0


def test_actions_group_calls_by_the_innermost_action(shell):
    """A framework's actions (Lightning's hooks report them through the run's collector): each call
    is in the profile of the action that was innermost when it was made, counted once; the
    enclosing action's profile records again when a nested one ends."""
    run(shell, "def a():\n    return sum(range(10))\ndef b():\n    return [a() for _ in range(3)]")
    result, _ = run(shell, "%%cprofile -q -o ac\nfrom nbprof.run import runner\nc = runner.active().collector\na()\n"
                           "c.begin_action('X')\nb()\nc.begin_action('Y')\na()\nc.end_action('Y')\na()\n"
                           "c.end_action('X')\na()\nc.end_action('never began')")
    assert result.success, result.error_in_exec
    ac = shell.user_ns["ac"]
    calls = {(x.action, x.function): x.ncalls for x in ac.action_stats().itertuples() if x.function in ("a", "b")}
    assert calls == {("(outside every action)", "a"): 2, ("X", "a"): 4, ("X", "b"): 1, ("Y", "a"): 1}
    st = ac.stats.set_index("function")
    assert st.loc["a", "ncalls"] == 7 and st.loc["b", "ncalls"] == 1
    actions = ac.actions().set_index("action")
    assert actions["count"].to_dict() == {"(outside every action)": 1, "X": 1, "Y": 1}
    assert actions["share_of_total"].sum() == pytest.approx(1.0)
    assert not any("another" in n for n in ac.meta.notes)  # nbprof's own switches are no takeover
    with pytest.raises(OptionError, match="no single action 'Z'"):
        ac.action_stats("Z")
    assert ac.action_stats("Y")["function"].tolist().count("a") == 1
