"""The Compile view's whole contract on hand-made inputs (issue 26's mutation round on the compile
log): a trace of compile ranges and compiled code written event by event, and the structured log
records torch writes beside it (``compilation_metrics``, ``dynamo_graph_break_reason``, the
caches' hits and misses, the generated code's comments, Dynamo's output graph, Inductor's
provenance), in the shapes ``collect.compile_state`` keeps them (the recorded run in
tests/data/compile_cpu holds real ones). Every expected value is worked out by hand in the
comments, from the numbers written here."""

from __future__ import annotations

import json
from pathlib import PurePosixPath

import numpy as np
import pandas as pd
import pytest

from .conftest import needs_torch
from .synthetic import Trace

CELL = "/tmp/ipykernel_7/1111111.py"  # a notebook cell's file, named "In [3]" by the kernel
CODE_NAMES = {CELL: "In [3]"}
TRAIN = "/home/u/train.py"  # a file: short_path gives "…/u/train.py"
SIZE = "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16"
SHAPE_ADVICE = ("input shapes changed: mark the changing dimension dynamic (torch._dynamo.mark_dynamic) or "
                "compile with dynamic=True")
FRAME_COLUMNS = ["compile_id", "frame", "source", "kind", "start_us", "compile_us", "dynamo_us", "aot_autograd_us",
                 "inductor_us", "codegen_us", "compile_code_us", "autotune_us", "cache_us", "other_us",
                 "graph_breaks", "recompile_reason", "fx_graph_cache", "aot_autograd_cache", "guards"]
KERNEL_COLUMNS = ["name", "kind", "count", "total_us", "avg_us", "share", "aten_ops", "sources", "device"]
LINE_COLUMNS = ["source", "code", "kernels", "kernel_us", "count"]


def stack(filename: str, line: int, function: str, code: str) -> str:
    """One frame of a traceback as torch's logs print it (the code, then its carets)."""
    return f'  File "{filename}", line {line}, in {function}\n    {code}\n    ^^^^^^^^\n'


def metrics(frame_id: int | None, attempt: int | None, name: str, filename: str, line: int, guards: int = 0,
            reason: str = "", compile_id: bool = True) -> dict:
    mm = {"co_name": name, "co_filename": filename, "co_firstlineno": line, "guard_count": guards}
    if compile_id:
        mm["compile_id"] = f"{frame_id}/{attempt}"
    if reason:
        mm["recompile_reason"] = reason
    r = {"event": "compilation_metrics", "metrics": mm}
    if frame_id is not None:
        r.update(frame_id=frame_id, frame_compile_id=attempt, attempt=0)
    return r


def dtypes(df: pd.DataFrame) -> dict[str, str]:
    """Each column's kind: "str" for text (object or pandas' string dtype), else numpy's name."""
    return {c: ("str" if df[c].dtype == object or isinstance(df[c].dtype, pd.StringDtype) else str(df[c].dtype))
            for c in df.columns}


# ------------------------------------------------------------------ one profile with everything

BREAK = ("Graph break in user code at /home/u/train.py:23\n"
         "Graph Break Reason: Unsupported: builtin: print\n"
         "  Explanation: Dynamo does not know how to trace print\n"
         "User code traceback:\n" + stack(TRAIN, 23, "step", "print(loss)"))


def _whole_trace() -> Trace:
    """Four compile units and one run of compiled code (µs; the profile starts at 0):

    - 100-1100 frame 0/0 (``forward``): compile_inner 1000 = Dynamo 400 + compile_fx_inner 600
      (lowering 400 + code_gen 200), and a marker naming 0/0;
    - 2000-2300 the backward graph of 0/0 (``bw_compiler``: lowering 300, a marker naming 0/0);
    - 4000-4500 frame 1/0 (``step``): Dynamo 500;
    - 6000-6800 frame 0/1 (``forward`` again): entire_frame_compile 800 holding compile_inner 700
      holding a cache lookup 50: Dynamo 100 + 650, cache 50;
    - 8000: compiled code: graph 0's C++ kernel twice (30 + 10), an extern addmm (40), graph 1's
      relu kernel (20), an extern mm (8), graph 2's sum kernel (5), all under one graph call."""
    t = Trace()
    t.op("aten::empty", 0, 1)
    a = t.annotation
    a("_compile.compile_inner (dynamo_timed)", 100, 1000)
    a("CompilationMetrics_data: compile_id=0/0", 110, 1)
    a("compile_fx_inner (dynamo_timed)", 200, 600)
    a("code_gen (dynamo_timed)", 300, 200)
    a("bw_compiler (dynamo_timed)", 2000, 300)
    a("bw_data: compile_id=0/0", 2010, 1)
    a("_compile.compile_inner (dynamo_timed)", 4000, 500)
    a("x_data: compile_id=1/0", 4010, 1)
    a("entire_frame_compile", 6000, 800)
    a("_compile.compile_inner (dynamo_timed)", 6010, 700)
    a("x_data: compile_id=0/1", 6020, 1)
    a("fx_graph_cache_lookup (dynamo_timed)", 6100, 50)
    t.op("Torch-Compiled Region: 0/1", 8000, 500)
    t.op("CompiledFunction", 8005, 490)
    t.op("## Call CompiledFxGraph fabc ##", 8010, 400)
    t.op("graph_0_cpp_fused_add_gelu_mul_0", 8020, 30)
    t.op("aten::addmm", 8060, 40)
    t.op("graph_0_cpp_fused_add_gelu_mul_0", 8110, 10)
    t.op("graph_1_cpp_fused_relu_0", 8130, 20)
    t.op("aten::mm", 8160, 8)
    t.op("graph_2_cpp_fused_sum_0", 8200, 5)
    return t


def _whole_log() -> dict:
    graph0 = [  # Dynamo's output graph of frame 0/0: nodes linear and gelu at line 9, mul and add at 10
        f"# File: {CELL}:9 in forward, code: h = gelu(self.a(x))",
        'linear: "f32[8, 64][64, 1]cpu" = torch._C._nn.linear(l_x_, w, b)',
        'gelu: "f32[8, 64][64, 1]cpu" = torch.gelu(linear)',
        f"# File: {CELL}:10 in forward, code: h = h * 2 + 1",
        'mul: "f32[8, 64][64, 1]cpu" = gelu * 2',
        'add: "f32[8, 64][64, 1]cpu" = mul + 1',
    ]
    code0 = [  # graph 0's code: its C++ kernel records itself as graph_0_...; the comments name the nodes
        'torch::aot_inductor::RAIIAtenRecordFunctionHandle record_graph_0_cpp_fused_add_gelu_mul_0_('
        '"graph_0_cpp_fused_add_gelu_mul_0", nullptr);',
        "# Topologically Sorted Source Nodes: [linear], Original ATen: [aten.t, aten.addmm]",
        "extern_kernels.addmm(primals_2, primals_3, primals_1, alpha=1, beta=1, out=buf0)",
        "# Topologically Sorted Source Nodes: [gelu, mul, add], Original ATen: [aten.gelu, aten.mul, aten.add]",
        "buf1 = empty_strided_cpu((8, 64), (64, 1), torch.float32)",  # an allocation first: not the kernel
        "cpp_fused_add_gelu_mul_0(buf0, buf1)",
    ]
    # provenance of graph 0's kernel: line 10 again (the same place: once) and line 11
    prov0 = {"cpp_fused_add_gelu_mul_0:2": [stack(CELL, 10, "forward", "h = h * 2 + 1"),
                                            stack(CELL, 11, "forward", "return h + 0")]}
    # graph 1's code names its kernel by the short name only (no RECORD_FUNCTION line); its
    # source line comes from provenance alone (no output graph names the node)
    code1 = ["# Source Nodes: [relu], Original ATen: [aten.relu]", "cpp_fused_relu_0(buf0)"]
    prov1 = {"cpp_fused_relu_0:1": [stack(TRAIN, 22, "step", "y = y.relu()")]}
    records = [
        {"event": "dynamo_output_graph", "frame_id": 0, "frame_compile_id": 0, "lines": graph0},
        {"event": "inductor_output_code", "frame_id": 0, "frame_compile_id": 0, "filename": "/tmp/c0.py",
         "lines": code0},
        {"event": "inductor_provenance_tracking_kernel_stack_traces", "frame_id": 0, "frame_compile_id": 0,
         "payload": json.dumps(prov0)},
        {"event": "fx_graph_cache_miss", "frame_id": 0, "frame_compile_id": 0},
        {"event": "aotautograd_cache_hit", "frame_id": 0, "frame_compile_id": 0},
        metrics(0, 0, "forward", CELL, 8, guards=12),
        {"event": "dynamo_graph_break_reason", "frame_id": 1, "frame_compile_id": 0, "payload": BREAK},
        {"event": "inductor_output_code", "frame_id": 1, "frame_compile_id": 0, "filename": "/tmp/c1.py",
         "lines": code1},
        {"event": "inductor_provenance_tracking_kernel_stack_traces", "frame_id": 1, "frame_compile_id": 0,
         "payload": json.dumps(prov1)},
        metrics(1, 0, "step", TRAIN, 20, guards=3),
        {"event": "fx_graph_cache_hit", "frame_id": 0, "frame_compile_id": 1},
        metrics(0, 1, "forward", CELL, 8, guards=14, reason=SIZE),
    ]
    return {"records": records, "counters": {"graph_break": {"print": 1}}}


