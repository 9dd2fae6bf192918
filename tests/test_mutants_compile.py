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


HERE = "/tmp/ipykernel_4242/3141592653.py"  # this kernel's file of a cell (named by a hash of its code)
NAMES = {HERE: "In [5]", "/tmp/ipykernel_4242/2718281828.py": "In [6]", "/home/u/other/3141592653.py": "In [9]",
         "C:\\Temp\\ipykernel_88\\1618033988.py": "In [2]"}  # a Windows kernel's


@pytest.mark.parametrize("filename,line,expected", [
    ("", 3, ""),  # no file: no location
    (HERE, 12, "In [5] line 12"),
    (HERE, None, "In [5]"),
    ("<ipython-input-7-abc123>", 4, "In [7] line 4"),  # IPython's own name of a cell's code
    ("<ipython-input-17-0>", None, "In [17]"),
    # the same cell (the same hash) in another kernel's folder: a cache hit's provenance
    ("/tmp/ipykernel_1/3141592653.py", 2, "In [5] line 2"),
    ("C:\\Temp\\ipykernel_1\\1618033988.py", 2, "In [2] line 2"),  # Windows folders: "\\"
    ("C:\\Temp\\ipykernel_1\\1111111111.py", 2, "…/ipykernel_1/1111111111.py:2"),
    ("/tmp/ipykernel_1/1111111111.py", 2, "…/ipykernel_1/1111111111.py:2"),  # a cell this kernel never ran
    ("/home/u/other/1111111111.py", 2, "…/other/1111111111.py:2"),  # not a kernel's cell file
    ("/home/u/project/models/mlp.py", 12, "…/models/mlp.py:12"),
    ("mlp.py", 3, "mlp.py:3"),
    ("/opt/mlp.py", None, "/opt/mlp.py"),
])
def test_cell_location_names_a_line_as_a_traceback_does(filename, line, expected):
    from nbprof.analysis.compilation import cell_location

    assert cell_location(filename, line, NAMES) == expected


def test_compile_range_mask_marks_torch_compiles_own_ranges(tmp_path):
    from nbprof.analysis.compilation import compile_range_mask

    from .synthetic import Trace

    t = Trace()
    expected = {}

    def ann(name, ts, dur, compile_range, op=False):
        (t.op if op else t.annotation)(name, ts, dur)
        expected[name] = compile_range

    ann("train", 0, 1000, False)  # the user's range around it all
    ann("entire_frame_compile", 10, 490, True)  # a phase's name around a timed range
    ann("_compile.compile_inner (dynamo_timed)", 20, 460, True)
    ann("compile_fx_inner", 30, 270, True)  # the same key as the timed range it holds
    ann("compile_fx_inner (dynamo_timed)", 40, 250, True)
    ann("aten::mm", 50, 10, False, op=True)  # an operator the compiler ran: not a range of its own
    ann("PythonDispatchMode", 70, 5, True)
    ann("CompilationMetrics_data: compile_id=0/0", 80, 1, True)  # the log's annotation inside
    ann("my_helper", 310, 50, False)  # neither the key nor a phase: the timed range inside stops here
    ann("other (dynamo_timed)", 320, 10, True)
    ann("stray_data: x", 600, 5, False)  # "_data: " outside every compile range
    ann("PythonDispatchMode#2", 700, 5, False)  # not the dispatcher's range
    ann("compile_attempt_0", 800, 100, True)
    ann("foo (dynamo_timed)", 810, 10, True)
    t.gpu_annotation("gpu (dynamo_timed)", 820, 5, ext=1)  # on the device: not a CPU range
    expected["gpu (dynamo_timed)"] = False
    t.annotation("PythonDispatchMode", 900, 5)  # the dispatcher's range outside too: all of them go
    events = t.load(tmp_path).events
    mask = compile_range_mask(events)
    assert mask.dtype == bool and len(mask) == len(events)
    got = {}
    for name, m in zip(events["name"].astype(str), mask.tolist()):
        got.setdefault(name, []).append(m)
    assert got.pop("PythonDispatchMode") == [True, True]
    expected.pop("PythonDispatchMode")
    assert got == {name: [m] for name, m in expected.items()}
