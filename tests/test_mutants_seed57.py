"""Behaviour seed 57's mutation sample found untested (docs/testing.md), each against an answer
worked out by hand: a trace whose thread id is 0 keeps its Python lane."""

from __future__ import annotations

import nbprof


def test_python_events_on_thread_0_are_drawn_in_their_python_lane(tmp_path):
    """A trace whose events carry tid 0 (written so by some tools): with python=True the Python
    function is drawn in the thread's Python lane, above its operator, as on any other thread."""
    from nbprof.views.timeline import prepare_timeline

    from .synthetic import Trace

    t = Trace()
    t.op("aten::mm", 0, 50, tid=0)
    t.op("train.py(12): step", 0, 60, tid=0, cat="python_function")
    p = nbprof.load_trace(t.write(tmp_path / "tid0.json"))
    r = prepare_timeline(p, python=True).rects
    assert r[["row", "name", "family"]].values.tolist() == [[0, "train.py(12): step", "python"], [1, "aten::mm", "op"]]


def test_each_ranges_first_start_is_its_first_annotations_in_microseconds():
    """``range_parts``' ``first_us`` (the folder's merged Ranges order siblings by it): each path's
    earliest start, in µs on the profile's clock, as the events table has its annotations."""
    import numpy as np

    from nbprof.analysis.ranges import range_parts

    from .conftest import trace_path

    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    table, _ = range_parts(p.events, p.meta)
    ev = p.events
    ann = ev[(ev["kind"].astype(str) == "annotation").to_numpy()]
    for label, first in zip(table["label"], table["first_us"]):
        starts = ann.loc[(ann["name"].astype(str) == label).to_numpy(), "start_us"].to_numpy()
        assert first == float(np.min(starts)), label


def test_the_cuda_share_column_is_drawn_as_a_share_like_the_cpu_one():
    """The Operators tab of cnn_train_cuda: "Self CUDA %" is rendered (DataTables' render function)
    and sent (its values, 0..1) as "Self CPU %" is."""
    from .conftest import trace_path
    from .test_mutants_views3 import dt_tables, panels

    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    [table] = dt_tables(panels(p.report(limit=0).html(include_library=False))["Operators"])
    cpu, cuda = table["headers"].index("Self CPU %"), table["headers"].index("Self CUDA %")
    assert table["renders"][cuda] == table["renders"][cpu]
    shares = [row[cuda] for row in table["rows"]]
    assert all(0 <= s <= 1 for s in shares) and abs(sum(shares) - 1) < 1e-6


def test_the_timelines_memory_tracks_name_their_device_and_start_at_zero():
    """cnn_train_cuda's timeline: a memory track per device (cpu, cuda:0), each hover naming its
    device, each track's axis starting at 0 (so a track's height reads as the amount held)."""
    from .conftest import trace_path

    fig = nbprof.load_trace(trace_path("cnn_train_cuda")).timeline()
    tracks = [t for t in fig.data if (t.name or "").endswith(" allocated")]
    assert sorted(t.name for t in tracks) == ["cpu allocated", "cuda:0 allocated"]
    for t in tracks:
        assert t.hovertemplate == f"{t.name} %{{text}}<extra></extra>"
        axis = fig.layout["yaxis" + t.yaxis[1:]]
        assert axis.rangemode == "tozero", t.yaxis


def test_a_gpu_listed_without_its_id_is_device_0(tmp_path):
    """cnn_train_cuda's GPU given 100 MiB of memory (its peak reserves 92 MiB: 92 % of it, a medium
    finding), once with its ``id`` in ``deviceProperties`` and once without (a trace of a single
    GPU written without it): both read the GPU as cuda:0, the same finding word for word."""
    import gzip
    import json

    from .conftest import trace_path

    with gzip.open(trace_path("cnn_train_cuda"), "rt") as f:
        doc = json.load(f)
    [prop] = doc["deviceProperties"]
    prop["totalGlobalMem"] = 100 * 2**20
    (tmp_path / "with_id.json").write_text(json.dumps(doc))
    assert prop.pop("id") == 0
    (tmp_path / "no_id.json").write_text(json.dumps(doc))

    def peak(name):
        f = nbprof.load_trace(tmp_path / name).findings
        row = f[f["kind"] == "memory_peak"].iloc[0]
        return row["severity"], row["message"]

    severity, message = peak("with_id.json")
    assert severity == "medium" and "(92.00 MiB reserved by the caching allocator, 92% of the device)" in message
    assert peak("no_id.json") == (severity, message)


def test_the_headline_sums_over_shapes_only_when_the_top_op_has_several():
    """Grouped by input shape, the headline says "all its input shapes" where the top op is split
    over several rows (aten::addmm: 3 shapes in transformer_infer_stack), and not where it is one
    row (aten::convolution_backward: 1 shape in cnn_train_cuda), as key_averages("shape") has them."""
    from .conftest import trace_path

    for name, op, rows, said in (("cnn_train_cuda", "aten::convolution_backward", 1, "(56.4%)"),
                                 ("transformer_infer_stack", "aten::addmm", 3, "(57.6%, all its input shapes)")):
        p = nbprof.load_trace(trace_path(name))
        assert int((p.key_averages("shape")["name"] == op).sum()) == rows
        assert p.report(group_by="shape").top_line() == f"top by self CUDA: {op} {said}"