def _whole(tmp_path):
    from nbprof.analysis.compilation import compilation

    return compilation(_whole_trace().load(tmp_path).events, _whole_log(), dict(CODE_NAMES))


def test_the_compilations_of_a_profile_with_its_log(tmp_path):
    whole = _whole(tmp_path)
    f = whole.frames
    assert list(f.columns) == FRAME_COLUMNS
    assert f.values.tolist() == [
        # the three frame units joined in order with the three metrics records
        ["0/0", "forward", "In [3] line 8", "frame", 100.0, 1000.0, 400.0, 0.0, 400.0, 200.0, 0.0, 0.0, 0.0, 0.0,
         0, "", "miss", "hit", 12],
        # the backward graph: 0/0 by its marker, named after the frame whose graph it is; its caches are 0/0's
        ["0/0", "forward", "In [3] line 8", "backward", 2000.0, 300.0, 0.0, 0.0, 300.0, 0.0, 0.0, 0.0, 0.0, 0.0,
         0, "", "miss", "hit", 0],
        ["1/0", "step", "…/u/train.py:20", "frame", 4000.0, 500.0, 500.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
         1, "", "", "", 3],
        ["0/1", "forward", "In [3] line 8", "recompile", 6000.0, 800.0, 750.0, 0.0, 0.0, 0.0, 0.0, 0.0, 50.0, 0.0,
         0, SIZE, "hit", "", 14],
    ]
    assert dtypes(f) == {**{c: "str" for c in FRAME_COLUMNS}, **{c: "float64" for c in FRAME_COLUMNS[4:14]},
                         "graph_breaks": "int64", "guards": "int64"}
    assert whole.compile_us == 2600.0


def test_the_graph_breaks_and_recompiles_of_a_profile_with_its_log(tmp_path):
    whole = _whole(tmp_path)
    b = whole.graph_breaks
    assert list(b.columns) == ["compile_id", "frame", "source", "code", "reason", "explanation", "detail"]
    assert b.values.tolist() == [["1/0", "step", "…/u/train.py:23", "print(loss)", "Unsupported: builtin: print",
                                  "Dynamo does not know how to trace print",
                                  "Unsupported: builtin: print\n  Explanation: Dynamo does not know how to trace print"]]
    r = whole.recompiles
    assert list(r.columns) == ["compile_id", "frame", "source", "reason", "advice"]
    assert r.values.tolist() == [["0/1", "forward", "In [3] line 8", SIZE, SHAPE_ADVICE]]


def test_the_compiled_functions_and_phases_of_a_profile_with_its_log(tmp_path):
    whole = _whole(tmp_path)
    p = whole.per_frame
    assert list(p.columns) == ["frame", "source", "compiles", "recompiles", "graph_breaks", "compile_us"]
    # forward: 0/0 (1000, and its backward graph 300) and 0/1 (800)
    assert p.values.tolist() == [["forward", "In [3] line 8", 2, 1, 0, 2100.0], ["step", "…/u/train.py:20", 1, 0, 1, 500.0]]
    assert dtypes(p) == {"frame": "str", "source": "str", "compiles": "int64", "recompiles": "int64",
                         "graph_breaks": "int64", "compile_us": "float64"}
    ph = whole.phases
    assert list(ph.columns) == ["phase", "compile_us", "share"]
    # Dynamo 400 + 500 + 750, lowering 400 + 300, codegen 200, cache 50: 2600 in all; the empty phases left out
    assert ph.values.tolist() == [["Dynamo tracing", 1650.0, 1650 / 2600], ["Inductor lowering", 700.0, 700 / 2600],
                                  ["Inductor codegen", 200.0, 200 / 2600], ["Cache lookup", 50.0, 50 / 2600]]
    assert ph.index.tolist() == [0, 1, 2, 3]
    assert whole.counters == {"graph_break": {"print": 1}}
    assert whole.notes == [] and whole.has_log and whole.has_compiled_calls and not whole.empty


def test_the_kernels_of_a_profile_with_its_log(tmp_path):
    whole = _whole(tmp_path)
    k = whole.kernels
    assert list(k.columns) == KERNEL_COLUMNS
    total = 30 + 10 + 40 + 20 + 8 + 5
    assert k.values.tolist() == [
        # ops from the code's comment; lines 9, 10 from the output graph's nodes, 11 from provenance
        ["graph_0_cpp_fused_add_gelu_mul_0", "cpp", 2, 40.0, 20.0, 40 / total, "aten.gelu, aten.mul, aten.add",
         "In [3] line 9; In [3] line 10; In [3] line 11", "cpu"],
        # an extern call: its op by its name; its line from the node the comment names (a tie: after the kernel)
        ["aten::addmm", "extern", 1, 40.0, 40.0, 40 / total, "aten.addmm", "In [3] line 9", "cpu"],
        # the code and the provenance name it cpp_fused_relu_0, the trace graph_1_cpp_fused_relu_0
        ["graph_1_cpp_fused_relu_0", "cpp", 1, 20.0, 20.0, 20 / total, "aten.relu", "…/u/train.py:22", "cpu"],
        ["aten::mm", "extern", 1, 8.0, 8.0, 8 / total, "aten.mm", "", "cpu"],  # nothing in the log
        ["graph_2_cpp_fused_sum_0", "cpp", 1, 5.0, 5.0, 5 / total, "aten.sum", "", "cpu"],  # ops from its name
    ]
    assert dtypes(k) == {**{c: "str" for c in KERNEL_COLUMNS}, "count": "int64", "total_us": "float64",
                         "avg_us": "float64", "share": "float64"}


def test_the_source_lines_of_a_profile_with_its_log(tmp_path):
    whole = _whole(tmp_path)
    lines = whole.lines
    assert list(lines.columns) == LINE_COLUMNS
    assert lines.values.tolist() == [
        # graph 0's kernel: 40 split over its 3 lines (2 runs each); addmm's 40 on line 9 too
        ["In [3] line 9", "h = gelu(self.a(x))", "graph_0_cpp_fused_add_gelu_mul_0, aten::addmm", 40 / 3 + 40, 3],
        ["…/u/train.py:22", "y = y.relu()", "graph_1_cpp_fused_relu_0", 20.0, 1],
        ["In [3] line 10", "h = h * 2 + 1", "graph_0_cpp_fused_add_gelu_mul_0", 40 / 3, 2],
        ["In [3] line 11", "return h + 0", "graph_0_cpp_fused_add_gelu_mul_0", 40 / 3, 2],
        ["(no source line known)", "", "graph_2_cpp_fused_sum_0, aten::mm", 13.0, 2],
    ]
    assert dtypes(lines) == {"source": "str", "code": "str", "kernels": "str", "kernel_us": "float64",
                             "count": "int64"}


