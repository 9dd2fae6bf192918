"""Every interactive table of the report, by tab, as the user reads its headers: the recorded H100
traces, a folder of two ranks, a CUDA memory snapshot, a .prof, a profile with steps.

The expected headers are written out here, each list read as a user reads the tab: a header
renamed, dropped or put out of place is a change the user sees (and docs and notebooks quote), so
it fails here first. A column that shows only when its data is there (GPU time under ranges, the
outermost-range share, a bandwidth) is in the list of the trace that has it."""

from __future__ import annotations

import cProfile

import pytest

import nbprof

from .conftest import trace_path
from .test_mutants_views3 import dt_tables, panels

OPS = ["Name", "Self CPU %", "Self CPU", "CPU total", "CPU avg", "Self CUDA %", "Self CUDA", "CUDA total", "CUDA avg"]
MEM = ["CPU Mem", "Self CPU Mem", "CUDA Mem", "Self CUDA Mem"]
KERNELS = ["Kernel", "Kind", "Calls", "GPU time %", "Total", "Avg", "Min", "Max", "Launched by", "Bytes", "Grid",
           "Block", "Regs", "Shared mem", "Blocks/SM", "Occupancy %", "Tensor Cores", "Streams"]


def headers(report_html: str) -> dict[str, list[list[str]]]:
    return {tab: [t["headers"] for t in dt_tables(html)] for tab, html in panels(report_html).items()}


def test_a_training_runs_tabs():
    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    got = headers(p.report(limit=0).html(include_library=False))
    assert list(got) == ["Operators", "By input shape", "Memory", "Kernels", "Ranges", "Timeline"]
    assert got["Operators"] == [OPS + MEM + ["Calls", "Kind"]]
    assert got["By input shape"] == [OPS[:1] + ["Input shapes"] + OPS[1:] + MEM + ["Calls", "Kind"]]
    assert got["Memory"] == [["Name", "Calls", "Self CUDA Mem", "CUDA Mem", "Self CPU Mem", "CPU Mem", "Kind"],
                             ["Size", "Allocated in", "Under", "At", "Held for", "Freed at"],
                             ["Size", "Allocated in", "Under", "At", "Held for", "Freed at"],
                             ["Size", "Device", "Allocated in", "Under", "At"]]
    assert got["Kernels"] == [KERNELS]
    assert got["Ranges"] == [["Range", "Calls", "Total", "Mean", "Share of span", "Share of outermost range",
                              "GPU time (kernels)", "Top operators (self CPU)"]]
    assert got["Timeline"] == []


def test_an_inference_run_with_stacks_and_lines():
    p = nbprof.load_trace(trace_path("transformer_infer_stack"))
    got = headers(p.report(limit=0).html(include_library=False))
    assert list(got) == ["Operators", "By input shape", "By stack", "Source", "Memory", "Kernels", "Modules",
                         "Timeline"]
    assert got["By stack"] == [OPS[:1] + ["Stack"] + OPS[1:] + ["Calls", "Kind"]]
    assert got["Source"] == [["Line", "Source", "Ops", "Self CPU", "CPU total", "Self device", "Share", "Device total",
                              "Function"]]
    assert got["Modules"] == [["Module", "Type", "Calls", "CPU total", "Self CPU", "GPU total", "Self GPU", "Path"]]


def test_a_folder_of_ranks(tmp_path):
    from .test_cluster_timeline import ddp

    p = nbprof.load_trace(ddp(tmp_path))
    got = headers(p.report(limit=0).html(include_library=False))
    assert list(got) == ["Ranks", "Operators", "By input shape", "Memory", "Kernels", "Ranges", "Steps", "Timeline"]
    assert got["Ranks"] == [["Rank", "Span", "Self CPU", "Ops"],
                            ["Name", "Kind", "Calls (min)", "Calls (max)", "Time (min rank)", "Time (max rank)",
                             "Spread", "Slowest rank"],
                            ["Rank", "Collective", "Process group", "Calls", "Total", "Mean", "Max", "Bytes"]]
    assert got["Operators"] == [["Name", "Self CPU %", "Self CPU", "Self CPU, least rank", "Self CPU, most rank",
                                 "Most on rank", "CPU total", "CPU avg", "Calls", "Kind"]]
    assert got["Ranges"] == [["Range", "Calls", "Total", "Total, least rank", "Total, most rank", "Most on rank", "Mean",
                              "Share of span", "Share of outermost range", "Top operators (self CPU)"]]
    # the steps side by side: each column a rank's step, named so (not the pair "(0, 2)")
    assert got["Steps"] == [["Rank", "Step", "Duration", "Self CPU", "Ops", "Top op", "Top op time"],
                            ["Name"] + [f"rank {r} · step {s}" for r in (0, 1) for s in (2, 3, 4)]]


