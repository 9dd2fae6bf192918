"""The report's views on recorded traces, against answers computed from the raw trace JSON."""

from __future__ import annotations

import collections
import gzip
import json
import re

import numpy as np
import pytest

import nbprof
from nbprof.analysis.memory import memory_curve, memory_peaks

from . import units
from .conftest import TRACES, needs_torch, run, trace_path
from .reference import Model, read


def raw_events(name: str) -> list[dict]:
    with gzip.open(trace_path(name)) as f:
        return json.load(f)["traceEvents"]


@pytest.mark.parametrize("name", [n for n in TRACES])
def test_kernels_view_sums_and_launchers_match_the_raw_trace(name):
    raw = raw_events(name)
    dur = collections.Counter()
    count = collections.Counter()
    op_of = {e["args"]["External id"]: e["name"] for e in raw if e.get("cat") in ("cpu_op", "user_annotation")}
    launchers = collections.defaultdict(collections.Counter)
    launch = collections.defaultdict(list)
    for e in raw:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e.get("ph") == "X":
            dur[e["name"]] += round(e["dur"] * 1000)
            count[e["name"]] += 1
            launcher = op_of.get(e["args"].get("External id"))
            if launcher:
                launchers[e["name"]][launcher] += 1
            if e["cat"] == "kernel":  # CUPTI's launch configuration, as the file has it
                a = e["args"]
                launch[e["name"]].append((str(a["grid"]), str(a["block"]), a["registers per thread"],
                                          a["shared memory"], a["blocks per SM"], a["est. achieved occupancy %"],
                                          e["dur"]))
    table = nbprof.load_trace(trace_path(name)).kernels()
    assert set(table["name"]) == set(dur)
    for r in table.itertuples():
        assert r.count == count[r.name]
        assert round(r.device_total_us * 1000) == dur[r.name]
        if launchers[r.name]:
            assert r.launched_by == launchers[r.name].most_common(1)[0][0]
        if launch[r.name]:
            runs = launch[r.name]
            configs = collections.Counter((g, b) for g, b, *_ in runs)
            assert (r.grid, r.block) == configs.most_common(1)[0][0] and r.launch_configs == len(configs)
            assert r.registers_per_thread == max(x[2] for x in runs)
            assert r.shared_memory_bytes == max(x[3] for x in runs)
            total = sum(x[6] for x in runs)
            assert r.blocks_per_sm == pytest.approx(sum(x[4] * x[6] for x in runs) / total, rel=1e-6)
            assert r.occupancy_pct == pytest.approx(sum(x[5] * x[6] for x in runs) / total, rel=1e-6)
        else:  # copies and memsets have no launch configuration
            assert r.grid == "" and r.launch_configs == 0
    assert table["share"].sum() == pytest.approx(1.0)


def test_memory_peak_matches_the_raw_trace():
    raw = raw_events("cnn_train_cuda")
    mem = [e for e in raw if e.get("name") == "[memory]" and e["args"]["Device Type"] == 1]
    peak_event = max(mem, key=lambda e: e["args"]["Total Allocated"])
    # the op open on the same thread at the peak: the innermost (latest start) containing it
    ops = [e for e in raw if e.get("cat") in ("cpu_op", "user_annotation") and e["tid"] == peak_event["tid"]
           and e["ts"] <= peak_event["ts"] <= e["ts"] + e["dur"]]
    innermost = max(ops, key=lambda e: (e["ts"], -e["dur"]))["name"]
    profile = nbprof.load_trace(trace_path("cnn_train_cuda"))
    [peak] = [p for p in memory_peaks(memory_curve(profile._events)) if p.device == "cuda:0"]
    assert peak.peak_allocated_bytes == peak_event["args"]["Total Allocated"]
    assert peak.peak_reserved_bytes == max(e["args"]["Total Reserved"] for e in mem)
    assert peak.peak_op == innermost
    assert profile.summary.peak_allocated_bytes["cuda:0"] == peak.peak_allocated_bytes