# ------------------------------------------------------------------------ a graph break's payload

TORCH_24 = ("Unsupported: call_function BuiltinVariable(print) [ConstantVariable()] {}\n\n"
            "User code traceback:\n" + stack(TRAIN, 30, "main", "step(x)") + stack(TRAIN, 23, "step", "print(loss)")
            + "Traceback (most recent call last):\n" + stack("/torch/_dynamo/symbolic_convert.py", 5, "f", "foo()"))
ENCOUNTERED = ("Graph break in user code at /home/u/train.py:23\n"
               "Graph Break Reason: Encountered graph break when attempting to trace CALL: a function call\n\n"
               "Data-dependent branching\n"
               "  Explanation: Detected data-dependent branching: the condition is a tensor\n"
               "  Explanation: a second one is not read\n"
               "  Hint: use torch.cond\n\n"
               "User code traceback:\n" + stack(TRAIN, 23, "step", "if loss > 0:")
               + stack("/home/u/lib/helper.py", 5, "check", "return bool(x)"))


@pytest.mark.parametrize("payload,expected", [
    # torch 2.4: no "Graph Break Reason:" header, no "at file:line" line: the innermost frame of
    # the user's traceback (Dynamo's own traceback after it left out) is where it broke
    (TORCH_24, (TRAIN, 23, "print(loss)", "Unsupported: call_function BuiltinVariable(print) [ConstantVariable()] {}",
                "", "Unsupported: call_function BuiltinVariable(print) [ConstantVariable()] {}")),
    # the title after torch's "Encountered graph break ..." line; the first explanation only (its
    # own colons kept); the place the header names, whose code the traceback's innermost frame (another
    # file) does not give
    (ENCOUNTERED, (TRAIN, 23, "", "Data-dependent branching",
                   "Detected data-dependent branching: the condition is a tensor",
                   "Encountered graph break when attempting to trace CALL: a function call\n\n"
                   "Data-dependent branching\n"
                   "  Explanation: Detected data-dependent branching: the condition is a tensor\n"
                   "  Explanation: a second one is not read\n"
                   "  Hint: use torch.cond")),
    # the header's place and the traceback's innermost frame agree: its code is the line's
    ("Graph break at /home/u/train.py:23\nGraph Break Reason: print\nUser code traceback:\n"
     + stack(TRAIN, 23, "step", "print(loss)"), (TRAIN, 23, "print(loss)", "print", "", "print")),
    # the same file, another line: the header's line, no code
    ("Graph break in user code at /home/u/train.py:23\nGraph Break Reason: print\nUser code traceback:\n"
     + stack(TRAIN, 25, "step", "print(loss)"), (TRAIN, 23, "", "print", "", "print")),
    # a lone "Encountered ..." line is the title itself
    ("Graph Break Reason: Encountered graph break\n", ("", None, "", "Encountered graph break", "",
                                                       "Encountered graph break")),
    ("", ("", None, "", "", "", "")),
    ("Graph Break Reason: Encountered graph break when tracing\nthe real title\n",
     ("", None, "", "the real title", "", "Encountered graph break when tracing\nthe real title")),
    # the first "Graph Break Reason:" and the first "User code traceback:" start their parts, the first
    # "Traceback (most recent call last)" (Dynamo's, chained) ends the user's; an explanation without a space
    ("Graph break in user code at /home/u/train.py:23\nGraph Break Reason: outer\n  Explanation:no space\n"
     "Graph Break Reason: inner\nUser code traceback:\n" + stack(TRAIN, 23, "step", "print(loss)")
     + "User code traceback:\n  (the same)\nTraceback (most recent call last):\n" + stack("/torch/a.py", 1, "f", "a()")
     + "Traceback (most recent call last):\n" + stack("/torch/b.py", 2, "g", "b()"),
     (TRAIN, 23, "print(loss)", "outer", "no space", "outer\n  Explanation:no space\nGraph Break Reason: inner")),
    # the innermost frame is the second traceback's (another line: no code)
    ("Graph break in user code at /home/u/train.py:23\nGraph Break Reason: r\nUser code traceback:\n"
     + stack(TRAIN, 23, "step", "print(loss)") + "User code traceback:\n" + stack(TRAIN, 40, "other", "x()"),
     (TRAIN, 23, "", "r", "", "r")),
    # a file line in the reason is not the user's traceback (which names no frame here)
    ("Graph Break Reason: r\n" + stack("/torch/x.py", 3, "h", "h()") + "User code traceback:\n  (none)\n",
     ("", None, "", "r", "", 'r\n  File "/torch/x.py", line 3, in h\n    h()\n    ^^^^^^^^')),
])
def test_a_graph_break_payloads_place_title_explanation_and_detail(payload, expected):
    from nbprof.analysis.compilation import _graph_break

    b = _graph_break(payload)
    assert list(b) == ["filename", "line", "code", "reason", "explanation", "detail"]
    assert tuple(b.values()) == expected


# ------------------------------------------------------------------ what the watch keeps of a record


def test_the_records_the_watch_keeps_of_each_shape():
    """``_compact`` (what the cell's logging handler keeps of ``trace_structured``'s metadata and
    payload), each shape written out as torch sends it."""
    from nbprof.collect.compile_state import KEPT_METRICS, _compact

    strings: dict[int, str] = {}
    ctx = {"frame_id": 2, "frame_compile_id": 1, "attempt": 0, "compiled_autograd_id": None, "other": 5}
    keep = {"frame_id": 2, "frame_compile_id": 1, "attempt": 0}  # the context, None and the rest left out
    assert _compact(None, "x", strings) is None and _compact(["str"], None, strings) is None
    # an interned file name: remembered, nothing kept
    assert _compact({"str": ["/home/u/train.py", 7]}, None, strings) is None
    assert strings == {7: "/home/u/train.py"}
    stack_ = [{"line": 3, "name": "step", "filename": 7}]
    assert _compact({**ctx, "dynamo_start": {"stack": stack_}}, None, strings) == {
        "event": "dynamo_start", **keep, "stack": stack_}
    assert _compact({"dynamo_start": {}}, None, strings) == {"event": "dynamo_start", "stack": []}
    m = {"compile_id": "2/1", "co_name": "step", "co_filename": TRAIN, "co_firstlineno": 20, "guard_count": 4,
         "restart_reasons": {"b", "a"}, "fail_reason": None, "not_kept": 1, "start_time": 1.5,
         "num_graph_breaks": (1, "x"), "frame_key": PurePosixPath("/k")}  # any other object as its text
    assert _compact({**ctx, "compilation_metrics": m}, None, strings) == {
        "event": "compilation_metrics", **keep,
        "metrics": {"compile_id": "2/1", "co_name": "step", "co_filename": TRAIN, "co_firstlineno": 20,
                    "guard_count": 4, "restart_reasons": ["a", "b"], "start_time": 1.5, "num_graph_breaks": [1, "x"],
                    "frame_key": "/k"}}
    assert "not_kept" not in KEPT_METRICS and "fail_reason" in KEPT_METRICS
    assert _compact({"compilation_metrics": None}, None, strings) == {"event": "compilation_metrics", "metrics": {}}
    for name in ("dynamo_graph_break_reason", "recompile_reasons", "inductor_provenance_tracking_kernel_stack_traces"):
        assert _compact({**ctx, "artifact": {"name": name, "encoding": "string"}}, "text", strings) == {
            "event": name, **keep, "payload": "text"}
        assert _compact({"artifact": {"name": name}}, b"bytes", strings) == {"event": name, "payload": None}
    for name in ("fx_graph_cache_hit", "fx_graph_cache_miss", "fx_graph_cache_bypass", "aotautograd_cache_hit",
                 "aotautograd_cache_miss", "aotautograd_cache_bypass"):  # the name only: the payload is a pickle
        assert _compact({**ctx, "artifact": {"name": name}}, "a big payload", strings) == {"event": name, **keep}
    assert _compact({"artifact": {"name": "fx_graph_runnable"}}, "x", strings) is None
    assert _compact({"artifact": None}, "x", strings) is None
    code = ("import torch\n"
            "# Source Nodes: [a line that names no ATen ops]\n"  # not a kernel's comment: left out
            "helper(x)\n"
            "cpp_fused_relu_0 = async_compile.cpp_pybinding(['float*'], '''\n"
            '    RECORD_FUNCTION("graph_3_cpp_fused_relu_0", c10::ArrayRef<c10::IValue>({}));\n'
            "''')\n"
            "    # Source Nodes: [relu], Original ATen: [aten.relu]\n"
            "    buf0 = empty_strided_cpu((4, ), (1, ), torch.float32)\n"
            "    cpp_fused_relu_0(arg0_1, buf0)\n"
            "    del arg0_1\n"
            "    return (buf0, )\n")
    assert _compact({**ctx, "inductor_output_code": {"filename": "/tmp/c.py"}}, code, strings) == {
        "event": "inductor_output_code", **keep, "filename": "/tmp/c.py",
        "lines": ['RECORD_FUNCTION("graph_3_cpp_fused_relu_0", c10::ArrayRef<c10::IValue>({}));',
                  "# Source Nodes: [relu], Original ATen: [aten.relu]",
                  "buf0 = empty_strided_cpu((4, ), (1, ), torch.float32)", "cpp_fused_relu_0(arg0_1, buf0)",
                  "del arg0_1"]}
    assert _compact({"inductor_output_code": None}, None, strings) == {"event": "inductor_output_code",
                                                                       "filename": "", "lines": []}
    graph = ("class GraphModule(torch.nn.Module):\n"
             "    def forward(self, L_x_):\n"
             f"        # File: {TRAIN}:21 in step, code: y = torch.relu(x)\n"
             "        y = torch.relu(l_x_);  l_x_ = None\n"
             "        return (y,)\n"
             f"        # File: {TRAIN}:22 in step, code: end")  # the last line: nothing after it
    assert _compact({**ctx, "dynamo_output_graph": {"sizes": {}}}, graph, strings) == {
        "event": "dynamo_output_graph", **keep,
        "lines": [f"# File: {TRAIN}:21 in step, code: y = torch.relu(x)", "y = torch.relu(l_x_);  l_x_ = None",
                  f"# File: {TRAIN}:22 in step, code: end"]}
    assert _compact({"dynamo_output_graph": {}}, 42, strings) == {"event": "dynamo_output_graph", "lines": []}
    assert _compact({"optimize_ddp_split_graph": {}}, "x", strings) is None


