"""What seed 66's sample of mutants (docs/testing.md) showed no test held, each against an answer of
its own: a folder of ranks written by hand (tests/synthetic.py), its kernels' times added by hand,
and the progress line a folder's load writes where stderr is no terminal."""

from __future__ import annotations

import nbprof

from .synthetic import collectives_folder
from .test_cluster import cpu_only_folder


def test_a_folder_of_gpu_ranks_repr_gives_self_cuda_in_ms(tmp_path):
    """Two GPU ranks written by hand (synthetic.collectives_folder): per rank aten::mm (20 µs) and
    c10d::allreduce_ (10 µs), each launching one kernel: gemm 100 / 550 µs, the NCCL all-reduce 500 /
    50 µs. 2 x (2 ops + 2 launches + 2 kernels) = 12 events; self CPU 2 x (20 + 10) = 60 µs = 0.060
    ms; self CUDA 100 + 500 + 550 + 50 = 1200 µs = 1.200 ms."""
    p = nbprof.load_trace(collectives_folder(tmp_path / "coll"), workers=0, progress=False)
    assert repr(p) == "<ClusterProfile 2 ranks, 12 events, self CPU 0.060 ms, self CUDA 1.200 ms>"


def test_a_folder_loaded_by_a_worker_process_says_so_in_its_first_progress_line(tmp_path, capsys):
    """Where stderr is no terminal (pytest's capture) a folder's load writes one plain line per
    rank, after a first line saying where the ranks are read: three CPU ranks read by one spawned
    worker process (workers=1) -> "nbprof: loading 3 ranks (1 worker process)", then 1, 2, 3 of 3."""
    p = nbprof.load_trace(cpu_only_folder(tmp_path / "cpu"), workers=1, progress=True)
    try:
        assert p.rank_labels == [0, 1, 2]
    finally:
        p.close()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "nbprof: loading 3 ranks (1 worker process)"
    assert [line.split(" ranks loaded")[0] for line in lines[1:]] == [f"nbprof: {k} of 3" for k in (1, 2, 3)]
