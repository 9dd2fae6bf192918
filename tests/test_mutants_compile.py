"""Contracts of the Compile view's pure pieces that the mutation samples of issue 26 found
unpinned. Every expected value is worked out by hand from the inputs written here."""

from __future__ import annotations

import pandas as pd
import pytest


def _kernels() -> pd.DataFrame:
    # what Compilation.kernels holds: each kernel's fused ops, time, launches, source lines
    return pd.DataFrame({
        "name": ["triton_poi_fused_add_mul_0", "triton_poi_fused_mul_1", "cpp_fused_2", "mm"],
        "aten_ops": ["aten.add, aten.mul", " aten.mul ,, ", "", "extern_kernels.mm"],
        "total_us": [30.0, 10.0, 6.0, 4.0],
        "count": [2, 1, 3, 1],
        "sources": ["cell:3; cell:4", "cell:4; cell:5", "", "cell:9"],
    })


def test_op_times_of_compiled_code_split_each_kernels_time_among_the_ops_it_fused():
    from nbprof.analysis.compilation import op_times

    t = op_times(pd.DataFrame(), _kernels(), "self_cpu_us")
    assert list(t.columns) == ["op", "time_us", "count", "sources"]
    assert t.values.tolist() == [
        ["aten::add", 15.0, 2, "cell:3; cell:4"],  # half of the first kernel
        ["aten::mul", 25.0, 3, "cell:3; cell:4; cell:5"],  # the other half, and all of the second
        ["(unknown)", 6.0, 3, ""],  # a kernel whose ops the log does not name
        ["extern_kernels.mm", 4.0, 1, "cell:9"],  # not an "aten." name: as it is
    ]


def _averages() -> pd.DataFrame:
    return pd.DataFrame({
        "name": ["aten::mm", "MyModule.forward", "aten::add", "aten::fake_range", "void gemm_kernel"],
        "kind": ["op", "op", "op", "annotation", "kernel"],
        "count": [4, 1, 2, 1, 4],
        "self_cpu_us": [40.0, 5.0, 8.0, 3.0, 0.0],
        "self_device_us": [100.0, 0.0, 2.0, 0.0, 100.0],
    })


@pytest.mark.parametrize("kernels", [None, "empty"])
@pytest.mark.parametrize("metric", ["self_cpu_us", "self_device_us"])
def test_op_times_of_eager_code_are_each_aten_ops_own_time(kernels, metric):
    from nbprof.analysis.compilation import op_times

    k = _kernels().iloc[:0] if kernels == "empty" else None
    t = op_times(_averages(), k, metric)
    assert list(t.columns) == ["op", "time_us", "count", "sources"]
    times = {"self_cpu_us": [40.0, 8.0], "self_device_us": [100.0, 2.0]}[metric]
    assert t.values.tolist() == [["aten::mm", times[0], 4, ""], ["aten::add", times[1], 2, ""]]
    assert str(t["time_us"].dtype) == "float64"