def test_allocations_pair_each_block_with_its_free_as_a_plain_loop_does():
    """Walk the raw memory events address by address, in time order: an allocation is held until
    the next event at its address frees it; a free with nothing before it is an older block."""
    raw = raw_events("cnn_train_cuda")
    mem = [e for e in raw if e.get("name") == "[memory]"]
    by_addr = collections.defaultdict(list)
    for i, e in enumerate(mem):
        by_addr[(e["args"]["Device Type"], e["args"]["Addr"])].append((e["ts"], i, e["args"]["Bytes"]))
    expected = []
    for (_, addr), evs in by_addr.items():
        held = None
        for ts, _, b in sorted(evs):
            if b > 0:
                assert held is None  # the allocator never hands out an address twice
                held = (ts, b)
            elif held is not None:
                expected.append((addr, held[1], held[0], ts))
                held = None
            else:
                expected.append((addr, -b, None, ts))
        if held is not None:
            expected.append((addr, held[1], held[0], None))
    profile = nbprof.load_trace(trace_path("cnn_train_cuda"))
    a = profile.allocations()
    origin_us = profile.meta.origin_ns / 1000
    got = [(int(r.addr), int(r.bytes), None if r.alloc_us != r.alloc_us else r.alloc_us + origin_us,
            None if r.free_us != r.free_us else r.free_us + origin_us) for r in a.itertuples()]

    def key(x):
        return (x[0], x[2] if x[2] is not None else -1.0, x[3] if x[3] is not None else -1.0)

    assert len(got) == len(expected) == 222
    for g, e in zip(sorted(got, key=key), sorted(expected, key=key)):
        assert g[:2] == e[:2]
        for ours, theirs in zip(g[2:], e[2:]):
            assert (ours is None) == (theirs is None) and (ours is None or abs(ours - theirs) < 0.002), (g, e)
    assert (a["lifetime_us"].dropna() >= 0).all()


def test_blocks_held_at_the_peak_add_up_to_the_peak():
    """What was held at the peak: blocks from before the profile (what the allocator held at its
    start, less those freed by then) plus the blocks allocated since and not yet freed."""
    profile = nbprof.load_trace(trace_path("cnn_train_cuda"))
    allocs = profile.allocations()
    [peak] = [p for p in memory_peaks(memory_curve(profile._events)) if p.device == "cuda:0"]
    held = profile.alive_at(peak.peak_time_us, "cuda:0")
    older_freed = allocs[(allocs["device"] == "cuda:0") & allocs["alloc_us"].isna()
                         & (allocs["free_us"] <= peak.peak_time_us)]["bytes"].sum()
    during = held[held["alloc_us"].notna()]["bytes"].sum()
    assert peak.start_allocated_bytes - older_freed + during == peak.peak_allocated_bytes
    assert held["bytes"].is_monotonic_decreasing
    html = profile.report().html(include_library=False)
    raw_peak = max(e["args"]["Total Allocated"] for e in raw_events("cnn_train_cuda")
                   if e.get("name") == "[memory]" and e["args"]["Device Type"] == 1)
    assert units.shows_bytes(units.find(rf"Held on cuda:0 at its peak \(({units.BYTES})", html), raw_peak)
    assert f"{len(held[held['alloc_us'].notna()])} blocks allocated during the profile" in html


@needs_torch
def test_allocations_of_a_live_cell(shell):
    run(shell, "import torch")
    result, _ = run(shell, "%%torchprof -q --memory -o held\nkeep = torch.ones(1000)\n"
                           "tmp = torch.ones(2000) * 2\ndel tmp")
    assert result.error_in_exec is None
    a = shell.user_ns["held"].allocations()
    # blocks this cell allocated (a 4,000-byte block an earlier test left is freed by its garbage
    # collector during this profile sometimes: it has no alloc_us)
    a = a[a["alloc_us"].notna()]
    kept = a[a["bytes"] == 4000]
    assert len(kept) == 1 and np.isnan(kept["free_us"].iloc[0]) and kept["top_op"].iloc[0] == "aten::ones"
    freed = a[a["bytes"] == 8000]  # torch.ones(2000) and its product: both freed by `del` and the cell
    assert len(freed) == 2 and freed["free_us"].notna().all()
    assert set(freed["top_op"]) == {"aten::ones", "aten::mul"}


