"""Tests written for the survivors of the first fresh sample of the whole package (issue 38,
seed 51, 2026-11-29; docs/testing.md "Mutation score"). Each was run on its mutant and fails
there; the sample's score was measured before they were written."""

from __future__ import annotations

import re

import pandas as pd


def test_htas_idle_breakdown_table_has_htas_categories_per_stream():
    """The HTA idle table of the Ranks tab: a column per HTA idle category (host_wait,
    kernel_wait, other) under its own header, after the (rank, device, stream) it is for; a
    category a stream never had shows 0. Hand-made rows: rank 0's stream waited on the host 1.5 ms
    and on kernels 20 µs. (Which rows there are: the test below.)"""
    from nbprof.views.tabs.ranks import hta_idle_html

    rows = pd.DataFrame({"rank": [0, 0, 1], "device": ["cuda:0", "cuda:0", "cuda:1"], "stream": [7, 7, 7],
                         "idle_category": ["host_wait", "kernel_wait", "host_wait"],
                         "idle_time_us": [1500.0, 20.0, 250.0]})
    html = hta_idle_html(rows)
    head = html[html.index("<thead>"):html.index("</thead>")]
    assert re.findall(r"<th[^>]*>([^<]*)</th>", head) == ["Rank", "Device", "Stream", "Host wait", "Kernel wait",
                                                          "Other"]
    body = html[html.index("<tbody>", html.index("</thead>")):]
    first = re.findall(r"<td[^>]*>([^<]*)</td>", re.findall(r"<tr>(.*?)</tr>", body)[0])
    assert first == ["0", "cuda:0", "7", "1.50 ms", "20.0 µs", "0"]
    assert hta_idle_html(rows.iloc[:0]) == ""


def _body_rows(html: str) -> list[list[str]]:
    """The cells of a datatable's body rows, read back from its HTML."""
    body = html[html.index("<tbody>", html.index("</thead>")):]
    return [re.findall(r"<td[^>]*>([^<]*)</td>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", body)]


def test_htas_idle_table_has_a_row_per_stream_each_rank_ran_on_and_no_other(tmp_path):
    """A folder of two ranks of a recorded trace (two CUDA streams), rank 1's GPU work moved to
    cuda:1: the HTA idle table has one row per (rank, device, stream) that has kernels in the rank's
    own file -- rank 0 on cuda:0 and rank 1 on cuda:1, two streams each -- and not the product of
    the three (rank 0 . cuda:1, rank 1 . cuda:0: four rows of zeros under pivot_table(dropna=False)).
    Its numbers are the profile's ranks().hta_idle, summed by stream."""
    import copy
    import gzip
    import json

    import nbprof
    from nbprof.views.tabs.ranks import hta_idle_html

    from .conftest import trace_path

    with gzip.open(trace_path("two_streams")) as f:
        base = json.load(f)
    moved = copy.deepcopy(base)
    for e in moved["traceEvents"]:
        if e.get("pid") == 0:  # the GPU's process (kernels, their flows, its names)
            e["pid"] = 1
            if "device" in e.get("args", {}):
                e["args"]["device"] = 1
    expected = set()
    for r, doc in enumerate([base, moved]):
        doc["distributedInfo"] = {"rank": r, "world_size": 2}
        with open(tmp_path / f"host_{r}.pt.trace.json", "w") as f:
            json.dump(doc, f)
        expected |= {(str(r), f"cuda:{e['args']['device']}", str(e["args"]["stream"]))
                     for e in doc["traceEvents"] if e.get("cat") == "kernel"}
    assert expected == {("0", "cuda:0", "46"), ("0", "cuda:0", "50"), ("1", "cuda:1", "46"), ("1", "cuda:1", "50")}

    idle = nbprof.load_trace(tmp_path).ranks().hta_idle
    rows = _body_rows(hta_idle_html(idle))
    assert sorted(tuple(r[:3]) for r in rows) == sorted(expected)
    # no row lost its numbers: the same file on both ranks, so each stream's waits are the same on
    # both; the trace's streams only wait on the host (a category at 0 keeps its row)
    by_stream = {(r[0], r[2]): r[3:] for r in rows}
    for stream in ("46", "50"):
        assert by_stream[("0", stream)] == by_stream[("1", stream)]
        assert by_stream[("0", stream)][0].endswith(" ms") and by_stream[("0", stream)][1:] == ["0", "0"]


# -- seed 51's real gaps (issue 38) ----------------------------------------------------------------


