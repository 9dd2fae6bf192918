"""The report as drawn, against its reviewed baseline (tests/baselines.py says what is compared and
why; docs/testing.md, "Baselines", how a baseline is looked at and written again).

One test a case, each building its profile itself (no shared fixture: mutmut maps a mutant to the
tests that ran it, and a cached profile would map only to the first)."""

from __future__ import annotations

import numpy as np

import nbprof

from .baselines import BASELINES, check, normalize_figure, normalize_html, normalize_replies
from .conftest import DATA, trace_path


def torch_parts(p, **figures) -> dict[str, str]:
    report = p.report()
    parts = {"report": normalize_html(report.html(include_library=False)), "text": report.text()}
    parts.update({name: normalize_figure(fig) for name, fig in figures.items()})
    return parts


def test_a_training_run_on_the_h100():
    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    check("cnn_train_cuda", torch_parts(p, timeline=p.timeline(), memory_curve=p.memory_curve()))


def test_an_inference_run_with_stacks_and_modules():
    p = nbprof.load_trace(trace_path("transformer_infer_stack"))
    parts = torch_parts(p, timeline_with_python=p.timeline(python=True))
    by_stack = p.report(group_by="stack", limit=5)
    parts["by stack, 5 rows"] = by_stack.text()
    check("transformer_infer_stack", parts)


def test_two_streams_and_a_toggled_run():
    two = nbprof.load_trace(trace_path("two_streams"))
    toggled = nbprof.load_trace(trace_path("cnn_cuda_toggled"))
    parts = {f"two_streams {k}": v for k, v in torch_parts(two, timeline=two.timeline()).items()}
    parts.update({f"toggled {k}": v for k, v in torch_parts(toggled).items()})
    check("two_streams_toggled", parts)


def test_a_folder_of_ranks(tmp_path):
    from .test_cluster_timeline import ddp

    folder = ddp(tmp_path)
    p = nbprof.load_trace(folder)
    report = p.report()
    where = {str(folder): "<folder>"}
    check("ddp_folder", {"report": normalize_html(report.html(include_library=False), where),
                         "text": report.text().replace(str(folder), "<folder>"),
                         "timeline": normalize_figure(p.timeline()).replace(str(folder), "<folder>")})


def test_a_compiled_model():
    from .test_compile import RECORDED, Run

    check("compile_cpu", torch_parts(Run(RECORDED).profile()))


def test_a_data_loading_run_and_collectives():
    workers = nbprof.load_trace(DATA / "wild" / "resnet50_num_workers_0.pt.trace.json.gz")
    nccl = nbprof.load_trace(DATA / "wild" / "nccl_data.json.gz")
    parts = {f"resnet50 {k}": v for k, v in torch_parts(workers, timeline=workers.timeline()).items()}
    parts.update({f"nccl {k}": v for k, v in torch_parts(nccl).items()})
    check("loading_and_collectives", parts)


def test_steps(tmp_path):
    from .synthetic import Trace

    t = Trace()
    for k in range(3):
        t.annotation(f"ProfilerStep#{k}", 1000 * k, 999)
        t.op("aten::mm", 1000 * k + 10, 500 + 100 * k)
        t.op("aten::add", 1000 * k + 600, 50)
    p = nbprof.load_trace(t.write(tmp_path / "steps.json"))
    check("steps", torch_parts(p, timeline=p.timeline()))


def test_a_cuda_memory_snapshot(tmp_path):
    from .snapshots import hand_snapshot, write

    path = write(hand_snapshot(), tmp_path / "s.pickle")
    p = nbprof.load_snapshot(path)
    report = p.report()
    where = {str(path): "<snapshot>"}
    check("snapshot", {"report": normalize_html(report.html(include_library=False), where),
                       "text": report.text().replace(str(path), "<snapshot>"),
                       "memory_curve": normalize_figure(p.memory_curve())})


def test_a_prof_file():
    """A course's bottleneck, recorded once (tests/data/baselines/README.md says how)."""
    p = nbprof.load_prof(BASELINES / "course_bottleneck.prof")
    report = p.report()
    where = {str(BASELINES): "<data>"}
    from nbprof.model import PythonProfile

    nothing = PythonProfile({})  # a profile of no Python call (a cell of builtins only)
    check("course_bottleneck", {"report": normalize_html(report.html(include_library=False), where),
                                "text": report.text().replace(str(BASELINES), "<data>"),
                                "flame": normalize_figure(p.flame()),
                                "no calls: report": normalize_html(nothing.report().html(include_library=False)),
                                "no calls: flame": normalize_figure(nothing.flame())})