def _tab_labels(html: str) -> list[str]:
    return re.findall(r'<label for="nbprof-\d+-\d+">([^<]+)</label>', html)


def test_tabs_and_what_they_say_when_nothing_was_collected():
    cuda = nbprof.load_trace(trace_path("cnn_train_cuda")).report().html(include_library=False)
    assert _tab_labels(cuda) == ["Operators", "By input shape", "Memory", "Kernels", "Ranges", "Timeline"]
    bare = nbprof.load_trace(trace_path("cnn_cuda_toggled")).report().html(include_library=False)
    assert "Input shapes were not recorded: run with --shapes." in bare
    assert "Memory was not recorded: run with --memory." in bare
    stack = nbprof.load_trace(trace_path("transformer_infer_stack")).report().html(include_library=False)
    assert "By stack" in _tab_labels(stack)


def test_the_static_preview_shows_the_top_rows_humanized():
    """Where scripts do not run, the preview shows the first rows in --sort order, units humanized."""
    profile = nbprof.load_trace(trace_path("cnn_train_cuda"))
    html = profile.report(limit=5, sort="self_cpu_us").html(include_library=False)
    # the five rows with most self CPU time, from the file (tests/reference.py)
    rows = Model(read(trace_path("cnn_train_cuda"))).key_averages()
    top = sorted(((v["self_cpu_us"], name) for (name, kind), v in rows.items()
                  if kind not in ("kernel", "memcpy", "memset")), reverse=True)[:5]
    first_table = html[html.index("_fallback"):]
    for self_cpu, name in top:
        assert f'title="{name}"' in first_table
        row = first_table[first_table.index(f'title="{name}"'):].split("</tr>", 1)[0]
        cells = re.findall(r">([^<>]+)</td>", row)
        assert any(re.fullmatch(units.DURATION, c) and units.shows_us(c, self_cpu) for c in cells), (name, cells)
    assert "more rows (the DataFrame has all)" in first_table


def test_without_styles_every_panel_shows_under_its_title():
    """GitHub's preview strips <style>, <script> and style attributes: all panels then show, in
    order, each under its tab's title, and the tab labels read as a list."""
    html = nbprof.load_trace(trace_path("cnn_train_cuda")).report().html(include_library=False)
    stripped = re.sub(r"<(script|style)\b.*?</\1>", "", html, flags=re.S)
    stripped = re.sub(r'\sstyle="[^"]*"', "", stripped)
    labels = _tab_labels(stripped)
    text = re.sub(r"<[^>]+>", "", stripped)
    assert " · ".join(labels) in text
    titles = re.findall(r'<div class="nbprof-panel-title"><b>([^<]+)</b></div>', stripped)
    assert titles == labels
    # each title comes right before its own panel's content: the shapes table under "By input shape"
    after = stripped[stripped.index("<b>By input shape</b>"):stripped.index("<b>Memory</b>")]
    assert "Input shapes" in re.sub(r"<[^>]+>", "", after)


def test_text_report_is_torchs_layout_with_the_limit():
    profile = nbprof.load_trace(trace_path("cnn_train_cuda"))
    text = profile.report(limit=7).text()
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("Name"))
    for column in ("Self CPU %", "Self CPU", "CPU total", "Self CUDA %", "CUDA total", "CPU Mem", "Calls"):
        assert column in header
    body = lines[lines.index(header) + 2:]
    rows = body[: body.index(next(line for line in body if line.startswith("---")))]
    assert len(rows) == 7
    assert f"7 of {len(profile.key_averages())} rows" in text
    assert rows[0].startswith("aten::convolution_backward")  # default sort: self CUDA time


def test_bad_sort_names_the_valid_columns():
    profile = nbprof.load_trace(trace_path("two_streams"))
    with pytest.raises(nbprof.OptionError, match="choose one of: self_cpu_us"):
        profile.report(sort="wallclock")


