"""What seed 59's and seed 61's samples of mutants (docs/testing.md) showed no test held, each
against an answer of its own: a hand-built record, a trace written by hand, the file torch wrote."""

from __future__ import annotations

import re

import numpy as np
import pytest

from .test_data_loading_findings import loop_record, profile_of


def test_an_epoch_that_started_its_workers_and_took_nothing_adds_no_start_up():
    """Epoch 0: the iterator took 500 µs, the first batch came 300 µs later (start-up 800 µs).
    Epoch 1: an iterator made and dropped in the same nanosecond (no batch asked for): its
    start-up is 0, not a nanosecond more, so the loader's start-up is epoch 0's 800 µs exactly."""
    rec = loop_record([300.0, 100.0, 200.0], start_us=500.0)
    rec.passes.append((1, 1, 2, "start", rec.ended_ns, rec.ended_ns))
    [s] = profile_of(rec)._data_loading.loaders
    assert s.epochs == 2
    assert s.startup_us == 800.0


def test_a_device_side_sync_without_a_correlation_id_names_no_call(tmp_path):
    """An "Event Sync" on the device with no correlation id (a trace that wrote none) cannot say
    which runtime call it blocked: the cudaMemcpyAsync without one either stays a call that does
    not block (no sync finding); given the same id on both, it blocks (the finding comes)."""
    from .test_boundaries import _sync_trace, severity

    t = _sync_trace(600, call="cudaMemcpyAsync")
    call = t.events[-4]
    assert call["name"] == "cudaMemcpyAsync" and "correlation" not in call["args"]
    t.events.append({"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 0, "tid": 7, "ts": 101,
                     "dur": 600, "args": {"device": 0, "stream": 7}})
    assert severity(t.load(tmp_path, "none.json"), "sync") is None
    call["args"]["correlation"] = t.events[-1]["args"]["correlation"] = 777
    assert severity(t.load(tmp_path, "linked.json"), "sync") == "medium"


def test_the_call_running_at_a_time_is_found_the_first_one_too():
    """``analysis.lines._running_then`` on two calls of the cell's thread, the first (index 0, from
    100 to 500) holding the second (200 to 300), and one call of another thread: at each time, the
    innermost call running then (its stack and start), none before the first or after the last."""
    from nbprof.analysis.lines import _running_then

    calls = {"start": [100, 200, 120], "end": [500, 300, 480], "stack": [7, 8, 9], "parent": [-1, 0, -1],
             "thread": [1, 1, 2]}
    stack, began = _running_then(np.array([150, 250, 400, 600, 50]), calls)
    assert stack.tolist() == [7, 8, 7, 0, 0]
    assert began.tolist() == [100, 200, 100, 0, 0]


def test_a_snapshot_frames_line_that_is_no_integer_reads_0(tmp_path):
    """A snapshot is data from whoever wrote it: a frame's line given as text, as a bool or as a
    float is no line number: those frames read line 0 (as a frame without one does), the others
    keep theirs."""
    import nbprof

    from .snapshots import hand_snapshot, write

    snap = hand_snapshot()
    a2 = snap["segments"][0]["blocks"][2]  # a2: 1 MiB, held to the end, the end's first row
    frames = [dict(f) for f in a2["frames"]]
    frames[0]["line"], frames[1]["line"], frames[2]["line"] = "2150", True, 4.0
    a2["frames"] = frames
    p = nbprof.load_snapshot(write(snap, tmp_path / "lines.pickle"))
    first = p.blocks("end").iloc[0]
    assert first["requested_bytes"] == 1 << 20
    assert [line for _, line, _ in first["frames"]] == [0, 0, 0]
    assert all(type(line) is int for _, line, _ in first["frames"])


def test_a_part_of_many_labels_names_the_first_five(tmp_path):
    """``range_ops("step")`` where seven labels contain "step": the error says how many and names
    the first five, in the order the trace has them."""
    from nbprof.errors import OptionError

    from .synthetic import Trace

    t = Trace()
    for i in range(7):
        t.annotation(f"step_{i}", 100 * i, 50)
        t.op("aten::add", 100 * i + 10, 20)
    p = t.load(tmp_path)
    with pytest.raises(OptionError) as e:
        p.range_ops("step")
    assert str(e.value) == "no single range 'step'; 7 labels contain it: step_0, step_1, step_2, step_3, step_4"