def test_a_folder_of_two_h100_ranks(tmp_path):
    """Two ranks of the H100 training run, the second's GEMMs three times as slow: the Ranks tab's
    breakdown of where each rank's time goes, its spread and its kernels."""
    from .test_cluster_timeline import h100

    folder = h100(tmp_path)
    p = nbprof.load_trace(folder)
    report = p.report()
    check("h100_folder", {"report": normalize_html(report.html(include_library=False), {str(folder): "<folder>"}),
                          "text": report.text().replace(str(folder), "<folder>")})


def test_a_live_training_run_with_workers_lines_and_memory():
    """A CPU training loop recorded once under %%torchprof --memory --stack --shapes --modules
    --lines, its batches from two DataLoader workers, each step's loss kept alive (recorded by
    tests/data/baselines/record_live.py): the Source, Memory, Modules and Data loading tabs."""
    p = nbprof.load_trace(BASELINES / "live_cpu_training.trace.json.gz")
    check("live_cpu_training", torch_parts(p, timeline=p.timeline(), memory_curve=p.memory_curve()))


def test_two_runs_compared_and_a_zoomed_timeline(tmp_path):
    """The CNN run with CUDA collection on against the same run toggled; two .prof runs of the
    course's workload (the second the same file: every change 0); the timeline zoomed on 2 ms."""
    before = nbprof.load_trace(trace_path("cnn_train_cuda"))
    after = nbprof.load_trace(trace_path("cnn_cuda_toggled"))
    torch_cmp = nbprof.compare(before, after)
    prof = nbprof.load_prof(BASELINES / "course_bottleneck.prof")
    prof_cmp = nbprof.compare(prof, nbprof.load_prof(BASELINES / "course_bottleneck.prof"))
    t0 = float(before.events["start_us"].min())
    check("compared_and_zoomed", {
        "torch html": normalize_html(torch_cmp.html(include_library=False)),
        "torch text": torch_cmp.text(),
        "prof html": normalize_html(prof_cmp.html(include_library=False), {str(BASELINES): "<data>"}),
        "prof text": prof_cmp.text().replace(str(BASELINES), "<data>"),
        "zoomed timeline": normalize_figure(before.timeline(window_us=(t0 + 5000, t0 + 7000))),
    })


def test_made_problems_collectives_and_nothing(tmp_path):
    """Runs built to show each finding: a loop whose GPU waits on .item() syncs and pageable
    copies, kernels too small to fill the GPU; two ranks waiting in an all-reduce; a trace with no
    events nbprof reads (what the report says instead of tables)."""
    from .synthetic import collectives_folder, training_loop

    loop = nbprof.load_trace(training_loop(6, kernel_us=200, gap_us=300, item_sync_us=400, copy_us=50)
                             .write(tmp_path / "loop.json"))
    small = nbprof.load_trace(training_loop(4, kernel_us=50, blocks_per_sm=0.25).write(tmp_path / "small.json"))
    folder = collectives_folder(tmp_path / "coll")
    ranks = nbprof.load_trace(folder)
    marks = tmp_path / "marks.json"  # an instant event only: nothing the tables read
    marks.write_text('{"traceEvents": [{"ph": "i", "name": "mark", "ts": 1, "pid": 1, "tid": 1, "s": "t"}]}')
    empty = nbprof.load_trace(marks)
    parts = {f"loop {k}": v for k, v in torch_parts(loop, timeline=loop.timeline()).items()}
    parts.update({f"small grid {k}": v for k, v in torch_parts(small).items()})
    parts["ranks report"] = normalize_html(ranks.report().html(include_library=False), {str(folder): "<folder>"})
    parts["ranks text"] = ranks.report().text().replace(str(folder), "<folder>")
    parts["ranks timeline"] = normalize_figure(ranks.timeline()).replace(str(folder), "<folder>")
    parts.update({f"empty {k}": v.replace(str(tmp_path), "<tmp>") for k, v in torch_parts(empty).items()})
    check("made_problems", parts)


