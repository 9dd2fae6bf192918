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


def test_compile_units_split_each_units_time_among_the_phases_of_its_ranges(tmp_path):
    from nbprof.analysis.compilation import compile_units

    from .synthetic import Trace

    t = Trace()
    # a frame's compilation: phases by the ranges' names, exclusive times (ms of each in the comments)
    t.annotation("_compile.compile_inner (dynamo_timed)", 100, 1000)  # Dynamo: 1000 - 500 - 40 - 10
    t.annotation("CompilationMetrics_data: compile_id=0/0", 110, 1)  # a marker: its id, no time
    t.annotation("compile_fx_inner (dynamo_timed)", 200, 500)  # lowering: 500 - 200 - 100
    t.annotation("code_gen (dynamo_timed)", 300, 200)  # codegen: 200 - 50
    t.annotation("compile_file (dynamo_timed)", 350, 50)  # C++ compile
    t.annotation("mystery (dynamo_timed)", 550, 100)  # no rule: its parent's phase (lowering)
    t.annotation("fx_graph_cache_lookup (dynamo_timed)", 750, 40)  # cache
    t.annotation("PythonDispatchMode", 800, 10)  # no rule: Dynamo, as its parent
    # a backward graph compiled at the first backward()
    t.annotation("bw_compiler (dynamo_timed)", 2000, 300)  # lowering: 300 - 100
    t.annotation("bwd_data: compile_id=[1/0]", 2010, 1)
    t.annotation("autotune_select_algorithm (dynamo_timed)", 2050, 100)
    t.annotation("later_data: compile_id=2/0", 2200, 1)  # the first marker's id is the unit's
    t.annotation("PythonDispatchMode", 3000, 5)  # outside every compile range: no unit
    t.annotation("weird (dynamo_timed)", 4000, 30)  # no rule, no parent: Other
    events = t.load(tmp_path).events
    u = compile_units(events)
    assert list(u.columns) == ["row", "start_us", "dur_us", "frame_unit", "backward", "compile_id", "dynamo_us",
                               "aot_autograd_us", "inductor_us", "codegen_us", "compile_code_us", "autotune_us",
                               "cache_us", "other_us"]
    assert events["name"].astype(str).to_numpy()[u["row"].to_numpy()].tolist() == [
        "_compile.compile_inner (dynamo_timed)", "bw_compiler (dynamo_timed)", "weird (dynamo_timed)"]
    assert u.drop(columns="row").values.tolist() == [
        # start_us from the profile's start (its first event, at 100)
        [0.0, 1000.0, True, False, "0/0", 460.0, 0.0, 300.0, 150.0, 50.0, 0.0, 40.0, 0.0],
        [1900.0, 300.0, False, True, "1/0", 0.0, 0.0, 200.0, 0.0, 0.0, 100.0, 0.0, 0.0],
        [3900.0, 30.0, False, False, "", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 30.0],
    ]
    assert str(u["frame_unit"].dtype) == str(u["backward"].dtype) == "bool"


@pytest.mark.parametrize("first", ["a unit", "not compilation"])
def test_a_marker_outside_every_compile_range_names_no_unit(tmp_path, first):
    """Two compile units without markers of their own, then a stray "x_data: compile_id=9/0"
    outside both: neither unit takes its id, whether the profile's first event is one of them or
    not (a marker counts only inside a compile range: ``compile_range_mask``)."""
    from nbprof.analysis.compilation import compile_units

    from .synthetic import Trace

    t = Trace()
    if first == "not compilation":
        t.annotation("train", 0, 10)
    t.annotation("weird (dynamo_timed)", 20, 30)
    t.annotation("bw_compiler (dynamo_timed)", 100, 300)
    t.annotation("x_data: compile_id=9/0", 500, 1)
    u = compile_units(t.load(tmp_path).events)
    assert len(u) == 2 and u["compile_id"].tolist() == ["", ""]


UNIT_COLUMNS = ["row", "start_us", "dur_us", "frame_unit", "backward", "compile_id", "dynamo_us", "aot_autograd_us",
                "inductor_us", "codegen_us", "compile_code_us", "autotune_us", "cache_us", "other_us"]


@pytest.mark.parametrize("names", [[], ["PythonDispatchMode"], ["x_data: compile_id=0/0"]])
def test_compile_units_of_a_profile_without_a_compile_range_are_an_empty_table(tmp_path, names):
    from nbprof.analysis.compilation import compile_units

    from .synthetic import Trace

    t = Trace()
    t.annotation("train", 0, 100)
    for i, name in enumerate(names):  # a dispatcher's range or a marker alone is no compilation
        t.annotation(name, 10 + i, 1)
    u = compile_units(t.load(tmp_path).events)
    assert list(u.columns) == UNIT_COLUMNS and len(u) == 0


VALUE = "a Python value the code reads changed (each value compiles once: pass it as a tensor)"


@pytest.mark.parametrize("reason,advice", [
    ("0/1: L['n'] == 3", VALUE),
    ("0/1: L['mode'] != 'train'", VALUE),
    ("0/1: EQUALS_MATCH(L['scale'], 2.0)", VALUE),  # a guard's name, any case
    ("0/1: Constant_Match(L['flag'])", VALUE),
    ("0/1: Cache_Size_Limit reached", "the recompile limit was hit: Dynamo falls back to eager for this frame"),
    ("0/1: something else", ""),
])
def test_recompile_advice_of_value_guards_and_the_limit(reason, advice):
    from nbprof.analysis.compilation import _recompile_advice

    assert _recompile_advice(reason) == advice


def test_a_graph_breaks_title_explanation_and_user_line():
    from nbprof.analysis.compilation import _graph_break

    payload = (
        "Graph Break Reason: Encountered graph break when attempting to trace CALL: a call to a function\n"
        "\n"
        "Unsupported Tensor.item() call with capture_scalar_outputs=False\n"
        "  Explanation: Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False.\n"
        "  Hint: Set `torch._dynamo.config.capture_scalar_outputs = True`\n"
        "\n"
        "User code traceback:\n"
        '  File "/home/u/train.py", line 7, in step\n'
        "    n = x.sum().item()\n"
    )
    b = _graph_break(payload)
    assert b["reason"] == "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    assert b["explanation"] == ("Dynamo does not support tracing `Tensor.item()` with "
                                "config.capture_scalar_outputs=False.")
    assert (b["filename"], b["line"], b["code"]) == ("/home/u/train.py", 7, "n = x.sum().item()")
