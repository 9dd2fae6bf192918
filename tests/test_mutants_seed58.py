"""What seed 58's sample of mutants (docs/testing.md) showed no test held, each against an answer
of its own: the file torch wrote, a hand-built record, the loop we made."""

from __future__ import annotations

import gzip
import json

import numpy as np

import nbprof

from .conftest import trace_path
from .test_data_loading_findings import loop_record, profile_of, steady


def test_a_saved_traces_memory_events_keep_torchs_scope(tmp_path):
    """torch writes each [memory] event as a thread-scoped instant event ("s": "t"); the saved
    trace writes them so too, as many as there were."""
    with gzip.open(trace_path("cnn_train_cuda"), "rt") as f:
        raw = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "i" and e.get("name") == "[memory]"]
    path = nbprof.load_trace(trace_path("cnn_train_cuda")).save(tmp_path / "again.json.gz")
    with gzip.open(path, "rt") as f:
        saved = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "i" and e.get("name") == "[memory]"]
    assert len(saved) == len(raw) == 425
    assert {e.get("s") for e in raw} == {e.get("s") for e in saved} == {"t"}


def test_a_killed_worker_counts_the_batches_it_made_not_its_end_of_data():
    """A worker killed after two batches and the end-of-data record of an iterable dataset (status 3):
    the note counts the two batches."""
    from nbprof.analysis.data_loading import record_notes

    rec = loop_record([100.0] * 4, stats=False)
    w = rec.workers[0]
    assert len(w.batches) == 2 and (w.batches[:, 0] == 1).all()  # two batches, each "ok" (1)
    end = w.batches[-1].copy()
    end[0], end[2] = 3, -1
    w.batches = np.vstack([w.batches, end])
    [note] = [n for n in record_notes(rec) if "worker 0 " in n]
    assert "its 2 batches until then are in the Data loading tab" in note


def test_two_producing_workers_of_three_are_not_one():
    """An IterableDataset whose three workers split the data between two of them: the finding is
    about how many workers keep up, not about a dataset that gives every batch to one worker."""
    rec = loop_record([400.0] + [3000.0] * 5, make_us=9500.0, iterable=True, workers=3, producers=[0, 1])
    f = steady(profile_of(rec))
    assert f["evidence"]["producing_workers"] == 2
    assert "One worker of" not in f["message"] and "would keep up; it has 3." in f["message"]


def test_loop_iterations_of_a_record_without_a_line_tracer():
    """A record without the line tracer's part (a run without --lines, a saved trace of another
    tool) has no loop iterations, and says so without failing."""
    from nbprof.analysis.loops import loop_iterations

    assert loop_iterations({}) == []
    assert loop_iterations({"tracer": None, "codes": {}, "sources": {}}) == []


def test_a_loader_line_names_prefetch_factor_only_when_it_is_known():
    """A record that does not know the loader's prefetch_factor (None: a saved record of an older
    torch) says nothing of it; one that does, says it."""
    unknown = profile_of(loop_record([100.0] * 4, prefetch=None)).report().html(include_library=False)
    known = profile_of(loop_record([100.0] * 4, prefetch=3)).report().html(include_library=False)
    assert "<b>train_loader</b> (Images; 2 workers, fork): 4 batches" in unknown
    assert "<b>train_loader</b> (Images; 2 workers, fork, prefetch_factor 3): 4 batches" in known


def test_where_another_profiler_started_is_named_as_its_package_or_folder_names_it():
    """The takeover note's site: a library file by its package path, any other file by its last two
    parts (a project's helper), never with the shortened path's leading "…/"."""
    from nbprof.run.runner import _site_text

    assert _site_text([("/home/me/project/helpers/start.py", 3, "start")], None) == "helpers/start.py:3 in start"
    assert (_site_text([("/usr/lib/python3/site-packages/accelerate/accelerator.py", 3578, "profile")], None)
            == "accelerate/accelerator.py:3578 in profile")