def test_a_resume_functions_metrics_keep_the_line_it_resumes_at():
    """A graph break's resume function ``torch_dynamo_resume_in_<fn>_at_<line>``: its metrics keep
    that line of the source (this file's own line 1, read here with open())."""
    from nbprof.collect.compile_state import _compact

    with open(__file__) as f:
        first = f.readline().strip()
    m = {"co_name": "torch_dynamo_resume_in_step_at_1", "co_filename": __file__}
    assert _compact({"compilation_metrics": m}, None, {})["metrics"] == {**m, "resume_code": first}
    m = {"co_name": "torch_dynamo_resume_in_step", "co_filename": __file__}  # not a resume function's name
    assert _compact({"compilation_metrics": m}, None, {})["metrics"] == m


def test_the_watchs_handler_keeps_records_and_leaves_out_what_it_cannot_read():
    import logging

    from nbprof.collect.compile_state import _Records

    h = _Records()
    assert h.level == logging.DEBUG and h.records == [] and h.strings == {}

    def record(**attrs):
        r = logging.LogRecord("torch.__trace", logging.DEBUG, __file__, 1, "", None, None)
        r.__dict__.update(attrs)
        return r

    h.emit(record(metadata={"str": ["/home/u/a.py", 1]}))
    h.emit(record(metadata={"str": "not a pair"}))  # raises inside: left out, never raised
    h.emit(record())  # no metadata at all
    h.emit(record(metadata={"artifact": {"name": "recompile_reasons"}, "frame_id": 0}, payload="why"))
    h.emit(record(metadata={"artifact": {"name": "fx_graph_cache_hit"}}))
    assert h.strings == {1: "/home/u/a.py"}
    assert h.records == [{"event": "recompile_reasons", "frame_id": 0, "payload": "why"},
                         {"event": "fx_graph_cache_hit"}]


def test_a_compile_logs_files_are_every_file_its_records_name():
    from nbprof.collect.compile_state import log_files

    log = {"records": [
        {"event": "compilation_metrics", "metrics": {"co_filename": "/home/u/a.py"}},
        {"event": "compilation_metrics", "metrics": {"co_filename": ""}},
        {"event": "dynamo_graph_break_reason",
         "payload": "Graph break in user code at /home/u/b.py:3\n" + stack("/home/u/c.py", 4, "f", "x")},
        {"event": "dynamo_output_graph", "lines": ["# File: /home/u/d.py:5 in forward, code: y = x", "y = x"]},
        {"event": "inductor_output_code", "lines": [stack("/home/u/e.py", 6, "g", "z")], "payload": None},
        {"event": "fx_graph_cache_hit"},
    ]}
    assert log_files(log) == {f"/home/u/{x}.py" for x in "abcde"}
    assert log_files({"records": []}) == set() and log_files({}) == set() and log_files(None) == set()


# ---------------------------------------------------- compilations joined with the log by compile id


def _frames_trace(markers: list[str | None]) -> Trace:
    """One frame compilation per marker (a compile id, or None: no marker), 1000 µs apart, each
    ``100 * (i + 1)`` µs long (all Dynamo)."""
    t = Trace()
    t.op("aten::empty", 0, 1)
    for i, marker in enumerate(markers):
        start = 1000 * (i + 1)
        t.annotation("_compile.compile_inner (dynamo_timed)", start, 100 * (i + 1))
        if marker:
            t.annotation(f"CompilationMetrics_data: compile_id={marker}", start + 1, 1)
    return t


def test_compilations_are_joined_with_their_metrics_by_compile_id_when_the_counts_differ(tmp_path):
    """Three frame units in the trace (0/0, 1/0 and one without a marker) and two metrics records
    in another order, 1/0's naming its id only in the record's context, 0/0's only in its metrics:
    each unit gets its own metrics by compile id, the unmarked one none."""
    from nbprof.analysis.compilation import compilation

    events = _frames_trace(["0/0", "1/0", None]).load(tmp_path).events
    forward = metrics(0, 0, "forward", CELL, 8, guards=12)
    for k in ("frame_id", "frame_compile_id", "attempt"):  # its id in its metrics only
        del forward[k]
    log = {"records": [metrics(1, 0, "step", TRAIN, 20, guards=3, compile_id=False), forward]}
    c = compilation(events, log, dict(CODE_NAMES))
    assert c.frames[["compile_id", "frame", "source", "kind", "start_us", "compile_us", "dynamo_us", "guards",
                     "graph_breaks"]].values.tolist() == [
        ["0/0", "forward", "In [3] line 8", "frame", 1000.0, 100.0, 100.0, 12, 0],
        ["1/0", "step", "…/u/train.py:20", "frame", 2000.0, 200.0, 200.0, 3, 0],
        ["", "", "", "frame", 3000.0, 300.0, 300.0, 0, 0],
    ]
    assert str(c.frames["graph_breaks"].dtype) == "int64" and len(c.graph_breaks) == 0
    # per function, in the log's order
    assert c.per_frame.values.tolist() == [["step", "…/u/train.py:20", 1, 0, 0, 200.0],
                                           ["forward", "In [3] line 8", 1, 0, 0, 100.0]]
    assert c.notes == [] and c.has_log and not c.has_compiled_calls