def test_a_two_device_snapshot_with_ooms(tmp_path):
    """A caching allocator simulated over two devices (400 entries, OOMs, the oldest entries cut
    off as torch's ring buffer drops them): the chart's two panels, segments, the OOMs table."""
    from .snapshots import simulated, write

    path = write(simulated(400, seed=3, devices=2, dropped=20), tmp_path / "two.pickle")
    p = nbprof.load_snapshot(path)
    report = p.report()
    check("two_device_snapshot", {"report": normalize_html(report.html(include_library=False), {path: "<snapshot>"}),
                                  "text": report.text().replace(path, "<snapshot>"),
                                  "memory_curve": normalize_figure(p.memory_curve())})


def conversation(state, x0_ms: float, x1_ms: float, find: str, hover=()) -> list:
    """What the browser asks a live chart, in order: zoom to [x0, x1], find a name, select the
    span, hover the first rectangle of each name in ``hover`` (at its middle), zoom back out; the
    kernel side's replies."""
    replies = [state.answer({"type": "window", "x0": x0_ms, "x1": x1_ms, "width_px": 900, "seq": 1}),
               state.answer({"type": "find", "text": find, "seq": 2}),
               state.answer({"type": "select", "x0": x0_ms, "x1": x1_ms})]
    r, events = state.current.rects, state.events
    rows = list(np.unique(r["row"].to_numpy()))
    for name in hover:
        j = next(j for j in range(len(r)) if r["event"].iat[j] >= 0 and name in str(events["name"].iat[r["event"].iat[j]]))
        x_ms = (r["x0_us"].iat[j] + r["x1_us"].iat[j]) / 2000.0
        replies.append(state.answer({"type": "hover", "trace": rows.index(r["row"].iat[j]), "x": x_ms}))
    replies += [state.answer({"type": "find", "text": "", "seq": 3}),
                state.answer({"type": "window", "x0": None, "x1": None, "width_px": 900, "seq": 4})]
    return replies


def test_the_live_charts_answers(tmp_path):
    """The live timeline of the H100 run and of a folder of ranks, and the live snapshot chart:
    what each answers a zoom, a search, a selected span, a hover and a zoom out."""
    from nbprof.cluster.timeline import ClusterTimelineState
    from nbprof.views.live_timeline import LiveTimelineState
    from nbprof.views.snapshot_chart import SnapshotChartState
    from nbprof.views.timeline import prepare_timeline

    from .snapshots import hand_snapshot, write
    from .test_cluster_timeline import ddp

    cnn = nbprof.load_trace(trace_path("cnn_train_cuda"))
    full = prepare_timeline(cnn)
    state = LiveTimelineState(cnn, full, python=False, max_rects=20_000, height=None)
    t0, span = full.t0_us / 1000, (full.t1_us - full.t0_us) / 1000
    # hovered: a kernel (the arrow from its launch) and a launch call (the arrow to its kernel)
    cnn_replies = conversation(state, t0 + 0.3 * span, t0 + 0.6 * span, "conv", ["sm80_xmma", "cudaLaunchKernel"])
    folder = ddp(tmp_path)
    view = nbprof.load_trace(folder).timeline_view()
    cluster = ClusterTimelineState(view.timeline, view.data, height=None)
    c0, cspan = view.data.t0_us / 1000, (view.data.t1_us - view.data.t0_us) / 1000
    cluster_replies = conversation(cluster, c0 + 0.2 * cspan, c0 + 0.4 * cspan, "allreduce")
    snap = SnapshotChartState(nbprof.load_snapshot(write(hand_snapshot(), tmp_path / "s.pickle")))
    snap_replies = [snap.answer(m) for m in ({"type": "window", "x0": 0.01, "x1": 0.05, "width_px": 600, "seq": 1},
                                             {"type": "select", "x0": 0.01, "x1": 0.05},
                                             {"type": "find", "text": "x", "seq": 2},
                                             {"type": "window", "x0": None, "x1": None, "seq": 3})]
    check("live_charts", {"cnn timeline": normalize_replies(cnn_replies),
                          "folder timeline": normalize_replies(cluster_replies).replace(str(folder), "<folder>"),
                          "snapshot chart": normalize_replies(snap_replies)})