def test_a_one_byte_copys_bandwidth_is_its_byte_over_its_time(tmp_path):
    """A DtoH copy of one byte (a bool's .item()) in 2 µs: 1 B / 2 µs = 0.0005 GB/s, not "no
    bandwidth"; a copy of no bytes has none."""
    from .synthetic import Trace

    t = Trace()
    ext = t.op("aten::item", 0, 20)
    t.launch("Memcpy DtoH (Device -> Pageable)", ext, 2, 5, 10, 2.0, runtime="cudaMemcpyAsync", cat="gpu_memcpy",
             nbytes=1)
    ext = t.op("aten::copy_", 30, 20)
    t.launch("Memcpy HtoD (Pageable -> Device)", ext, 32, 5, 40, 2.0, runtime="cudaMemcpyAsync", cat="gpu_memcpy",
             nbytes=0)
    k = nbprof.load_trace(t.write(tmp_path / "copies.json")).kernels().set_index("name")
    assert k.at["Memcpy DtoH (Device -> Pageable)", "bandwidth_gbps"] == 1 / 2e-6 / 1e9
    assert np.isnan(k.at["Memcpy HtoD (Pageable -> Device)", "bandwidth_gbps"])


def test_a_device_that_only_set_memory_has_its_busy_line(tmp_path):
    """A GPU whose only work is a memset (a zero_ on an idle device): the Kernels tab still says how
    busy it was (2 µs of the 50 µs span: 4.0 %)."""
    from .synthetic import Trace

    t = Trace()
    ext = t.op("aten::zero_", 0, 50)
    t.launch("Memset (Device)", ext, 2, 5, 10, 2.0, runtime="cudaMemsetAsync", cat="gpu_memset", nbytes=4096)
    html = nbprof.load_trace(t.write(tmp_path / "memset.json")).report().html(include_library=False)
    assert "<b>cuda:0</b>, whole profile (50.0 µs): GPU busy 4.0%" in html


def test_a_folder_of_instant_ranks_has_no_collective_wait(tmp_path):
    """Two ranks whose whole profile is one all-reduce of no time (span 0): nobody waited, so no
    finding says a rank did (0 against a median of 0 is not "100 % of its span")."""
    from .synthetic import Trace

    folder = tmp_path / "instant"
    folder.mkdir()
    for r in (0, 1):
        t = Trace(rank=r)
        ext = t.op("c10d::allreduce_", 0, 0)
        t.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ext, 0, 0, 0, 0, stream=20)
        t.write(folder / f"rank{r}.json")
    p = nbprof.load_trace(folder)
    assert "collective_wait" not in set(p.findings["kind"])


def test_a_window_with_more_collectives_than_it_links_keeps_the_longest_waits(tmp_path):
    """The DDP folder's three all-reduces, linked at most one at a time: the one kept is the one
    whose ranks waited longest (from the raw files: the gap between the two ranks' starts)."""
    from .test_cluster_timeline import Raw, ddp, load

    folder = ddp(tmp_path)
    raw, p = Raw(folder), load(folder)
    starts = {r: sorted(raw.start(e) for e in raw.events(r) if e["name"].startswith("gloo:")) for r in raw.docs}
    a, b = list(starts)
    gaps = [abs(starts[a][seq] - starts[b][seq]) for seq in range(3)]
    view = p.timeline_view()
    timeline, data = view.timeline, view.data
    links = timeline._links(data.t0_us, data.t1_us, limit=1)
    assert len(links) == 2 and links["group"].nunique() == 1  # one collective, both ranks' calls
    seq = int(np.argmax(gaps))
    assert all(f" #{seq}" in text for text in links["text"]), (gaps, list(links["text"]))


def test_a_gpu_whose_memory_the_trace_does_not_give_reads_minus_one(tmp_path):
    """deviceProperties without totalGlobalMem (an older CUPTI, a ROCm trace): the device's
    total_memory_bytes is -1, "unknown", as the column says; a given one is read as written."""
    from .synthetic import Trace

    t = Trace()
    ext = t.op("aten::mm", 0, 50)
    t.launch("gemm", ext, 2, 5, 10, 20.0)
    t.launch("gemm", ext, 8, 5, 40, 5.0, device=1)
    t.device_properties = [{"id": 0, "name": "A GPU"}, {"id": 1, "name": "B GPU", "totalGlobalMem": 85_000_000_000}]
    d = nbprof.load_trace(t.write(tmp_path / "two.json")).device_stats.devices.set_index("device")
    assert d.at["cuda:0", "total_memory_bytes"] == -1
    assert d.at["cuda:1", "total_memory_bytes"] == 85_000_000_000