def test_a_compilations_kind_is_a_recompile_by_its_attempt_or_its_reason(tmp_path):
    """By order (as many frame units as records): 0/0 a frame, 0/1 and 0/12 recompiles by their
    compile id's attempt (> 0, even with no reason), 1/0 and 10/0 with a reason recompiles too;
    11/0 a frame. 1/0's record has no context (its id in its metrics only) and an empty line;
    10/0 and 11/0 name no file."""
    from nbprof.analysis.compilation import compilation

    t = _frames_trace([None] * 6)
    # a compile unit that is neither a frame's nor a backward graph's (its marker names 0/0): "other",
    # not named after 0/0's frame as a backward graph is
    t.annotation("autotune_select_algorithm (dynamo_timed)", 9000, 50)
    t.annotation("x_data: compile_id=0/0", 9001, 1)
    events = t.load(tmp_path).events
    g = metrics(1, 0, "g", TRAIN, 5, reason="x == 1")
    for k in ("frame_id", "frame_compile_id", "attempt"):
        del g[k]
    g["metrics"]["co_firstlineno"] = ""
    h = metrics(10, 0, "h", TRAIN, 9, reason="DTYPE mismatch")
    i = metrics(11, 0, "i", TRAIN, 9)
    for r in (h, i):  # no file: no source
        del r["metrics"]["co_filename"]
    log = {"records": [metrics(0, 0, "f", TRAIN, 1), metrics(0, 1, "f", TRAIN, 1, reason="x == 2"),
                       {"event": "dynamo_graph_break_reason", "frame_id": 0, "frame_compile_id": 1, "payload": BREAK},
                       metrics(0, 12, "f", TRAIN, 1), g, h, i,
                       {"event": "dynamo_graph_break_reason", "frame_id": 7, "frame_compile_id": 0}]}
    c = compilation(events, log)
    assert c.frames[["compile_id", "frame", "source", "kind", "recompile_reason", "graph_breaks"]].values.tolist() == [
        ["0/0", "f", "…/u/train.py:1", "frame", "", 0], ["0/1", "f", "…/u/train.py:1", "recompile", "x == 2", 1],
        ["0/12", "f", "…/u/train.py:1", "recompile", "", 0], ["1/0", "g", "…/u/train.py", "recompile", "x == 1", 0],
        ["10/0", "h", "", "recompile", "DTYPE mismatch", 0], ["11/0", "i", "", "frame", "", 0],
        ["0/0", "", "", "other", "", 0]]
    # a break record without a payload: a break of a frame not in the profile, nothing known of it
    assert c.graph_breaks[["compile_id", "frame", "source", "reason", "detail"]].values.tolist() == [
        ["0/1", "f", "…/u/train.py:23", "Unsupported: builtin: print",
         "Unsupported: builtin: print\n  Explanation: Dynamo does not know how to trace print"],
        ["7/0", "", "", "", ""]]
    # only a recorded reason makes a recompiles row
    assert c.recompiles.values.tolist() == [
        ["0/1", "f", "…/u/train.py:1", "x == 2", VALUE],
        ["1/0", "g", "…/u/train.py", "x == 1",
         "a Python value the code reads changed (each value compiles once: pass it as a tensor)"],
        ["10/0", "h", "", "DTYPE mismatch", "an input's dtype changed"]]
    # f: 100 + 200 + 300, and the 50 of the other unit of 0/0; its recompile and its break counted
    # although its last compilation had neither; h and i: two functions, both without a file
    assert c.per_frame.values.tolist() == [["f", "…/u/train.py:1", 3, 1, 1, 650.0],
                                           ["g", "…/u/train.py", 1, 1, 0, 400.0],
                                           ["h", "", 1, 1, 0, 500.0], ["i", "", 1, 0, 0, 600.0]]


def test_the_compile_mask_given_is_the_one_used(tmp_path):
    """``compilation(..., mask=)``: the caller's compile ranges (here only the second unit's)."""
    from nbprof.analysis.compilation import compilation, compile_range_mask

    events = _frames_trace(["0/0", "1/0"]).load(tmp_path).events
    mask = compile_range_mask(events)
    mask[:3] = False  # the first unit's range and marker (rows 1, 2) left out
    c = compilation(events, None, mask=mask)
    assert c.frames[["compile_id", "start_us", "compile_us"]].values.tolist() == [["1/0", 2000.0, 200.0]]
    assert compilation(events, None).frames["compile_id"].tolist() == ["0/0", "1/0"]


def test_graph_breaks_and_frames_without_compile_ids(tmp_path):
    """A log that names no compile id anywhere (no record context, no ``compile_id`` metric): the
    graph break belongs to the frame whose metrics have none either ("" for both)."""
    from nbprof.analysis.compilation import compilation

    events = _frames_trace([None]).load(tmp_path).events
    log = {"records": [metrics(None, None, "forward", TRAIN, 20, compile_id=False),
                       {"event": "dynamo_graph_break_reason", "payload": BREAK}]}
    c = compilation(events, log)
    assert c.graph_breaks.values.tolist() == [
        ["", "forward", "…/u/train.py:23", "print(loss)", "Unsupported: builtin: print",
         "Dynamo does not know how to trace print",
         "Unsupported: builtin: print\n  Explanation: Dynamo does not know how to trace print"]]
    assert c.frames[["compile_id", "frame", "graph_breaks"]].values.tolist() == [["", "forward", 1]]
    assert c.per_frame.values.tolist() == [["forward", "…/u/train.py:20", 1, 0, 1, 100.0]]


def test_graph_breaks_from_restart_reasons_of_each_frame_at_its_resume_functions_line(tmp_path):
    """torch 2.4 logs no graph-break artifact: each restart reason of a frame is a break, at the
    line of the next resume function compiled for it (``torch_dynamo_resume_in_<fn>_at_<line>``,
    its code as the watch read it); blank reasons are none; a break with no resume function left
    has no line."""
    from nbprof.analysis.compilation import compilation

    def frame(fid: int, name: str, filename: str, line: int, reasons: list[str], resume_code: str = "") -> dict:
        r = metrics(fid, 0, name, filename, line)
        r["metrics"]["restart_reasons"] = reasons
        if resume_code:
            r["metrics"]["resume_code"] = resume_code
        return r

    log = {"records": [
        frame(0, "forward", TRAIN, 20, ["Unsupported: builtin: print\n  at line 23", "   ", " Unsupported: Tensor.item "]),
        frame(1, "torch_dynamo_resume_in_forward_at_23", TRAIN, 23, [], "print(loss)"),
        frame(2, "torch_dynamo_resume_in_forward_at_25", TRAIN, 25, ["Unsupported: data-dependent"], "n = x.item()"),
        frame(3, "other", "/home/u/other.py", 5, ["x"]),
        frame(4, "torch_dynamo_resume_in_forward_at_40", "/home/u/other.py", 40, [], "y()"),  # another file's
    ]}
    events = _frames_trace([None] * 5).load(tmp_path).events
    c = compilation(events, log)
    resumed = "torch_dynamo_resume_in_forward_at_25 (after the graph break in forward at line 25)"
    assert c.graph_breaks.values.tolist() == [
        ["0/0", "forward", "…/u/train.py:23", "print(loss)", "Unsupported: builtin: print", "",
         "Unsupported: builtin: print\n  at line 23"],
        ["0/0", "forward", "…/u/train.py:25", "n = x.item()", "Unsupported: Tensor.item", "", "Unsupported: Tensor.item"],
        ["2/0", resumed, "", "", "Unsupported: data-dependent", "", "Unsupported: data-dependent"],
        ["3/0", "other", "", "", "x", "", "x"],
    ]
    assert c.frames[["compile_id", "frame", "graph_breaks"]].values.tolist() == [
        ["0/0", "forward", 2], ["1/0", "torch_dynamo_resume_in_forward_at_23 (after the graph break in forward at line 23)", 0],
        ["2/0", resumed, 1], ["3/0", "other", 1],
        ["4/0", "torch_dynamo_resume_in_forward_at_40 (after the graph break in forward at line 40)", 0]]
    assert c.per_frame["graph_breaks"].tolist() == [2, 0, 1, 1, 0]


