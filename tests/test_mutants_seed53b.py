"""Seed 53's survivors (issue 38), second helper: what the workers' time goes to in a DataLoader
finding (its share of the workers' own time, against pstats' totals of the same stats), the
finding's loader named in its messages, a folder's Modules tab's spread columns and caption, and
each box of the flame SVG against pstats' cumtimes of the same run.

The oracles: real cProfile runs of this file's own functions read with pstats (``total_tt``, the
callers' edges), DataLoader records written by hand (tests/test_data_loading_findings.py, whose
numbers are worked out there), and each rank of the recorded folder ``tests/data/cluster_views``
loaded alone."""

from __future__ import annotations

import cProfile
import pstats
import time
import xml.etree.ElementTree as ET

import pytest

import nbprof
from nbprof.views.tabs import CLUSTER_TABS, TORCH_TABS

from .conftest import DATA
from .test_mutants_snapshot import dt_tables
from .test_data_loading_findings import data_bound, loop_record, profile_of, steady

# --------------------------------------------------------- data_loading._top_function (mutant 6)
# The workers' functions: the run's own cProfile stats, so the oracle is pstats on the same stats.


def decode():
    time.sleep(0.006)  # 6x augment's nap: a busy machine's oversleeping never makes augment the larger


def augment():
    time.sleep(0.001)


def getitem():
    decode()
    augment()


def spin():
    x = 0
    for i in range(60_000):
        x += i
    return x


def worker_profile(work, times: int) -> cProfile.Profile:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(times):
        work()
    prof.disable()
    return prof


def with_worker_stats(profiles: list[cProfile.Profile]):
    """A loop that waits for its batches (a data_bound finding: tests/test_data_loading_findings.py's
    ``test_how_many_workers_keep_up``), each worker's functions the stats of one real profile."""
    rec = loop_record([400.0] + [3000.0] * 5, step_us=2000.0, make_us=9500.0, start_us=100.0,
                      workers=len(profiles))
    for w, prof in zip(rec.workers, profiles):
        w.stats = pstats.Stats(prof).stats
    return steady(profile_of(rec))


DISABLE = ("~", 0, "<method 'disable' of '_lsprof.Profiler' objects>")


def pstats_of(profiles: list[cProfile.Profile]) -> tuple[pstats.Stats, float]:
    """pstats' own merge of the workers' profiles, and its total own time less the profiler's own
    ``disable()`` call (the recording's, not the worker's: nbprof's worker disables it)."""
    st = pstats.Stats(profiles[0])
    for prof in profiles[1:]:
        st.add(prof)
    return st, st.total_tt - st.stats[DISABLE][2]


def test_a_builtin_taking_the_workers_time_is_named_with_its_caller_and_its_share_of_their_own_time():
    """Both workers sleep in decode (6 ms) and augment (1 ms): time.sleep has the most own time,
    decode called it for most of it; its share is of the workers' own time (pstats' total_tt of
    both profiles merged), not of their cumulative times added up (which count each sleep once per
    caller on the stack)."""
    profiles = [worker_profile(getitem, 3), worker_profile(getitem, 2)]
    f = with_worker_stats(profiles)
    st, total_tt = pstats_of(profiles)
    (key, value), = [(k, v) for k, v in st.stats.items() if k[2] == "<built-in method time.sleep>"]
    assert max(st.stats.values(), key=lambda v: v[2]) is value  # pstats: the most tottime
    callers = {k[2]: v[2] for k, v in value[4].items()}
    assert callers["decode"] > callers["augment"]
    line = decode.__code__.co_firstlineno
    e = f["evidence"]
    assert e["top_function"] == f"<built-in method time.sleep>, called from decode (test_mutants_seed53b.py:{line})"
    share = value[2] / total_tt
    assert e["top_share"] == pytest.approx(share, rel=1e-9)
    assert 0.9 < share < 1.0  # sleeping is nearly all of it; the cumtimes added up would give < 0.5
    assert f"What takes the time in making them: {e['top_function']} ({100 * share:.0f}%)." in f["message"]