def test_a_thread_whose_ops_nest_is_never_walked_with_a_stack(tmp_path, monkeypatch):
    """The tree's fast path (analysis.tree._nest: depths from subtree ends, checked against torch's
    stack rule) answers a thread whose ops nest; only a thread with ops that overlap in part runs
    the stack algorithm itself, and both give the parents the ops' times say."""
    import nbprof.analysis.tree as tree

    from .synthetic import Trace

    walked = []
    original = tree._nest_with_stack
    monkeypatch.setattr(tree, "_nest_with_stack", lambda s, e: walked.append(len(s)) or original(s, e))
    t = Trace()
    t.op("outer", 0, 100)
    t.op("inner_a", 10, 40)
    t.op("leaf", 15, 5)
    t.op("inner_b", 60, 30)
    ev = t.load(tmp_path, "nested.json").events
    assert walked == []
    names = ev["name"].astype(str).tolist()
    parent = {names[i]: (names[p] if p >= 0 else None) for i, p in enumerate(ev["parent"].tolist())}
    assert parent == {"outer": None, "inner_a": "outer", "leaf": "inner_a", "inner_b": "outer"}
    t.op("overlapping", 95, 20)  # starts inside outer, ends after it
    t.load(tmp_path, "overlap.json").events
    assert walked == [5]


def test_the_top_ops_advice_names_the_stack_tab_as_the_report_labels_it(tmp_path):
    """A profile recorded with stacks whose top op is neither compute nor a copy: the advice sends
    the reader to the tab where the op's callers are, under the name the report's tab bar gives it."""
    import json

    import nbprof

    from .synthetic import Trace

    t = Trace()
    t.op("aten::sort", 0, 900)
    t.op("aten::add", 1000, 50)
    doc = t.doc()
    doc["with_stack"] = 1  # as nbprof's own writer says it
    (tmp_path / "stack.json").write_text(json.dumps(doc))
    p = nbprof.load_trace(tmp_path / "stack.json")
    f = p.findings
    [message] = f.loc[f["kind"] == "top_op", "message"].tolist()
    assert message.endswith("See where it is called from in the By stack tab; "
                            "record its input shapes (--shapes --group-by shape).")
    html = p.report().html(include_library=False)
    assert re.search(r">\s*By stack\s*</label>", html)


def test_view_knows_a_trace_by_its_content_after_blank_lines(tmp_path):
    """``nbprof view`` on a file whose name says nothing (``run.log``): JSON that starts after
    blank lines and spaces is a trace, as is gzip's magic; other text is none of what it reads."""
    import gzip

    from nbprof.cli import _kind_of
    from nbprof.errors import OptionError

    (tmp_path / "run.log").write_text('\n\n  {"traceEvents": []}\n')
    (tmp_path / "list.log").write_text('\t[{"ph": "X"}]')
    (tmp_path / "packed.bin").write_bytes(gzip.compress(b'{"traceEvents": []}'))
    (tmp_path / "notes.log").write_text("\n  not json {\n")
    assert [_kind_of(str(tmp_path / n)) for n in ("run.log", "list.log", "packed.bin")] == ["trace"] * 3
    with pytest.raises(OptionError, match="neither a .prof file"):
        _kind_of(str(tmp_path / "notes.log"))


def test_a_folder_sorted_by_a_count_shows_the_ranks_spread_in_self_cpu(tmp_path):
    """``nbprof view -s count folder``: the count is no time a rank spends, so the Operators tab's
    spread across ranks is in self CPU time, and its caption says so."""
    import nbprof

    from .conftest import DATA
    from .test_mutants_snapshot import dt_tables as with_captions
    from .test_mutants_views3 import panels

    p = nbprof.load_trace(DATA / "ddp_gloo", workers=0, progress=False)
    p.meta.sort = "count"  # what `nbprof view -s count` sets
    operators = panels(p.report().html(include_library=False))["Operators"]
    [table] = with_captions(operators)
    assert "Self CPU" in table["caption"] and "count" not in table["caption"].lower()