def test_a_profile_without_compilation_has_empty_tables_with_their_columns(tmp_path):
    from nbprof.analysis.compilation import compilation

    t = Trace()
    t.op("aten::mm", 0, 10)
    c = compilation(t.load(tmp_path).events, None)
    assert list(c.frames.columns) == FRAME_COLUMNS and len(c.frames) == 0
    assert list(c.graph_breaks.columns) == ["compile_id", "frame", "source", "code", "reason", "explanation", "detail"]
    assert list(c.recompiles.columns) == ["compile_id", "frame", "source", "reason", "advice"]
    assert list(c.per_frame.columns) == ["frame", "source", "compiles", "recompiles", "graph_breaks", "compile_us"]
    assert list(c.phases.columns) == ["phase", "compile_us", "share"]
    assert list(c.kernels.columns) == KERNEL_COLUMNS and list(c.lines.columns) == LINE_COLUMNS
    assert 0 == len(c.graph_breaks) == len(c.recompiles) == len(c.per_frame) == len(c.phases) == len(c.kernels)
    assert c.notes == [] and c.counters == {} and not c.has_log and not c.has_compiled_calls
    assert c.empty and c.compile_us == 0.0
    assert repr(c) == "<Compilation 0 compilations (0.00 s), 0 graph breaks, 0 recompiles, 0 kernels>"


LOG_NOTE = ("graph breaks, recompiles and the source lines of kernels come from torch's structured log, which a "
            "live %%torchprof keeps; this profile has only the trace's compile ranges")
CALLS_NOTE = ("the compiled code ran as one range per graph (## Call CompiledFxGraph ##): it was compiled before "
              "this profile, without Inductor's kernel profiling. Compile it inside a %%torchprof cell (after "
              "torch._dynamo.reset()) to see each fused C++ kernel and its time")


def test_what_a_profile_without_the_log_or_kernel_profiling_cannot_say(tmp_path):
    """A loaded trace (no log) with a compilation, and compiled code that ran as one opaque range
    per graph (a C++ kernel's own range missing; ``aten::empty`` under it is no extern call, a
    ``aten::mm`` under a ``Torch-Compiled Region`` neither)."""
    from nbprof.analysis.compilation import compilation

    t = _frames_trace([None])
    t.op("Torch-Compiled Region: 0/0", 5000, 300)
    t.op("aten::mm", 5005, 10)
    t.op("## Call CompiledFxGraph fx0 ##", 5020, 200)
    t.op("run_graph_helper", 5030, 20)  # neither a kernel nor an ATen op
    events = t.load(tmp_path).events
    c = compilation(events, None)
    assert c.notes == [LOG_NOTE, CALLS_NOTE]
    assert c.has_compiled_calls and not c.has_log and not c.empty and len(c.kernels) == 0
    assert list(c.kernels.columns) == KERNEL_COLUMNS and list(c.lines.columns) == LINE_COLUMNS
    # with the log: the first note goes; without the compilation itself, too
    assert compilation(events, {"records": []}).notes == [CALLS_NOTE]
    u = Trace()
    u.op("Torch-Compiled Region: 0/0", 0, 100)
    c = compilation(u.load(tmp_path, "calls.json").events, None)
    assert c.notes == [CALLS_NOTE] and c.has_compiled_calls and not c.empty and len(c.frames) == 0


def test_triton_kernels_and_device_extern_calls_with_the_log(tmp_path):
    """A compiled step on a GPU: Triton kernels are device work (their CPU launch op of the same
    name is not counted), the wrapper calls them as ``<kernel>.run(...)``, whose comments give the
    ATen ops and the FX nodes (lines from Dynamo's output graph); an extern matmul counts the device
    time of the kernel it launched (device "cuda"), an extern call without device work its CPU time."""
    from nbprof.analysis.compilation import compilation

    t = Trace()
    t.op("Torch-Compiled Region: 0/0", 0, 300)
    t.op("## Call CompiledFxGraph fx1 ##", 10, 280)
    mm = t.op("aten::mm", 20, 30)
    t.launch("sm90_xmma_gemm_f32f32_tn", mm, cpu_ts=25, cpu_dur=5, gpu_ts=40, gpu_dur=50)
    t.op("triton_poi_fused_add_0", 58, 8)  # the launch on the CPU
    t.launch("triton_poi_fused_add_0", 0, cpu_ts=60, cpu_dur=5, gpu_ts=95, gpu_dur=10)
    t.launch("triton_red_fused_sum_1", 0, cpu_ts=70, cpu_dur=5, gpu_ts=110, gpu_dur=20)
    t.op("aten::add", 80, 4)
    graph = [f"# File: {CELL}:12 in forward, code: y = x + 1", 'add: "f32[16]" = x + 1',
             f"# File: {CELL}:13 in forward, code: s = y.sum()", 'sum_1: "f32[]" = add.sum()']
    code = ["# Topologically Sorted Source Nodes: [add], Original ATen: [aten.add, aten.view]",
            "stream0 = get_raw_stream(0)",
            "triton_poi_fused_add_0.run(buf0, 16, stream=stream0)",
            "# Source Nodes: [sum_1], Original ATen: [aten.sum]",
            "triton_red_fused_sum_1.run(buf0, buf1, 1, 16, stream=stream0)"]
    prov = {"extern_kernels.mm:0": [stack(CELL, 11, "forward", "z = a @ b")]}
    log = {"records": [{"event": "dynamo_output_graph", "lines": graph},
                       {"event": "inductor_output_code", "lines": code},
                       {"event": "inductor_provenance_tracking_kernel_stack_traces", "payload": json.dumps(prov)}]}
    c = compilation(t.load(tmp_path).events, log, dict(CODE_NAMES))
    total = 50 + 20 + 10 + 4
    assert c.kernels.values.tolist() == [
        ["aten::mm", "extern", 1, 50.0, 50.0, 50 / total, "aten.mm", "In [3] line 11", "cuda"],
        ["triton_red_fused_sum_1", "triton", 1, 20.0, 20.0, 20 / total, "aten.sum", "In [3] line 13", "cuda:0"],
        ["triton_poi_fused_add_0", "triton", 1, 10.0, 10.0, 10 / total, "aten.add, aten.view", "In [3] line 12",
         "cuda:0"],
        ["aten::add", "extern", 1, 4.0, 4.0, 4 / total, "aten.add", "", "cpu"],
    ]
    assert c.lines.values.tolist() == [
        ["In [3] line 11", "z = a @ b", "aten::mm", 50.0, 1],
        ["In [3] line 13", "s = y.sum()", "triton_red_fused_sum_1", 20.0, 1],
        ["In [3] line 12", "y = x + 1", "triton_poi_fused_add_0", 10.0, 1],
        ["(no source line known)", "", "aten::add", 4.0, 1],
    ]


# ------------------------------------------------------------------------------- small pieces

SHAPES, DTYPE, DEVICE = SHAPE_ADVICE, "an input's dtype changed", "an input's device changed"
GRAD = "grad mode or requires_grad changed (e.g. train vs no_grad): compile each mode once"
OBJECT = "an object the code reads is a different one (a new module or function each call)"
VALUE = "a Python value the code reads changed (each value compiles once: pass it as a tensor)"
LIMIT = "the recompile limit was hit: Dynamo falls back to eager for this frame"