def test_a_python_function_taking_the_workers_time_is_named_without_a_caller():
    profiles = [worker_profile(spin, 2), worker_profile(spin, 1)]
    f = with_worker_stats(profiles)
    st, total_tt = pstats_of(profiles)
    (key, value), = [(k, v) for k, v in st.stats.items() if k[2] == "spin"]
    assert max(st.stats.values(), key=lambda v: v[2]) is value
    e = f["evidence"]
    assert e["top_function"] == f"spin (test_mutants_seed53b.py:{spin.__code__.co_firstlineno})"
    assert e["top_share"] == pytest.approx(value[2] / total_tt, rel=1e-9)
    assert f"What takes the time in making them: {e['top_function']} (" in f["message"]


def test_workers_without_functions_name_none():
    rec = loop_record([400.0] + [3000.0] * 5, step_us=2000.0, make_us=9500.0, start_us=100.0, stats=False)
    f = steady(profile_of(rec))
    assert (f["evidence"]["top_function"], f["evidence"]["top_share"]) == ("", 0.0)
    assert "What takes the time" not in f["message"]


# ------------------------------------------------------ findings.data_bound._measured (mutant 1)


def test_both_data_bound_findings_name_the_loader_word_for_word():
    """A loader the user called ``val_loader``. The loop: the iterator 100 µs, the first wait
    400 µs, then 5 waits of 3000 µs each after 2000 µs of work, the last step 2000 µs and the
    StopIteration call 5 µs: steady wait 15000 over 27005 µs (56 %). Its start (fork, one epoch)
    is no finding: the third loop's start with spawn is."""
    rec = loop_record([400.0] + [3000.0] * 5, step_us=2000.0, make_us=9500.0, start_us=100.0)
    rec.loaders[0].name = "val_loader"
    f = steady(profile_of(rec))
    assert f["evidence"]["loader"] == "val_loader"
    assert f["message"].startswith("The loop waited for val_loader's batches 56% of its time "
                                   "(15.00 ms over 5 batches, not counting the first). ")
    # every epoch's first batch: two epochs
    rec = loop_record([400.0] + [3000.0] * 5, step_us=2000.0, make_us=9500.0, start_us=100.0, epochs=2,
                      persistent=True)
    rec.loaders[0].name = "val_loader"
    f = steady(profile_of(rec))
    assert f["message"].startswith("The loop waited for val_loader's batches 56% of its time "
                                   "(30.00 ms over 10 batches, not counting each epoch's first). ")
    # the workers' start (spawn): the iterator 20 ms, the first wait 4 ms
    rec = loop_record([4000.0, 100.0, 100.0, 100.0], start_us=20_000.0, method="spawn")
    rec.loaders[0].name = "val_loader"
    start = data_bound(profile_of(rec))
    msgs = [m for m in start["message"] if m.startswith("Starting")]
    # the loop: 20000 + 4000 + 3 x (1000 + 100) + 1000 + 5 = 28305 µs; the start 24000 µs: 85 %
    assert msgs == ["Starting val_loader's workers (until each epoch's first batch) took 24.00 ms, 85% of the "
                    "loop (spawn: each worker starts a new Python and imports your dataset's modules). Keep what "
                    "the dataset's module imports light; a longer loop pays it once, and with "
                    "persistent_workers=True every epoch after the first does not pay it again."]


# --------------------------------------------------------------- views.tabs.modules.render (133)

RANKS = DATA / "cluster_views" / "ranks"


def table_args(markup: str) -> dict:
    """The one interactive table of ``markup`` as DataTables gets it: headers, rows, caption."""
    [t] = dt_tables(markup)
    return t


@pytest.fixture(scope="module")
def ranks_folder():
    folder = nbprof.load_trace(RANKS, workers=0, progress=False)
    alone = {}
    for f in sorted(RANKS.iterdir()):
        one = nbprof.load_trace(f)
        alone[one.meta.rank] = one
    return folder, alone


def modules_panel(report, tabs) -> str:
    return next(t for t in tabs if t.title == "Modules").html(report)


