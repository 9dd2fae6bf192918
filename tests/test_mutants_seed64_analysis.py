"""What seed 64's sample of mutants (docs/testing.md) showed no test held in nbprof.analysis, each
against an answer of its own: a compile log and a trace written by hand, a folder of ranks written
by hand, every expected value worked out from the numbers written here."""

from __future__ import annotations

import math

import nbprof

from .synthetic import Trace

CELL = "/tmp/ipykernel_7/1111111.py"  # a notebook cell's file, named "In [3]" by the kernel


def test_graph_lines_without_a_file_comment_above_give_no_source(tmp_path):
    """Dynamo's output graph as a log may hold it: a node line before any ``# File:`` comment
    (``add``: no source known) and a line after a comment that is no node (blank). The kernel of
    ``add`` has no source line; the kernel of ``mul`` (after the comment at line 20, past the blank
    line) has line 20; nothing fails."""
    from nbprof.analysis.compilation import compilation

    graph = ['add: "f32[4]" = x + 1', f"# File: {CELL}:20 in f, code: b = a * 2", "", 'mul: "f32[4]" = add * 2']

    def code(n: int, node: str, aten: str) -> list[str]:
        return [f'RECORD_FUNCTION("graph_0_cpp_fused_{node}_{n}", c10::ArrayRef<c10::IValue>({{}}));',
                f"# Source Nodes: [{node}], Original ATen: [{aten}]", f"cpp_fused_{node}_{n}(buf0)"]

    generated = code(0, "add", "aten.add") + code(1, "mul", "aten.mul")
    log = {"records": [{"event": "dynamo_output_graph", "lines": graph},
                       {"event": "inductor_output_code", "lines": generated}]}
    t = Trace()
    t.op("graph_0_cpp_fused_add_0", 0, 30)
    t.op("graph_0_cpp_fused_mul_1", 40, 10)
    c = compilation(t.load(tmp_path).events, log, {CELL: "In [3]"})
    assert c.kernels[["name", "aten_ops", "sources"]].values.tolist() == [
        ["graph_0_cpp_fused_add_0", "aten.add", ""],
        ["graph_0_cpp_fused_mul_1", "aten.mul", "In [3] line 20"]]


def test_a_kernel_launch_without_a_correlation_id_is_no_lost_kernel(tmp_path):
    """A cudaLaunchKernel the trace wrote without a correlation id (0: none) before a launch whose
    kernel is there cannot point anywhere, so it is no launch that lost its kernel: with the
    clocks otherwise agreeing (the kernel starts 10 µs after its call), no clock_skew finding."""
    from nbprof.analysis.findings import clock_skew
    from nbprof.analysis.findings._common import TorchContext

    t = Trace()
    ext = t.op("aten::add", 0, 50)
    t.runtime("cudaLaunchKernel", 10, 5, ext=ext)  # no correlation arg
    ext = t.op("aten::mm", 100, 50)
    t.launch("gemm", ext, 110, 5, 120, 20)
    assert list(clock_skew.find(TorchContext(t.load(tmp_path)))) == []


def test_one_collective_on_one_rank_of_two_is_a_wait(tmp_path):
    """Two ranks: rank 0 spends 500 µs in one all-reduce (the collectives table's only row), rank 1
    never reaches it. Each span is 610 µs (rank 0: 10 + 100 µs of gemm, then 500 µs in the
    all-reduce to 610; rank 1: a gemm from 10 to 610), so rank 0 waits 500 µs against a median of
    0 on the other rank: 500 / 610 of its span, "high" (>= 15 %)."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    a, b = Trace(rank=0), Trace(rank=1)
    ext = a.op("aten::mm", 0, 20)
    a.launch("gemm", ext, 1, 5, 10, 100)
    ext = a.op("c10d::allreduce_", 30, 10)
    a.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ext, 31, 5, 110, 500, stream=20)
    ext = b.op("aten::mm", 0, 20)
    b.launch("gemm", ext, 1, 5, 10, 600)
    a.write(folder / "a.json")
    b.write(folder / "b.json")
    p = nbprof.load_trace(folder)
    assert len(p.collectives()) == 1
    f = p.findings
    [(severity, evidence)] = f.loc[f["kind"] == "collective_wait", ["severity", "evidence"]].values.tolist()
    assert severity == "high"
    assert evidence["waiting_rank"] == 0 and evidence["late_rank"] == 1
    assert evidence["total_us"] == {"0": 500.0, "1": 0.0} and evidence["extra_us"] == 500.0
    assert math.isclose(evidence["share"], 500 / 610)


def test_blocks_of_three_ranks_on_two_devices_pair_within_their_own_rank_and_device(tmp_path):
    """Three ranks, each allocating 512 B at address 4096 on cuda:0 (at 10 + rank µs, never freed)
    and freeing 256 B at the same address on the CPU (at 50 + rank µs, a block from before the
    profile). An address pairs only with itself on the same rank and device: three blocks still
    held and three from before, none paired across ranks or devices."""
    from nbprof.analysis.memory import allocations

    folder = tmp_path / "ranks"
    folder.mkdir()
    for r in range(3):
        t = Trace(rank=r)
        t.op("aten::empty", 0, 100)
        t.memory(10 + r, 512, 512, 1024, device=0, addr=4096)
        t.memory(50 + r, -256, 512, 1024, device=-1, addr=4096)
        t.write(folder / f"rank{r}.json")
    a = allocations(nbprof.load_trace(folder).events)
    rows = a[["rank", "device", "bytes", "alloc_us", "free_us"]].astype(object).values.tolist()
    assert [[None if v != v else v for v in row] for row in rows] == [
        [0, "cpu", 256, None, 50.0], [1, "cpu", 256, None, 51.0], [2, "cpu", 256, None, 52.0],
        [0, "cuda:0", 512, 10.0, None], [1, "cuda:0", 512, 11.0, None], [2, "cuda:0", 512, 12.0, None]]