def test_the_first_events_launch_has_its_arrow_in_the_live_timeline(tmp_path):
    """A trace whose first event (row 0 of the events table) is a runtime call that launches a
    kernel: hovering that call in the live timeline draws the arrow to its kernel (1 µs -> 10 µs,
    9 µs of delay), as hovering the kernel draws it back."""
    from nbprof.views import live_timeline as live_timeline_mod
    from nbprof.views.timeline import prepare_timeline

    from .synthetic import Trace

    t = Trace()
    t.launch("gemm", 0, 1.0, 5.0, 10.0, 20.0)
    p = t.load(tmp_path)
    assert p.events["name"].astype(str).iat[0] == "cudaLaunchKernel"
    full = prepare_timeline(p)
    state = live_timeline_mod.LiveTimelineState(p, full, python=False, max_rects=20_000, height=None)
    r = full.rects
    rows = sorted(set(r["row"]))
    arrows = []
    for name in ("cudaLaunchKernel", "gemm"):
        [k] = np.flatnonzero((r["name"] == name).to_numpy())
        arrows.append(state.flow(rows.index(int(r["row"].iat[k])), (r["x0_us"].iat[k] + r["x1_us"].iat[k]) / 2000))
    launch, kernel = arrows
    assert launch is not None and launch == kernel
    assert (launch["x1"] - launch["x0"]) * 1000 == pytest.approx(9.0) and launch["delay_us"] == pytest.approx(9.0)


def test_a_batchs_time_without_cprofile_takes_off_its_calls_cost():
    """Each batch of the hand-built loop made 9 profiled calls (4 __getitem__, 4 sleeps, 1 fetch)
    in 7,000 µs; at 100 µs a call (the run's calibration, in ns), the batch without cProfile's cost
    takes 7,000 - 9 x 100 = 6,100 µs."""
    rec = loop_record([300.0, 100.0, 200.0, 50.0], make_us=7000.0)
    rec.call_cost_ns = 100_000.0
    [s] = profile_of(rec)._data_loading.loaders
    assert s.make_us == 7000.0 and s.calls_per_batch == 9.0
    assert s.make_free_us == pytest.approx(6100.0, abs=1e-9)



def test_a_second_watch_leaves_the_first_alone():
    """Two DataLoader watches installed at once (a run inside a run): the second wraps nothing,
    so a loader iterated then is recorded once, by the first; each removed, torch's iterator
    methods are torch's own again."""
    from torch.utils.data import DataLoader
    from torch.utils.data import dataloader as dl

    from nbprof.collect.data_loading import DataLoaderWatch

    originals = {name: dl._SingleProcessDataLoaderIter.__dict__.get(name) for name in ("__init__", "_next_data")}
    first, second = DataLoaderWatch(), DataLoaderWatch()
    first.install()
    try:
        second.install()
        try:
            assert [len(b) for b in DataLoader(list(range(10)), batch_size=4)] == [4, 4, 2]
        finally:
            second.remove()
    finally:
        first.remove()
    assert [w[6] for w in first.record.waits] == ["ok", "ok", "ok", "stop"]
    assert second.record.waits == [] and second.record.main_samples == []
    assert {name: dl._SingleProcessDataLoaderIter.__dict__.get(name) for name in originals} == originals
    assert "_nbprof_watch" not in dl._MultiProcessingDataLoaderIter.__dict__


def test_a_written_page_keeps_room_for_the_whole_timeline(tmp_path):
    """``to_html``: the timeline's place on the page is as tall as the figure it draws (its many
    lanes: no 500 px box that the figure overflows while it loads)."""
    from pathlib import Path

    import nbprof

    from .conftest import trace_path

    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    height = int(p.timeline().layout.height)
    assert height != 500
    page = Path(p.to_html(tmp_path / "page.html")).read_text(encoding="utf-8")
    assert f'<div id="nbprof-timeline" style="width:100%;min-height:{height}px"></div>' in page


def test_a_torch_too_old_to_profile_cannot_profile_cuda(monkeypatch):
    """With a torch older than nbprof reads (its version says 1.13), CUDA is not offered: the
    panel's and the magic's question "can torch profile CUDA here?" is no."""
    import torch

    from nbprof.collect.torch_live import cuda_available

    monkeypatch.setattr(torch, "__version__", "1.13.1")
    assert cuda_available() is False


def test_a_snapshot_without_history_draws_its_reserved_memory(tmp_path):
    """A snapshot taken without recording history (``device_traces`` empty): the chart has one
    point, the snapshot's state, whose reserved memory is its two 2 MiB segments."""
    import nbprof
    from nbprof.views.snapshot_chart import drawn_devices

    from .snapshots import hand_snapshot, write

    snap = hand_snapshot()
    snap["device_traces"] = [[]]
    [d] = drawn_devices(nbprof.load_snapshot(write(snap, tmp_path / "no_history.pickle")))
    assert d.device == "cuda:0" and d.x.tolist() == [0.0]
    assert d.reserved.tolist() == [4 << 20]