@pytest.mark.parametrize("reason,advice", [
    # each guard's words alone, in capitals (the reason is read case-insensitively)
    ("SIZE MISMATCH", SHAPES), ("STRIDE MISMATCH", SHAPES), ("SHAPE", SHAPES), ("size", ""), ("stride", ""),
    ("DTYPE", DTYPE), ("DEVICE", DEVICE), ("REQUIRES_GRAD", GRAD), ("GRAD_MODE", GRAD), ("GRAD MODE", GRAD),
    ("ID_MATCH", OBJECT), ("___CHECK_OBJ_ID", OBJECT), ("IDENTITY", OBJECT), ("==", VALUE), ("!=", VALUE),
    ("EQUALS_MATCH", VALUE), ("CONSTANT_MATCH", VALUE), ("CACHE_SIZE_LIMIT", LIMIT), ("RECOMPILE_LIMIT", LIMIT),
    ("", ""), ("= <", ""),
    # the first that applies, in this order
    ("shape dtype device requires_grad id_match == cache_size_limit", SHAPES),
    ("dtype device requires_grad id_match == cache_size_limit", DTYPE),
    ("device requires_grad id_match == cache_size_limit", DEVICE),
    ("requires_grad id_match == cache_size_limit", GRAD),
    ("id_match == cache_size_limit", OBJECT),
    ("== cache_size_limit", VALUE),
])
def test_a_recompiles_advice_by_the_words_of_its_reason(reason, advice):
    from nbprof.analysis.compilation import _recompile_advice

    assert _recompile_advice(reason) == advice


def _compilation(**tables):
    from nbprof.analysis.compilation import Compilation

    empty = pd.DataFrame()
    return Compilation(**{k: tables.get(k, empty) for k in ("frames", "phases", "graph_breaks", "recompiles",
                                                            "per_frame", "kernels", "lines")},
                       has_compiled_calls=tables.get("calls", False))


def test_a_compilations_repr_time_and_emptiness():
    one = pd.DataFrame({"x": [1]})
    c = _compilation(frames=pd.DataFrame({"compile_us": [1_000_000.0, 234_567.0]}), graph_breaks=one,
                     recompiles=pd.DataFrame({"x": [1, 2]}), kernels=one)
    assert c.compile_us == 1_234_567.0
    assert repr(c) == "<Compilation 2 compilations (1.23 s), 1 graph break, 2 recompiles, 1 kernel>"
    c = _compilation(frames=pd.DataFrame({"compile_us": [5_000.0]}), graph_breaks=pd.DataFrame({"x": [1, 2]}),
                     recompiles=one, kernels=pd.DataFrame({"x": [1, 2, 3]}))
    assert repr(c) == "<Compilation 1 compilation (0.01 s), 2 graph breaks, 1 recompile, 3 kernels>"
    assert not c.empty
    assert _compilation().empty and _compilation().compile_us == 0.0
    # any one of them makes it not empty
    assert not _compilation(kernels=one).empty and not _compilation(graph_breaks=one).empty
    assert not _compilation(calls=True).empty and _compilation(recompiles=one).empty


@pytest.mark.parametrize("name,expected", [
    ("graph_0_cpp_fused_add_0", True), ("cpp_fused_add_0", True), ("graph_12_cpp_fused_0", True),
    ("graph_0_cpp_add_0", False), ("cpp_add_0", False), ("my_cpp_fused_add_0", False),  # not Inductor's names
    ("triton_poi_fused_add_0", True), ("triton_red_fused_sum_1.run", True), ("triton_tem_fused_mm_0", True),
    ("triton_per_fused_0", True), ("triton_for_fused_0", True), ("triton_unk_fused_0", True),
    ("triton_helper_fn_0", True), ("triton_xyz_fused_0", False), ("a_triton_poi_fused_0", False),
    ("aten::mm", False), (7, False),
])
def test_which_names_are_inductors_kernels(name, expected):
    from nbprof.analysis.compilation import is_inductor_kernel

    assert is_inductor_kernel(name) is expected


@pytest.mark.parametrize("name,ops", [
    ("graph_0_cpp_fused_add_gelu_mul_0", ["add", "gelu", "mul"]),
    ("cpp_fused_mul_mul_add_3", ["mul", "add"]),  # each op once, in order
    ("triton_poi_fused__to_copy_relu_1", ["_to_copy", "relu"]),
    ("triton_per_fused__log_softmax_native_layer_norm_12", ["_log_softmax", "native_layer_norm"]),
    ("cpp_fused_convolution_backward_threshold_backward_2", ["convolution_backward", "threshold_backward"]),
    # names of five and six pieces (the longest Inductor fuses under their own names)
    ("triton_poi_fused__native_batch_norm_legit_functional_0", ["_native_batch_norm_legit_functional"]),
    ("cpp_fused__native_batch_norm_legit_no_training_relu_4", ["_native_batch_norm_legit_no_training", "relu"]),
    ("cpp_fused_le_scalar_tensor_where_0", ["le", "scalar", "tensor", "where"]),
    ("cpp_fused_relu", []),  # no trailing number: not a fused kernel's name
    ("aten::mm", []),
])
def test_the_ops_a_fused_kernels_name_lists(name, ops):
    from nbprof.analysis.compilation import kernel_ops

    assert kernel_ops(name) == ops


def test_a_compilation_shorter_than_a_microsecond_has_its_phase(tmp_path):
    from nbprof.analysis.compilation import compilation

    t = Trace()
    t.op("aten::empty", 0, 1)
    t.annotation("_compile.compile_inner (dynamo_timed)", 10, 0.25)
    t.annotation("code_gen (dynamo_timed)", 10.05, 0.125)
    c = compilation(t.load(tmp_path).events, None)
    assert c.phases.values.tolist() == [["Dynamo tracing", 0.125, 0.5], ["Inductor codegen", 0.125, 0.5]]


def test_compiled_code_known_by_its_graph_calls_or_its_kernels_alone(tmp_path):
    """Compiled code without a ``Torch-Compiled Region`` around it: a ``## Call CompiledFxGraph``
    range alone says compiled code ran; a kernel's own range alone is a kernel (no call around it)."""
    from nbprof.analysis.compilation import compilation

    t = Trace()
    t.op("## Call CompiledFxGraph fx0 ##", 0, 100)
    t.op("my_cpp_helper", 10, 5)  # "cpp_" in a name that is no kernel's
    c = compilation(t.load(tmp_path, "call.json").events, None)
    assert c.has_compiled_calls and c.notes == [CALLS_NOTE] and len(c.kernels) == 0
    t = Trace()
    t.op("graph_0_cpp_fused_relu_0", 0, 7)
    t.op("graph_0_cpp_fused_relu_0", 10, 3)
    c = compilation(t.load(tmp_path, "kernel.json").events, None)
    assert not c.has_compiled_calls and c.notes == []
    assert c.kernels.values.tolist() == [["graph_0_cpp_fused_relu_0", "cpp", 2, 10.0, 5.0, 1.0, "aten.relu", "", "cpu"]]
    assert c.lines.values.tolist() == [["(no source line known)", "", "graph_0_cpp_fused_relu_0", 10.0, 2]]
    # provenance before any generated code: its kernels by the names it gives
    prov = {"cpp_fused_relu_0:0": [stack(TRAIN, 3, "f", "y = x.relu()")]}
    c = compilation(t.load(tmp_path, "kernel.json").events,
                    {"records": [{"event": "inductor_provenance_tracking_kernel_stack_traces",
                                  "payload": json.dumps(prov)}]})
    assert c.kernels["sources"].tolist() == ["…/u/train.py:3"]
    # an extern call under the profile's first event (row 0), no kernel of its own
    t = Trace()
    t.op("## Call CompiledFxGraph fx0 ##", 0, 100)
    t.op("aten::mm", 10, 30)
    c = compilation(t.load(tmp_path, "extern.json").events, None)
    assert c.kernels.values.tolist() == [["aten::mm", "extern", 1, 30.0, 30.0, 1.0, "aten.mm", "", "cpu"]]
    assert c.notes == [] and c.has_compiled_calls


