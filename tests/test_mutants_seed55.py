"""Behaviour seed 55's mutation sample found untested (docs/testing.md), each against an answer
worked out by hand or taken from the standard library: an integer arg read exactly past a float's
53 bits, a comparison keeping the row limit asked for, an empty flame graph one row tall, the note
of a scheduled profiler naming its step, a report's figures as compact JSON, a snapshot's peak at
its history's first entry."""

from __future__ import annotations

import json
import re

import pytest

import nbprof

from .conftest import needs_torch, trace_path
from .synthetic import Trace


def test_an_int_arg_is_read_exactly_past_a_floats_53_bits(tmp_path):
    """An op's ``Sequence number`` of 2**53 + 1 reads back as that integer (a float64 on the
    way would make it 2**53); one beyond int64 reads as the column's default, said in a note."""
    t = Trace()
    t.op("aten::add", 0, 10)
    t.events[-1]["args"]["Sequence number"] = 2**53 + 1
    t.op("aten::mul", 20, 10)
    t.events[-1]["args"]["Sequence number"] = 2**64
    ev = t.load(tmp_path).events
    seq = dict(zip(ev["name"].astype(str), ev["sequence_nr"].tolist()))
    assert seq == {"aten::add": 2**53 + 1, "aten::mul": -1}
    assert str(ev["sequence_nr"].dtype) == "int64"


def test_a_comparison_by_kernel_keeps_the_row_limit_asked_for():
    b = nbprof.load_trace(trace_path("cnn_train_cuda"))
    a = nbprof.load_trace(trace_path("cnn_cuda_toggled"))
    c = nbprof.compare(b, a, by="kernel", limit=2)
    assert c.limit == 2 and c.keys == ["name", "kind"]
    assert len(c.table) > 2
    # the text's table: a header, a rule, then the 2 rows (the table has more, said after)
    full = nbprof.compare(b, a, by="kernel", limit=0).text().splitlines()
    text = c.text().splitlines()
    assert len(full) - len(text) == len(c.table) - 2 - 1, (text, len(full))


def test_an_empty_flame_graph_is_one_row_tall():
    """No calls: one row of 20 px for its message, 2 px of border."""
    import pandas as pd

    from nbprof.views.flame import flame_svg

    svg = flame_svg(pd.DataFrame({"depth": [], "value_s": [], "parent": []}))
    assert re.search(r'<svg [^>]*height="22" viewBox="0 0 960 22"', svg), svg[:300]
    assert "no Python function calls were recorded" in svg


@needs_torch
def test_from_profiler_of_a_schedule_names_the_step_its_cycle_ended_at():
    import torch
    from torch.profiler import profile, schedule

    with profile(schedule=schedule(wait=1, warmup=1, active=2)) as prof:
        for _ in range(4):
            torch.ones(4).add_(1)
            prof.step()
    p = nbprof.from_profiler(prof)
    assert prof.step_num == 4
    assert ("torch keeps only the last cycle of a schedule: this report is the cycle that ended at step 4; "
            "on_trace_ready=nbprof.trace_handler() shows each cycle") in p.meta.notes


def _figure_payloads(html: str) -> list[str]:
    """The JSON text of each figure a page draws (``window.nbprofFigure(id, figure, ...)``)."""
    decoder = json.JSONDecoder()
    out = []
    for m in re.finditer(r"window\.nbprofFigure\(", html):
        _, at = decoder.raw_decode(html, m.end())  # the div's id
        assert html[at:at + 2] == ", "
        _, end = decoder.raw_decode(html, at + 2)
        out.append(html[at + 2:end])
    return out


def test_a_pages_figures_are_compact_json():
    """The standalone page's figures carry no whitespace between JSON tokens (a timeline's
    figure is megabytes: ", " and ": " would add a sixth)."""
    from nbprof.views.page import standalone_html

    html = standalone_html(nbprof.load_trace(trace_path("cnn_train_cuda")))
    payloads = _figure_payloads(html)
    assert payloads
    for payload in payloads:
        json.loads(payload)
        between_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', payload)  # JSON strings, as the grammar has them
        assert not re.search(r"\s", between_strings), between_strings[:300]