def test_cprofile_callgraph_panel_matches_callers_and_callees(shell):
    run(shell, "%%cprofile -q -o cg\ndef leaf(n):\n    return sum(range(n))\ndef mid():\n    return [leaf(500) for _ in range(7)]\nmid()")
    profile = shell.user_ns["cg"]
    html = profile.report().html(include_library=False)
    panel = html[html.index('class="nbprof-cg"'):]
    assert "called by" in panel and "calls" in panel
    # mid's callees as pstats records them (a <listcomp> frame before Python 3.12, leaf itself after)
    st = profile.pstats.stats
    [mid] = [k for k in st if k[2] == "mid"]
    expected = {k[2] for k, v in st.items() if mid in v[4]}
    assert expected and set(profile.callees("mid")["function"]) == expected
    leaf_callers = profile.callers("leaf")
    assert int(leaf_callers["ncalls"].sum()) == 7
    assert ">7</td>" in panel  # the edge's call count, as pstats.print_callers shows it


def test_ranks_tab_names_the_slowest_rank(tmp_path):
    kernel_time = {}
    for rank in (0, 1):
        with gzip.open(trace_path("two_streams")) as f:
            doc = json.load(f)
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
        for e in doc["traceEvents"]:
            if e.get("cat") == "kernel" and rank == 1:
                e["dur"] *= 3
        kernel_time[rank] = sum(e["dur"] for e in doc["traceEvents"] if e.get("cat") == "kernel")
        (tmp_path / f"worker{rank}.pt.trace.json").write_text(json.dumps(doc))
    slowest = max(kernel_time, key=kernel_time.get)
    html = nbprof.load_trace(tmp_path).report().html(include_library=False)
    assert "Ranks" in _tab_labels(html)
    assert f"slowest rank: {slowest}" in html


@pytest.mark.parametrize("sort", ["self_cpu_us", "count", "self_device_us", "cpu_mem_bytes"])
def test_headline_names_the_first_row_of_the_chosen_sort(sort):
    profile = nbprof.load_trace(trace_path("cnn_train_cuda"))
    text = profile.report(sort=sort, limit=3).text()
    averages = profile.key_averages()
    first = averages.sort_values(sort, ascending=False, kind="stable")["name"].iloc[0]
    headline = next(line for line in text.splitlines() if line.startswith("top by"))
    assert headline.split(": ", 1)[1].startswith(first)


def nine_tab_profile(folder):
    """Every torch tab at once: two ranks (the recorded CNN with its train_step ranges renamed to
    ProfilerStep#n, so it has steps and ranges; and the transformer with Python stacks)."""
    with gzip.open(trace_path("cnn_train_cuda")) as f:
        cnn = json.load(f)
    step = 0
    for e in cnn["traceEvents"]:
        if e.get("cat") == "user_annotation" and e["name"] == "train_step":
            step += 1
            e["name"] = f"ProfilerStep#{step}"
    with gzip.open(trace_path("transformer_infer_stack")) as f:
        transformer = json.load(f)
    for rank, doc in enumerate((cnn, transformer)):
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
        (folder / f"worker{rank}.pt.trace.json").write_text(json.dumps(doc))
    # both ranks' events in one profile (load_trace(folder) summarizes the ranks apart, and its
    # report leaves out the tabs that need every event)
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.events import concat_traces
    from nbprof.model import TorchProfile

    traces = [read_trace_file(folder / f"worker{rank}.pt.trace.json") for rank in (0, 1)]
    return TorchProfile.from_trace(concat_traces(traces, labels=[0, 1], label_column="rank"))


# Source: the trace's with_stack frames give function-entry lines (issue 34's item 5)
ALL_TORCH_TABS = ["Operators", "By input shape", "By stack", "Source", "Memory", "Kernels", "Modules", "Ranges",
                  "Steps", "Ranks", "Timeline"]


def _css_shown_panels(html: str) -> set[int]:
    """The panel indexes that some CSS rule shows when their radio input is checked."""
    css = "".join(re.findall(r"<style>(.*?)</style>", html, flags=re.S))
    return {int(i) for i in re.findall(r"#nbprof-\d+-(\d+):checked~\.nbprof-panel-\1\b", css)}