def test_finish_after_stop_keeps_the_run_stopped_where_the_code_ended():
    """The command line and the integrations stop a run at the end of the code, then finish it
    later (the script's traceback, the fit's teardown in between). finish() must not stop it a
    second time: the run's wall time is the code's, not the code's plus what came after. Bound by
    the test's own clock: the run began after t0 and stopped before t1; 0.2 s of sleep after t1."""
    import time

    from nbprof.magics import parse_flags
    from nbprof.run import runner

    run = runner.new_run("cprofile", parse_flags("cprofile", "--quiet"))
    t0 = time.perf_counter()
    run.begin()
    sum(i * i for i in range(10_000))
    run.stop()
    t1 = time.perf_counter()
    time.sleep(0.2)
    result = run.finish(None)
    assert 0 < result.meta.wall_s <= t1 - t0
    assert runner.active() is None


def test_grouping_by_shape_without_recorded_shapes_says_so_and_groups_by_op():
    """The recorded cnn_cuda_toggled trace has no "Input Dims" (recorded without record_shapes):
    its report asked to group by shape says the shapes were not recorded and groups by op."""
    import gzip
    import json

    import nbprof

    from .conftest import trace_path

    with gzip.open(trace_path("cnn_cuda_toggled")) as f:
        events = json.load(f)["traceEvents"]
    assert not any("Input Dims" in e.get("args", {}) for e in events)
    report = nbprof.load_trace(trace_path("cnn_cuda_toggled")).report(group_by="shape")
    assert report.group_by == "op" and report.opens_on == "op"
    assert "input shapes were not recorded: run with --shapes to group by shape" in report.notes


def test_a_folders_memory_figure_says_each_ranks_most_reserved_even_where_the_chart_drops_it(tmp_path):
    """Two ranks of a hand-made trace with 3,000 allocations and frees (more than the chart's
    points: its workers send a downsampled curve), whose allocator reserves 64 MiB once, at a free
    in the middle of the run, and 1 MiB otherwise (as after empty_cache()). The figure of every
    rank's memory labels each rank's curve "reserved up to 64 MiB", the trace's own largest "Total
    Reserved", though the points it plots do not hold that moment."""
    import nbprof

    from .synthetic import Trace

    mib, n, spike = 1 << 20, 3000, 1501
    most = {}
    for r in (0, 1):
        t = Trace(rank=r)
        t.op("aten::empty", 0, 10.0 * n + 10)
        for i in range(n):
            freeing = i % 2 == 1
            reserved = 64 * mib if i == spike else mib
            t.memory(10.0 * i + 1, -1024 if freeing else 1024, 0 if freeing else 1024, reserved)
        most[r] = max(e["args"]["Total Reserved"] for e in t.events if e.get("name") == "[memory]")
        t.write(tmp_path / f"host_{r}.pt.trace.json")
    assert spike % 2 == 1 and most == {0: 64 * mib, 1: 64 * mib}
    fig = nbprof.load_trace(tmp_path, workers=0, progress=False).memory_curve()
    plotted = {trace.name: int(max(trace.y)) for trace in fig.data}
    assert plotted == {"rank 0 · cuda:0 allocated": 1024, "rank 0 · cuda:0 reserved": mib,
                       "rank 1 · cuda:0 allocated": 1024, "rank 1 · cuda:0 reserved": mib}
    html = fig._repr_mimebundle_()["text/html"]
    labels = re.findall(r"<text [^>]*>(rank \d) · cuda:0: peak [^<]* · reserved up to ([^<]*)</text>", html)
    assert labels == [("rank 0", "64.00 MiB"), ("rank 1", "64.00 MiB")]


def _recorded_steps(tmp_path):
    """Three ProfilerSteps of 1 ms around a hand-made training loop whose one kernel a step runs
    500 µs on cuda:0 (tests/synthetic.py)."""
    from .synthetic import training_loop

    t = training_loop(3, kernel_us=500)
    for i in range(3):
        t.annotation(f"ProfilerStep#{i}", i * 1000.0, 1000.0)
    return t.load(tmp_path)


def test_the_steps_table_has_a_gpu_time_column_of_each_steps_kernels(tmp_path):
    """The Steps tab of a profile with device work: the columns under their headers, the "GPU
    time" one holding each step's kernel time (500 µs, its one kernel's duration in the trace)."""
    from nbprof.views.tabs.steps import render

    html = render(_recorded_steps(tmp_path).report())
    html = html[:html.index("</table>", html.index("<thead>"))]  # the first table: the steps (then the steps side by side)
    head = html[html.index("<thead>"):html.index("</thead>")]
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", head)
    assert headers == ["Step", "Duration", "Self CPU", "Ops", "GPU time", "Kernels", "Top op", "Top op time"]
    rows = _body_rows(html)
    assert [r[0] for r in rows] == ["0", "1", "2"]
    assert {(r[headers.index("GPU time")], r[headers.index("Kernels")]) for r in rows} == {("500.0 µs", "1")}


