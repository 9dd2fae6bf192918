"""What seed 69's sample of mutants (docs/testing.md) showed no test held, last part: the Compile
view's kernels on the reader's own events table (before the tree adds its columns), the exposed
communication finding where one rank's GPU window is empty, the straggler finding on ranks with no
span, and a step's blocks kept for good counted on their own device only. Each against hand-made
traces, every expected value worked out from the numbers written here."""

from __future__ import annotations

import nbprof

from .synthetic import Trace


def test_compiled_kernels_of_the_readers_table_before_the_tree(tmp_path):
    """``compilation()`` on the events as the reader gives them (no tree yet: no ``parent``, no
    ``device_total_us``): the C++ kernel ``graph_0_cpp_fused_relu_0`` ran twice, 7 and 3 µs, on the
    CPU: one row, 10 µs in all, 5 µs each, all of the kernels' time, its op (relu) from its name."""
    from nbprof.analysis.compilation import compilation
    from nbprof.collect.chrome_trace import read_trace_file

    t = Trace()
    t.op("graph_0_cpp_fused_relu_0", 0, 7)
    t.op("graph_0_cpp_fused_relu_0", 10, 3)
    events = read_trace_file(t.write(tmp_path / "kernel.json")).events
    assert "device_total_us" not in events.columns and "parent" not in events.columns
    c = compilation(events, None)
    assert c.kernels.values.tolist() == [["graph_0_cpp_fused_relu_0", "cpp", 2, 10.0, 5.0, 1.0, "aten.relu", "", "cpu"]]


def test_comm_exposed_names_the_exposed_rank_beside_a_rank_without_device_work(tmp_path):
    """A trace of two ranks (a folder's merged trace): rank 0 ran only a CPU op (no device work: a
    GPU window of 0), rank 1 a gemm from 10 to 110 µs, then an all-reduce kernel from 110 to 610
    µs with no compute beside it: 500 of its 600 µs window exposed, 83 %. The finding is rank 1's;
    rank 0's empty window is no share at all (not a 0 / 0 that would outrank rank 1)."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    a, b = Trace(rank=0), Trace(rank=1)
    a.op("aten::add", 0, 50)
    ext = b.op("aten::mm", 0, 20)
    b.launch("gemm", ext, 1, 5, 10, 100)
    ext = b.op("c10d::allreduce_", 30, 10)
    b.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ext, 31, 5, 110, 500, stream=20)
    a.write(folder / "a.json")
    b.write(folder / "b.json")
    merged = tmp_path / "merged.json"
    nbprof.load_trace(folder).to_chrome_trace(merged)
    p = nbprof.load_trace(merged)
    f = p.findings
    [(severity, evidence)] = f.loc[f["kind"] == "comm_exposed", ["severity", "evidence"]].values.tolist()
    assert severity == "high"
    assert evidence["rank"] == 1 and evidence["exposed_comm_us"] == 500.0 and evidence["ranks_over"] == 1
    assert evidence["share"] == 500 / 600


def test_no_straggler_among_ranks_with_no_span(tmp_path):
    """Two ranks, each one op of 0 µs at 5 µs: both spans are 0, no compute, no collectives. Nothing
    differs: no straggler (a median span of 0 makes no share of waiting)."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    for r in (0, 1):
        t = Trace(rank=r)
        t.op("aten::add", 5, 0)
        t.write(folder / f"r{r}.json")
    p = nbprof.load_trace(folder)
    assert p.ranks().table["span_us"].tolist() == [0.0, 0.0]
    assert "straggler" not in set(p.findings["kind"])


def test_a_steps_block_kept_for_good_counts_on_its_own_device_only(tmp_path):
    """One step (0 to 100 µs) allocates a 512-byte block on cuda:0, never freed, and a 256-byte
    block on the CPU, freed within it: the step's cuda:0 row keeps 512 bytes in 1 block, its CPU
    row none (the GPU's block is not the CPU's)."""
    t = Trace()
    t.annotation("ProfilerStep#0", 0, 100)
    t.op("aten::empty", 10, 5)
    t.memory(11, 512, 512, 2048, device=0, addr=1)
    t.op("aten::empty", 20, 5)
    t.memory(21, 256, 256, 256, device=-1, addr=2)
    t.op("aten::add", 30, 5)
    t.memory(31, -256, 0, 256, device=-1, addr=2)
    g = t.load(tmp_path).memory_growth()
    cols = ["step", "device", "allocated_bytes", "added_never_freed_bytes", "never_freed_blocks"]
    assert g[cols].values.tolist() == [[0, "cpu", 256, 0, 0], [0, "cuda:0", 512, 512, 1]]