def test_a_peak_at_the_histories_first_entry_is_after_entry_0(tmp_path):
    """The history: a 1 MiB allocation (entry 0, the peak), then its free (entry 1)."""
    from .htmltext import texts_of
    from .snapshots import MiB, SEG_A, block, entry, segment, stack, write

    snap = {"segments": [segment(SEG_A, 2 * MiB, [block(SEG_A, 2 * MiB, 2 * MiB, "inactive")])],
            "device_traces": [[entry("alloc", SEG_A, MiB, 100, stack(3)), entry("free_completed", SEG_A, MiB, 150, stack(4))]]}
    path = write(snap, tmp_path / "s.pickle")
    html = nbprof.load_snapshot(path).report().html(include_library=False)
    heads = [h for h in texts_of(html, "nbprof-sub") if " at its peak, " in h]
    assert heads == ["cuda:0 at its peak, after entry 0 (at the start): 1.00 MiB active in 1 allocation, 2.00 MiB reserved"], heads


def test_a_function_with_no_calls_has_no_time_per_call():
    """A stats entry of 0 calls (a hand-made or merged ``.prof`` can hold one; pstats prints its
    per-call columns blank): 0 per call, never a made-up second; the others as pstats divides,
    tottime by all calls and cumtime by primitive calls."""
    from nbprof.collect.cprofile import stats_table

    raw = {("a.py", 1, "never"): (0, 0, 0.0, 0.0, {}), ("a.py", 2, "twice"): (2, 4, 0.5, 1.0, {})}
    t = stats_table(raw).set_index("function")
    assert t.loc["never", ["tottime_per_call_s", "cumtime_per_call_s"]].tolist() == [0.0, 0.0]
    assert t.loc["twice", ["tottime_per_call_s", "cumtime_per_call_s"]].tolist() == [0.125, 0.5]


def test_the_flame_graphs_root_and_the_other_box_keep_their_grey():
    """Every function's box is its family's hue shaded per name (so neighbours stay apart); the
    root ("cell", whose name would darken it) and the "other" box are the fixed greys the legend
    shows, whatever their names."""
    import pandas as pd

    from nbprof.views.flame import FAMILY_COLORS, flame_colors

    tree = pd.DataFrame({"family": ["root", "other", "cell"], "package": ["", "", ""],
                         "label": ["cell", "cell", "cell"], "recursive": [False, False, False]})
    root, other, cell = flame_colors(tree)
    assert (root, other) == ("#d9dde3", "#e6e6e6") == (FAMILY_COLORS["root"], FAMILY_COLORS["other"])
    assert cell != FAMILY_COLORS["cell"]  # "cell" shades its family's hue (crc32 % 7 - 3 = -3: darker)


def test_the_memory_tab_lists_an_op_whose_own_allocation_its_child_freed(tmp_path):
    """aten::outer allocates 1 KiB itself and its child aten::inner frees it: outer's total is
    0 B and its self +1 KiB, inner's -1 KiB both. Each op that allocated or freed anything, in
    itself or its children, is a row of the Memory tab."""
    from .test_mutants_views3 import dt_tables, panels

    t = Trace()
    t.op("aten::outer", 0, 100)
    t.memory(10, 1024, total_allocated=1024, total_reserved=4096, device=-1, addr=7)
    t.op("aten::inner", 20, 30)
    t.memory(30, -1024, total_allocated=0, total_reserved=4096, device=-1, addr=7)
    t.op("aten::nothing", 200, 10)
    p = t.load(tmp_path)
    ka = p.key_averages().set_index("name")
    assert ka.loc["aten::outer", ["self_cpu_mem_bytes", "cpu_mem_bytes"]].tolist() == [1024, 0]
    assert ka.loc["aten::inner", ["self_cpu_mem_bytes", "cpu_mem_bytes"]].tolist() == [-1024, -1024]
    table = dt_tables(panels(p.report().html(include_library=False))["Memory"])[0]  # the first: by operator
    assert table["headers"][:2] == ["Name", "Calls"], table["headers"]
    assert sorted(row[0] for row in table["rows"]) == ["aten::inner", "aten::outer"], table["rows"]