def test_a_folders_modules_tab_says_each_modules_cpu_total_on_its_least_and_most_rank(ranks_folder):
    """Two ranks of a DDP run on the CPU (tests/cluster_workload.py): every module on both, its CPU
    total differing between them. The spread's columns sit right after CPU total and are named
    after it, as the caption says; each row's least and most are those of each rank loaded
    alone."""
    p, alone = ranks_folder
    t = table_args(modules_panel(p.report(), CLUSTER_TABS))
    assert t["headers"] == ["Module", "Type", "Calls", "CPU total", "CPU total, least rank", "CPU total, most rank",
                            "Most on rank", "Self CPU", "Path"]
    assert t["caption"] == ("nn.Module calls as a tree: self = total less the child modules' calls; summed over 2 "
                            "ranks; CPU total, least / most rank: what one rank spent (0 on a rank without the row), "
                            "and the rank that spent the most")
    own = {r: one.modules().set_index("module")["cpu_total_us"] for r, one in alone.items()}
    assert len(t["rows"]) == len(own[0]) == len(own[1]) >= 6
    for row in t["rows"]:
        path = row[-1]
        values = {r: float(own[r][path]) for r in own}
        assert row[3] == pytest.approx(sum(values.values()), rel=1e-9)
        assert row[4:7] == [pytest.approx(min(values.values()), rel=1e-9),
                            pytest.approx(max(values.values()), rel=1e-9), str(max(values, key=values.get))]


def test_one_ranks_modules_tab_has_no_spread(ranks_folder):
    _, alone = ranks_folder
    t = table_args(modules_panel(alone[0].report(), TORCH_TABS))
    assert t["headers"] == ["Module", "Type", "Calls", "CPU total", "Self CPU", "Path"]
    assert t["caption"] == "nn.Module calls as a tree: self = total less the child modules' calls"


# ---------------------------------------------------------------- views.flame.flame_svg (164)


# naps far enough apart that a busy machine's oversleeping (a few ms) never reorders the boxes (the
# icicle lays siblings out biggest first): branch_a 30 ms against branch_b's 5, leaf_a 20 against 10
# (at 6 ms against 3 a loaded run's branch_b took 6.5 ms and came first)
def leaf_a():
    time.sleep(0.02)


def leaf_b():
    time.sleep(0.01)


def branch_a():
    leaf_a()
    leaf_b()


def branch_b():
    time.sleep(0.005)


def flame_work():
    branch_a()
    branch_b()


def test_each_flame_box_is_its_calls_share_of_the_width_less_a_1px_gap():
    """A real cProfile run read back from the SVG: each box is as wide as its call's cumtime (pstats:
    the function's own for a top-level call, its caller's edge below) over the whole profile's,
    less 1 px, so siblings laid side by side have a 1 px gap between them; the root is the whole
    width less 1 px (half a pixel at least); a box under half a pixel (the profiler's disable call,
    most runs) is left out."""
    from nbprof.model import PythonProfile
    from nbprof.views.flame import flame_svg

    prof = worker_profile(flame_work, 1)
    st = pstats.Stats(prof)
    width = 800
    svg = flame_svg(PythonProfile(pstats.Stats(prof).stats).call_tree(min_fraction=0), width=width)
    ns = "{http://www.w3.org/2000/svg}"
    boxes = []
    for g in ET.fromstring(svg).iter(f"{ns}g"):
        r = g.find(f"{ns}rect")
        boxes.append({"head": g.find(f"{ns}title").text.splitlines()[0], "depth": int(r.get("y")) // 20,
                      "x": float(r.get("x")), "w": float(r.get("width"))})
    top_level = [k for k, v in st.stats.items() if not v[4]]
    whole = sum(st.stats[k][3] for k in top_level)  # the root: every top-level call's cumtime

    def key_of(head: str):
        [k] = [k for k in st.stats if (k[0] == "~" and head == "{%s}" % k[2][1:-1])
               or (k[0] != "~" and head.endswith(f":{k[1]}({k[2]})"))]
        return k

    def parent_of(box):
        [p] = [b for b in boxes if b["depth"] == box["depth"] - 1 and b["x"] <= box["x"] < b["x"] + b["w"] + 1]
        return p

    # the profiler's disable() call, top level: drawn only where its box is half a pixel wide or more
    # (it usually takes ~1 µs of the run's ~1 ms; a busy moment of the machine can make it wider)
    [disable] = [k for k in top_level if k[0] == "~" and "disable" in k[2]]
    drawn = st.stats[disable][3] / whole * width >= 0.5  # flame_svg's min_px
    assert [b["depth"] for b in boxes] == [0, 1, 2, 3, 4, 3, 4, 2, 3] + ([1] if drawn else [])
    assert boxes[0]["w"] == width - 1 and boxes[0]["x"] == 0.0
    for box in boxes[1:]:
        k = key_of(box["head"])
        if box["depth"] == 1:
            value = st.stats[k][3]
        else:
            value = st.stats[k][4][key_of(parent_of(box)["head"])][3]
        assert box["w"] == pytest.approx(max(value / whole * width - 1, 0.5), abs=0.051), box  # 0.5 at least
    for depth in range(1, 5):  # siblings side by side, 1 px apart (x, w and the next x each to 0.1 px)
        row = [b for b in boxes if b["depth"] == depth]
        for a, b in zip(row, row[1:]):
            if parent_of(a) is parent_of(b):
                assert b["x"] - (a["x"] + a["w"]) == pytest.approx(1.0, abs=0.16), (a, b)
    assert sum(1 for b in boxes if b["depth"] == 2) == 2  # branch_a and branch_b, side by side