def test_the_same_kernel_name_in_two_graphs_is_two_kernels(tmp_path):
    """``cpp_fused_add_0`` in graph 0 and in graph 1 (each graph numbers its kernels from 0): the
    kernels record themselves as ``graph_0_...`` and ``graph_1_...``, and each has its own ops and
    lines, from its own code's comments and the provenance logged after it."""
    from nbprof.analysis.compilation import compilation

    graph = [f"# File: {CELL}:20 in f, code: a = x + 1", 'add: "f32[4]" = x + 1',
             f"# File: {CELL}:30 in g, code: b = y + 2", 'add_1: "f32[4]" = y + 2']

    def code(n: int, node: str, aten: str) -> list[str]:
        return [f'RECORD_FUNCTION("graph_{n}_cpp_fused_add_0", c10::ArrayRef<c10::IValue>({{}}));',
                f"# Source Nodes: [{node}], Original ATen: [{aten}]", "cpp_fused_add_0(buf0)"]

    prov = {"cpp_fused_add_0:1": [stack(CELL, 31, "g", "c = b * 3")]}
    log = {"records": [{"event": "dynamo_output_graph", "lines": graph},
                       {"event": "inductor_output_code", "lines": code(0, "add", "aten.add")},
                       {"event": "inductor_output_code", "lines": code(1, "add_1", "aten.add, aten.mul")},
                       {"event": "inductor_provenance_tracking_kernel_stack_traces", "payload": json.dumps(prov)}]}
    t = Trace()
    t.op("graph_0_cpp_fused_add_0", 0, 10)
    t.op("graph_1_cpp_fused_add_0", 20, 30)
    c = compilation(t.load(tmp_path).events, log, dict(CODE_NAMES))
    assert c.kernels[["name", "aten_ops", "sources"]].values.tolist() == [
        ["graph_1_cpp_fused_add_0", "aten.add, aten.mul", "In [3] line 30; In [3] line 31"],
        ["graph_0_cpp_fused_add_0", "aten.add", "In [3] line 20"]]


def test_extern_calls_need_the_events_tree(tmp_path):
    """``_kernels`` of an events table without its tree (no ``parent`` column): its kernels, and no
    extern call (an ATen op is one only under a graph call)."""
    from nbprof.analysis.compilation import _kernels

    t = Trace()
    t.op("aten::empty", 0, 1)
    t.op("## Call CompiledFxGraph fx0 ##", 10, 100)  # row 1
    t.op("aten::mm", 20, 30)
    t.op("graph_0_cpp_fused_relu_0", 60, 7)
    t.op("aten::add", 200, 4)
    events = t.load(tmp_path).events
    kernels, lines, calls = _kernels(events, [], lambda f, line: f"{f}:{line}")
    assert kernels["name"].tolist() == ["aten::mm", "graph_0_cpp_fused_relu_0"] and calls
    kernels, lines, calls = _kernels(events.drop(columns=["parent"]), [], lambda f, line: f"{f}:{line}")
    assert kernels.values.tolist() == [["graph_0_cpp_fused_relu_0", "cpp", 1, 7.0, 7.0, 1.0, "aten.relu", "", "cpu"]]
    assert calls


def test_compile_ranges_from_the_profiles_first_event_and_a_dispatcher_alone(tmp_path):
    """A phase range as the profile's first event (row 0) around a timed range is a compile range
    (the unit); the Python dispatcher's ranges in a profile without any compile range are not."""
    from nbprof.analysis.compilation import compile_range_mask, compile_units

    t = Trace()
    t.annotation("dynamo", 0, 500)
    t.annotation("_compile.compile_inner (dynamo_timed)", 10, 400)
    t.op("aten::mm", 600, 10)
    events = t.load(tmp_path).events
    assert compile_range_mask(events).tolist() == [True, True, False]
    assert compile_units(events)[["row", "dur_us", "frame_unit", "dynamo_us"]].values.tolist() == [[0, 500.0, True, 500.0]]
    t = Trace()
    t.annotation("PythonDispatchMode", 0, 50)
    t.op("aten::mm", 10, 10)
    assert compile_range_mask(t.load(tmp_path, "dispatch.json").events).tolist() == [False, False]


def test_each_rows_nearest_compile_ancestor(tmp_path):
    from nbprof.analysis.compilation import compile_ancestor

    t = Trace()
    t.annotation("a", 0, 100)  # 0: marked
    t.annotation("b", 10, 50)  # 1: under 0, not marked
    t.annotation("c", 20, 10)  # 2: under 1, marked
    t.annotation("d", 22, 2)  # 3: under 2
    t.annotation("e", 200, 10)  # 4: no parent
    events = t.load(tmp_path).events
    mask = np.array([True, False, True, False, False])
    got = compile_ancestor(events, mask)
    assert got.tolist() == [-1, 0, 0, 2, -1] and got.dtype == np.int64
    assert compile_ancestor(events.iloc[[0, 4]].assign(parent=[-1, -1]), mask[[0, 4]]).tolist() == [-1, -1]


def test_a_phase_range_holding_no_timed_range_is_no_compile_range(tmp_path):
    """A top-level timed range (no parent) and, later, a phase-named range with nothing timed in
    it (the profile's last event): only the timed range is a compile range."""
    from nbprof.analysis.compilation import compile_range_mask

    t = Trace()
    t.annotation("_compile.compile_inner (dynamo_timed)", 0, 100)
    t.annotation("dynamo", 500, 10)
    events = t.load(tmp_path).events
    assert events["parent"].tolist() == [-1, -1]
    assert compile_range_mask(events).tolist() == [True, False]


@needs_torch
def test_the_file_names_torch_interned_before_the_cell():
    """torch interns each file name once per process (``intern_string``: later records name it by
    number): the watch reads torch's own table, number -> name."""
    from torch._logging import structured

    from nbprof.collect.compile_state import _interned

    number = structured.intern_string("/home/u/interned_by_the_test.py")
    table = _interned()
    assert table[number] == "/home/u/interned_by_the_test.py"
    assert table == {v: k for k, v in structured.INTERN_TABLE.items()}


def test_restart_breaks_of_resume_functions_and_of_frames_without_a_file(tmp_path):
    """A frame without a file name and the resume functions compiled after it (none names a file
    either): ``forward`` breaks at 23; its resume function at 23 breaks again, at 25 (the next
    line of forward's); the one at 25 at 27, whose resume function kept no code."""
    from nbprof.analysis.compilation import compilation

    def frame(fid: int, name: str, reasons: list[str], resume_code: str | None = None) -> dict:
        r = metrics(fid, 0, name, "", 20)
        del r["metrics"]["co_filename"]
        r["metrics"]["restart_reasons"] = reasons
        if resume_code is not None:
            r["metrics"]["resume_code"] = resume_code
        return r

    log = {"records": [frame(0, "forward", ["first"]),
                       frame(1, "torch_dynamo_resume_in_forward_at_23", ["second"], "print(a)"),
                       frame(2, "torch_dynamo_resume_in_forward_at_25", ["third"], "y = 2"),
                       frame(3, "torch_dynamo_resume_in_forward_at_27", [])]}
    c = compilation(_frames_trace([None] * 4).load(tmp_path).events, log)
    after = "torch_dynamo_resume_in_forward_at_{0} (after the graph break in forward at line {0})"
    assert c.graph_breaks.values.tolist() == [
        ["0/0", "forward", "", "print(a)", "first", "", "first"],
        ["1/0", after.format(23), "", "y = 2", "second", "", "second"],
        ["2/0", after.format(25), "", "", "third", "", "third"]]


def test_a_records_compile_id_is_written_as_torch_writes_it():
    """A record's compile id (its frame and compile numbers, and under compiled autograd its
    number first) is what torch's own CompileId prints: the metrics' ids, the graph breaks' and
    the kernels' meet under it (seed 53's _compile_id 17)."""
    torch_guards = pytest.importorskip("torch._guards")
    from nbprof.analysis.compilation import _compile_id

    for frame, compile_, autograd in ((3, 1, None), (3, 1, 0), (0, 0, 2)):
        record = {"frame_id": frame, "frame_compile_id": compile_, "compiled_autograd_id": autograd}
        expected = torch_guards.CompileId(frame_id=frame, frame_compile_id=compile_, compiled_autograd_id=autograd)
        assert _compile_id(record) == str(expected)
    assert _compile_id({"frame_id": 3}) == ""  # no compile number: no id