def test_the_kernels_tabs_gpu_line_explains_its_estimates_in_plain_case():
    """The recorded H100 trace's Kernels tab shows CUPTI's SM efficiency and occupancy estimates,
    and below them what each one means, as written (a sentence, not upper case)."""
    import html as htmllib

    import nbprof
    from nbprof.views.tabs.kernels import gpu_use_line

    from .conftest import trace_path

    line = htmllib.unescape(gpu_use_line(nbprof.load_trace(trace_path("cnn_train_cuda"))))
    assert "est. SM efficiency" in line and "est. achieved occupancy" in line
    hint = re.search(r'<div class="nbprof-empty"[^>]*>([^<]*)</div>', line).group(1)
    assert hint.startswith("SM efficiency: the share of the window with SMs given work (a kernel with fewer "
                           "blocks than SMs counts in part); occupancy: warps resident per SM over the maximum, "
                           "weighted by kernel time (CUPTI's estimates); Tensor Cores: ")


def test_the_flame_graphs_legend_sits_centred_in_its_band():
    """The icicle's legend (one swatch per family: cell, user, stdlib, builtin) goes in a band
    22 px high below the last level's row (levels of 20 px), above the drawing's 2 px bottom
    margin: each 10 px swatch centred in it (6 px above and below), its text on the swatch's
    baseline. Read back from the SVG of a real cProfile run (this test's own calls)."""
    import cProfile
    import json
    import pstats
    import xml.etree.ElementTree as ET

    from nbprof.model import PythonProfile
    from nbprof.views.flame import flame_svg

    def work():
        for _ in range(5):
            sorted(str(i) for i in range(500))
            json.dumps(list(range(200)))

    prof = cProfile.Profile()
    prof.enable()
    work()
    prof.disable()
    tree = PythonProfile(pstats.Stats(prof).stats).call_tree(min_fraction=0)
    root = ET.fromstring(flame_svg(tree, width=800, row=20))
    ns = "{http://www.w3.org/2000/svg}"
    height = int(root.get("height"))
    boxes = [g.find(f"{ns}rect") for g in root.iter(f"{ns}g")]
    band_top = max(int(b.get("y")) for b in boxes) + 20  # the last level's row ends there
    swatches = [r for r in root.findall(f"{ns}rect") if r.get("width") == "10"]
    texts = root.findall(f"{ns}text")
    legend_texts = [t for t in texts if float(t.get("y")) > band_top]
    assert len(swatches) == len(legend_texts) >= 3 and band_top + 22 + 2 == height
    for s, t in zip(swatches, legend_texts):
        top, bottom = int(s.get("y")), int(s.get("y")) + int(s.get("height"))
        assert top - band_top == (band_top + 22) - bottom == 6
        assert float(t.get("y")) == bottom - 1


def test_device_lines_evidence_names_a_cell_only_where_the_message_does(tmp_path):
    """A saved trace (``nbprofLines``, as ``save()`` writes it) whose one line, train.py:2, ran a
    400 µs kernel: the device_line finding's evidence names the line's cell exactly where the
    message places the line in one ("In [3] line 2"). A file whose cell is not a name (a number
    in a hand-edited or damaged file) has its line table left out when read, with a note: no
    finding names a line, let alone a cell 7 (so device_line's mutant 87, which let a non-text
    cell through to the evidence, is equivalent since: scripts/equivalent_mutants.txt)."""
    import json

    import nbprof

    from .synthetic import Trace

    def finding(cell):
        t = Trace()
        ext = t.op("aten::mm", 10.0, 50.0)
        t.launch("gemm", ext, 15.0, 5.0, 20.0, 400.0)
        doc = t.doc()
        doc["nbprofLines"] = {
            "line_data": {"version": 1, "method": "tracer", "cells": {"train.py": cell},
                          "frames": {"file": ["train.py"], "line": [2], "function": ["<module>"],
                                     "function_line": [1]},
                          "stacks": [[], [0]], "ops": {"external_id": [ext], "stack": [1]},
                          "allocs": {"stack": [], "bytes": []}, "notes": []},
            "sources": {"train.py": "import torch\ny = x @ w\n"}}
        path = tmp_path / "trace.json"
        path.write_text(json.dumps(doc))
        p = nbprof.load_trace(path)
        f = p.findings
        return f[f["kind"] == "device_line"].to_dict("records"), p.meta.notes

    [named], _ = finding("In [3]")
    assert "is In [3] line 2: `y = x @ w`, 400.0 µs" in named["message"] and named["evidence"]["cell"] == "In [3]"
    for damaged in (7, ["In [3]"]):
        rows, notes = finding(damaged)
        assert rows == [] and any("cells are not a table of text" in n for n in notes)


# -- seed 43's survivors (issue 38) ----------------------------------------------------------------