def test_python_lines_have_no_share_of_a_run_without_wall_time(shell):
    """``line_shares`` of a cProfile run's lines: each line's own time over the run's wall time;
    none where the run has no wall time to share (a profile read from a ``.prof`` file, say)."""
    import dataclasses
    import types

    import numpy as np

    from nbprof.analysis.hot_lines import lines_of
    from nbprof.views.tabs.source import line_shares

    from .conftest import run

    run(shell, "%%cprofile -q -o cp --lines\ntotal = 0\nfor i in range(300):\n    total += i * i")
    cp = shell.user_ns["cp"]
    lines = lines_of(cp)
    own = lines["self_time_us"]
    shares = line_shares(cp, lines, own)
    assert np.allclose(shares, own.to_numpy(dtype=float) / (cp.meta.wall_s * 1e6))
    for wall in (None, 0.0):
        without = types.SimpleNamespace(meta=dataclasses.replace(cp.meta, wall_s=wall))
        assert line_shares(without, lines, own) is None


def test_a_ranks_cache_is_written_where_its_folders_do_not_exist_yet(tmp_path):
    """A Dask worker on another machine gets the client's cache folder, which that machine does
    not have: the rank's cache is written there all the same, its folders made, and reads back
    the events as the file has them."""
    import numpy as np

    from nbprof.cluster.timeline import _cache, rank_timeline

    t = Trace(rank=0)
    t.op("aten::add", 0, 10)
    t.op("aten::mul", 20, 5)
    p = t.load(tmp_path)
    root = tmp_path / "elsewhere" / "ranks-host-1-abc"  # neither folder exists
    tl = rank_timeline(p._events, p.meta, str(tmp_path / "trace.json"), cache_root=str(root))
    assert tl.cache == str(root / "trace.json") and (root / "trace.json").is_dir()
    c = _cache(tl.cache, tl.file)
    assert np.asarray(c.col("dur_us")).tolist() == [10.0, 5.0]


def test_each_part_of_a_ranks_bar_says_its_time_and_share():
    """The per-rank bar's parts (breakdown_svg): each drawn part's tooltip names the rank, the
    part, its time and its share of the rank's window; a part of no time is not drawn."""
    import xml.etree.ElementTree as ET

    import pandas as pd

    from nbprof.views.tabs.ranks import breakdown_svg

    table = pd.DataFrame({"rank": [0], "overlap_pct": [float("nan")], "breakdown_window_us": [200.0],
                          "breakdown_compute_us": [150.0], "breakdown_exposed_comm_us": [0.0],
                          "breakdown_exposed_memcpy_us": [10.0], "idle_host_wait_us": [40.0],
                          "idle_kernel_wait_us": [0.0], "idle_other_us": [0.0]})
    svg = ET.fromstring(breakdown_svg(table))
    titles = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}title")]
    assert titles == ["rank 0: compute 150.0 µs (75.0% of 200.0 µs)", "rank 0: copies, alone 10.0 µs (5.0% of 200.0 µs)",
                      "rank 0: idle: waiting for the CPU 40.0 µs (20.0% of 200.0 µs)"]


def test_a_kernels_rectangle_is_labelled_with_its_short_name(tmp_path):
    """The static timeline writes inside a wide kernel's rectangle the kernel's name without its
    signature (return type, template arguments, parameters); an op keeps its name."""
    import xml.etree.ElementTree as ET

    from nbprof.views.timeline import prepare_timeline, timeline_svg

    kernel = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
              "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")
    t = Trace()
    ext = t.op("aten::fill_", 0, 1000)
    t.launch(kernel, ext, 10, 5, 20, 960)
    svg = ET.fromstring(timeline_svg(prepare_timeline(t.load(tmp_path)), width=1000))
    texts = [e.text for e in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert "at::native::vectorized_elementwise_kernel" in texts and "aten::fill_" in texts, texts
    assert not any(x and x.startswith("void ") for x in texts)


def test_a_machine_without_a_name_gets_rank_caches_named_host(monkeypatch):
    """The rank caches' folders are named ``ranks-<host>-<pid>-`` (whose a folder is, where a home
    folder is shared by machines); a host name of nothing but punctuation keeps its length in
    underscores, an empty one is "host"."""
    import os
    import socket

    from nbprof.cluster.timeline import _prefix

    monkeypatch.setattr(socket, "gethostname", lambda: "")
    assert _prefix() == f"ranks-host-{os.getpid()}-"
    monkeypatch.setattr(socket, "gethostname", lambda: "gpu-node.7")
    assert _prefix() == f"ranks-gpu_node_7-{os.getpid()}-"