def test_a_report_with_every_tab_shows_each_panel_when_its_tab_is_checked(tmp_path):
    html = nine_tab_profile(tmp_path).report().html(include_library=False)
    assert _tab_labels(html) == ALL_TORCH_TABS
    panels = {int(i) for i in re.findall(r'class="nbprof-panel nbprof-panel-(\d+)"', html)}
    assert panels == set(range(len(ALL_TORCH_TABS)))
    assert _css_shown_panels(html) == panels
    timeline = html[html.index("<b>Timeline</b>"):]
    assert "<svg" in timeline  # the Timeline panel has its overview


def test_every_cprofile_panel_has_its_css_rule(shell):
    run(shell, "%%cprofile -q -o three\nsorted(str(i) for i in range(2000))")
    html = shell.user_ns["three"].report().html(include_library=False)
    assert _tab_labels(html) == ["Functions", "Source", "Callers &amp; callees", "Flame"]
    assert _css_shown_panels(html) == {0, 1, 2, 3}
    # pstats' table: the same columns in the text and in the Functions tab
    header = next(line for line in shell.user_ns["three"].report().text().splitlines() if "ncalls" in line)
    fallback = html[html.index("_fallback"):]
    html_columns = re.findall(r"<th[^>]*>([^<]*)</th>", fallback[:fallback.index("</thead>")])
    assert html_columns == re.split(r"\s{2,}", header.strip()) == [
        "ncalls", "tottime", "tottime %", "percall", "cumtime", "percall", "filename:lineno(function)"]


def test_memory_curve_renders_itself_with_the_peak_of_the_raw_trace():
    """result.memory_curve() is a plotly Figure that renders itself: the plotly mimetype (its
    curve reaches the allocator's peak in the file), the Memory tab's SVG, and a line naming it."""
    import plotly.graph_objects as go

    from nbprof.views.figure import PLOTLY_MIME

    raw = raw_events("cnn_train_cuda")
    peak = max(e["args"]["Total Allocated"] for e in raw if e.get("name") == "[memory]"
               and e["args"]["Device Type"] == 1)
    fig = nbprof.load_trace(trace_path("cnn_train_cuda")).memory_curve()
    assert isinstance(fig, go.Figure)
    allocated = [t for t in fig.data if t.name == "cuda:0 allocated"]
    assert len(allocated) == 1 and max(allocated[0].y) == peak
    bundle = fig._repr_mimebundle_()
    assert set(bundle) == {PLOTLY_MIME, "text/plain", "text/html"}
    assert units.shows_bytes(units.find(rf"cuda:0 peak ({units.BYTES})", bundle["text/plain"]), peak)
    assert "\n" not in bundle["text/plain"]
    # the SVG, as a drawing that hides cleanly where outputs are sanitized (views.figure.drawing_html)
    drawing = re.fullmatch(r'<style>[^<]*</style><div class="nbprof-drawing"[^>]* hidden="hidden">(<svg.*</svg>)</div>'
                           r'<div class="nbprof-unstyled"[^>]*>[^<]*</div>', bundle["text/html"], re.S)
    assert drawing and "Allocated memory over time" in drawing.group(1)
    json.dumps(bundle, allow_nan=False)
    # without --memory: an empty figure that says so
    bare = nbprof.load_trace(trace_path("cnn_cuda_toggled")).memory_curve()._repr_mimebundle_()
    assert "none recorded" in bare["text/plain"] and "<svg" not in bare["text/html"]


def test_text_and_html_tables_list_the_same_columns_in_the_same_order(tmp_path):
    """The text report's header and the Operators tab's header: the same columns, in torch's
    order (the HTML adds Kind at the end, to filter by); likewise pstats' table."""
    profile = nbprof.load_trace(trace_path("cnn_train_cuda"))
    text = profile.report(limit=3).text()
    header = next(line for line in text.splitlines() if line.startswith("Name"))
    text_columns = re.split(r"\s{2,}", header.strip())
    html = profile.report(limit=3).html(include_library=False)
    fallback = html[html.index("_fallback"):]
    html_columns = re.findall(r"<th[^>]*>([^<]*)</th>", fallback[:fallback.index("</thead>")])
    assert html_columns == text_columns + ["Kind"]
    assert text_columns[:4] == ["Name", "Self CPU %", "Self CPU", "CPU total"] and text_columns[-1] == "Calls"