def test_a_merged_away_first_event_hands_its_childs_time_to_its_parent(tmp_path):
    """torch's _remove_dup_nodes merges an only child of the same name into its parent. Here that
    child is the first event of the file (row 0 of the events table): aten::foo [10, 90] inside
    aten::foo [0, 100], with aten::mm [20, 30] inside it. One aten::foo is left, and aten::mm's
    10 µs still comes off its self time: 100 - 10 = 90 µs (by hand); aten::mm hangs from it."""
    from .synthetic import Trace

    t = Trace()
    t.op("aten::foo", 10.0, 80.0)
    t.op("aten::foo", 0.0, 100.0)
    t.op("aten::mm", 20.0, 10.0)
    p = t.load(tmp_path)
    ka = p.key_averages().set_index("name")
    assert ka.loc["aten::foo", "count"] == 1 and ka.loc["aten::foo", "self_cpu_us"] == 90.0
    assert ka.loc["aten::mm", "self_cpu_us"] == 10.0
    ev = p.events
    assert ev["name"].iloc[0] == "aten::foo" and ev["dur_us"].iloc[0] == 80.0  # the merged one is row 0
    mm = ev.index[ev["name"] == "aten::mm"][0]
    assert ev.loc[ev["parent"].iloc[mm], "dur_us"] == 100.0


def test_calls_sharing_their_callers_timestamps_are_siblings_and_what_they_hold_one_level_below(tmp_path):
    """A whole-µs clock: two aten::copy_ calls both [10, 50] under aten::to [0, 100], the second
    holding aten::empty [20, 30]. The two copies are siblings (depth 1, under aten::to), and
    aten::empty nests under the second at depth 2: every event's depth is its parent's plus one."""
    from .synthetic import Trace

    t = Trace()
    t.op("aten::to", 0.0, 100.0)
    t.op("aten::copy_", 10.0, 40.0)
    t.op("aten::copy_", 10.0, 40.0)
    t.op("aten::empty", 20.0, 10.0)
    ev = t.load(tmp_path).events
    parent, depth = ev["parent"].to_numpy(), ev["depth"].to_numpy()
    assert ev["name"].tolist() == ["aten::to", "aten::copy_", "aten::copy_", "aten::empty"]
    assert parent.tolist() == [-1, 0, 0, 2]
    assert depth.tolist() == [0, 1, 1, 2]
    assert all(depth[i] == (depth[parent[i]] + 1 if parent[i] >= 0 else 0) for i in range(len(ev)))


def test_a_kernel_is_launched_by_the_op_around_its_runtime_call_not_another_event_with_its_id(tmp_path):
    """A kernel without an External id is tied to its op through CUPTI's correlation id: the op
    around the runtime call (cudaLaunchKernel) with that id. An event of a category nbprof does not
    know (read as "other"), earlier in the file under aten::relu, carries the same id: it is not the
    launch, and the kernel's 300 µs stay aten::mm's (the trace's own runtime call, by construction)."""
    from .synthetic import PID, TID, Trace

    t = Trace()
    t.op("aten::relu", 0.0, 20.0)
    t.events.append({"ph": "X", "cat": "vendor_marker", "name": "marker", "pid": PID, "tid": TID, "ts": 5.0,
                     "dur": 2.0, "args": {"correlation": 1}})
    t.op("aten::mm", 30.0, 40.0)
    t.launch("gemm", 0, 35.0, 5.0, 50.0, 300.0)  # correlation 1, no External id
    p = t.load(tmp_path)
    assert (p.events["correlation"] == 1).sum() == 3  # the marker, the runtime call, the kernel
    ka = p.key_averages().set_index("name")
    assert ka.loc["aten::mm", "self_device_us"] == 300.0
    assert ka.loc["aten::relu", "self_device_us"] == 0.0
    assert p.kernels().set_index("name").loc["gemm", "launched_by"] == "aten::mm"


def test_each_ranks_autograd_thread_is_named_in_a_merged_folder(tmp_path):
    """Two ranks of the recorded H100 training trace, every event merged into one profile (the
    folder's old path): each rank's thread 429, whose top-level events are autograd's engine, is
    named so on that rank's lane, as the rank's own trace names it alone (tests/test_timeline.py)."""
    import gzip
    import json

    import nbprof
    from nbprof.views.timeline import prepare_timeline

    from .conftest import trace_path

    with gzip.open(trace_path("cnn_train_cuda")) as f:
        doc = json.load(f)
    for r in (0, 1):
        doc["distributedInfo"] = {"rank": r, "world_size": 2}
        (tmp_path / f"host_{r}.pt.trace.json").write_text(json.dumps(doc))
    alone = prepare_timeline(nbprof.load_trace(tmp_path / "host_0.pt.trace.json")).lanes["label"].tolist()
    assert "CPU thread 429 (autograd)" in alone
    merged = nbprof.load_trace(tmp_path, workers=0, progress=False)._merged
    labels = prepare_timeline(merged).lanes["label"].tolist()
    assert labels == [f"rank {r} · {label}" for r in (0, 1) for label in alone]