def test_a_profile_with_steps(tmp_path):
    from .synthetic import Trace

    t = Trace()
    for k in range(3):
        t.annotation(f"ProfilerStep#{k}", 1000 * k, 999)
        t.op("aten::mm", 1000 * k + 10, 500)
    got = headers(nbprof.load_trace(t.write(tmp_path / "steps.json")).report(limit=0).html(include_library=False))
    assert got["Steps"] == [["Step", "Duration", "Self CPU", "Ops", "Top op", "Top op time"],
                            ["Name", "step 0", "step 1", "step 2"]]


def test_a_cuda_memory_snapshot(tmp_path):
    from .snapshots import hand_snapshot, write

    p = nbprof.load_snapshot(write(hand_snapshot(), tmp_path / "s.pickle"))
    got = headers(p.report(limit=0).html(include_library=False))
    assert got == {
        "Over time": [],
        "At the peak": [["Line", "Held", "Blocks"], ["Size", "Allocated by", "In", "At", "Device",
                                                     "Stack (innermost first)"]],
        "At the end": [["Line", "Held", "Blocks"], ["Size", "Allocated by", "In", "At", "Device", "State",
                                                    "Stack (innermost first)"]],
        "Segments": [["Device", "Reserved", "Allocated", "Requested", "Free", "Largest free", "Blocks", "Pool",
                      "Stream"]],
        "OOMs": [["Device", "At", "Asked for", "CUDA free", "Active", "Reserved"]],
    }


def test_a_prof_file(tmp_path):
    """pstats' own column names, as `%prun` and snakeviz show them."""
    profile = cProfile.Profile()
    profile.enable()
    sorted(str(i) for i in range(2000))
    profile.disable()
    profile.dump_stats(tmp_path / "w.prof")
    got = headers(nbprof.load_prof(tmp_path / "w.prof").report(limit=0).html(include_library=False))
    assert list(got) == ["Functions", "Callers & callees", "Flame"]
    assert got["Functions"] == [["ncalls", "tottime", "tottime %", "percall", "cumtime", "percall",
                                 "filename:lineno(function)"]]


@pytest.mark.parametrize("name", ["cnn_train_cuda", "transformer_infer_stack"])
def test_no_header_is_empty_or_said_twice_in_a_table(name):
    got = headers(nbprof.load_trace(trace_path(name)).report(limit=0).html(include_library=False))
    for tab, tables in got.items():
        for heads in tables:
            assert all(h.strip() for h in heads), (tab, heads)
            assert len(set(heads)) == len(heads), (tab, heads)


def captions(report_html: str) -> dict[str, list[str]]:
    from .test_mutants_snapshot import dt_tables as with_captions

    return {tab: [t["caption"] for t in with_captions(html)] for tab, html in panels(report_html).items()}


def test_what_each_table_says_it_holds(tmp_path):
    """The line under each table that says what its rows are (and which call gives them all)."""
    from .snapshots import hand_snapshot, write
    from .test_cluster_timeline import ddp

    cnn = captions(nbprof.load_trace(trace_path("cnn_train_cuda")).report(limit=0).html(include_library=False))
    peak = "blocks alive at the peak, biggest first (Freed at — : still held when the profile ended); p.alive_at(t, device)"
    assert cnn["Memory"] == ["memory allocated (+) and freed (−) inside each operator; self = not in its children",
                             peak, peak,
                             "blocks allocated during the profile and never freed in it, biggest first; "
                             "p.alive_at_end()"]
    ranges = "record_function ranges (Lightning's actions among them), nested ranges indented"
    assert cnn["Ranges"] == [ranges] and cnn["Operators"] == [""] and cnn["Kernels"] == [""]
    infer = captions(nbprof.load_trace(trace_path("transformer_infer_stack")).report(limit=0).html(include_library=False))
    assert infer["Modules"] == ["nn.Module calls as a tree: self = total less the child modules' calls"]
    folder = captions(nbprof.load_trace(ddp(tmp_path)).report(limit=0).html(include_library=False))
    spread = "what one rank spent (0 on a rank without the row), and the rank that spent the most"
    assert folder["Ranks"] == ["one row per rank", "operators and kernels that differ across ranks, biggest spread first",
                               "collectives per rank (a rank that spends longer in one waits there for the others)"]
    assert folder["Operators"] == [f"summed over 2 ranks; Self CPU, least / most rank: {spread}"]
    assert folder["Ranges"] == [f"{ranges}; summed over 2 ranks; Total, least / most rank: {spread}"]
    assert folder["Steps"] == ["one row per recorded step", "self CPU time per op, steps side by side"]
    snap = captions(nbprof.load_snapshot(write(hand_snapshot(), tmp_path / "s.pickle")).report(limit=0)
                    .html(include_library=False))
    assert snap == {
        "Over time": [],
        "At the peak": ["held per line that allocated it",
                        'the allocations alive at the peak, biggest first (At: since the first entry); p.blocks(at="peak")'],
        "At the end": ["held per line that allocated it", 'blocks alive at the end, biggest first; p.blocks(at="end")'],
        "Segments": ["reserved = allocated + free; allocated = requested + rounding; p.segments()"],
        "OOMs": ["each out-of-memory error the allocator raised"],
    }