def test_a_folders_operators_tab_says_each_ops_self_cpu_on_its_least_and_most_rank(ranks_folder):
    """The Operators tab of the same folder (seed 53's operators._render 77 read the ranks' key
    averages summed instead of per rank): the spread's columns after Self CPU, each row's least and
    most those of each rank loaded alone, summed as the folder's total."""
    p, alone = ranks_folder
    t = table_args(next(t for t in CLUSTER_TABS if t.title == "Operators").html(p.report()))
    assert t["headers"][:6] == ["Name", "Self CPU %", "Self CPU", "Self CPU, least rank", "Self CPU, most rank",
                                "Most on rank"]
    assert t["caption"] == ("summed over 2 ranks; Self CPU, least / most rank: what one rank spent (0 on a rank "
                            "without the row), and the rank that spent the most")
    own = {r: one.key_averages().groupby(["name", "kind"])["self_cpu_us"].sum() for r, one in alone.items()}
    assert len(t["rows"]) >= 10
    for row in t["rows"]:
        values = {r: float(own[r].get((row[0], row[-1]), 0.0)) for r in own}
        assert row[2] == pytest.approx(sum(values.values()), rel=1e-9, abs=1e-6)
        assert row[3:6] == [pytest.approx(min(values.values()), rel=1e-9, abs=1e-6),
                            pytest.approx(max(values.values()), rel=1e-9, abs=1e-6), str(max(values, key=values.get))]


def test_a_folders_steps_by_another_metric_are_each_ranks_own(ranks_folder):
    """A folder's step breakdown by CPU total (not the summaries' self CPU: read from every event)
    has one column per (rank, step), each that rank's own step breakdown by CPU total loaded alone
    (seed 53's ClusterProfile.step_breakdown 11 dropped the metric there)."""
    p, alone = ranks_folder
    table = p.step_breakdown("op", "cpu_total_us")
    assert list(table.columns) == [(r, s) for r in sorted(alone) for s in alone[r].step_breakdown().columns]
    for r, one in alone.items():
        own = one.step_breakdown("op", "cpu_total_us")
        mine = table[[(r, s) for s in own.columns]].set_axis(own.columns, axis=1)
        mine = mine[(mine != 0).any(axis=1)].sort_index()
        assert mine.equals(own[(own != 0).any(axis=1)].sort_index().astype(mine.dtypes.iloc[0])), r
    assert not table.equals(p.step_breakdown("op"))  # CPU total, not self CPU


def test_each_ranks_worker_draws_twice_its_share_of_the_view_at_least_2000_at_most_all():
    """A folder's timeline: each rank's worker draws twice its share of the stacked view's
    rectangles (the stacked view merges once more), never fewer than 2,000 (a rank's lanes stay
    readable) nor more than the whole view's (seed 53's rank_budget 12 gave three times)."""
    from nbprof.cluster.timeline import MAX_RECTS, rank_budget

    assert rank_budget(4, 40_000) == 20_000 and 4 * rank_budget(4, 40_000) == 2 * 40_000
    assert rank_budget(8, 40_000) == 10_000
    assert rank_budget(1, 40_000) == 40_000 and rank_budget(0, 40_000) == 40_000  # never over the whole
    assert rank_budget(64, 40_000) == 2000  # the floor
    assert rank_budget(3, 1500) == 1500  # the floor is never over the whole either
    assert rank_budget(2) == min(max(MAX_RECTS, 2000), MAX_RECTS)
