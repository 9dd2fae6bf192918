"""Edge inputs of small pieces of the analysis, each expected answer written by hand: names as
the docstrings promise them, a recompile's advice for each kind of failed guard, tables of
nothing with their columns and dtypes."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from .synthetic import Trace
from .test_boundaries import compile_log_trace, metrics


@pytest.mark.parametrize("function,name", [
    ("<built-in method time.sleep>", "time.sleep"),
    ("<built-in method builtins.sum>", "sum"),
    ("<method 'append' of 'list' objects>", "list.append"),
    ("<function outer.<locals>.inner at 0x7f3a2b1c0d60>", "outer.<locals>.inner"),
    ("forward", "forward"),
])
def test_flame_box_names(function, name):
    from nbprof.analysis.flame import display_name

    assert display_name(function) == name


def test_a_cell_location_without_a_line_is_the_cell():
    from nbprof.analysis.compilation import cell_location

    cell = "/tmp/ipykernel_42/1234567.py"
    assert cell_location(cell, None, {cell: "In [3]"}) == "In [3]"
    assert cell_location(cell, 0, {cell: "In [3]"}) == "In [3]"
    assert cell_location(cell, 7, {cell: "In [3]"}) == "In [3] line 7"
    assert cell_location("/home/u/project/model.py", None, {}) == "…/project/model.py"


@pytest.mark.parametrize("reason,advice", [
    ("tensor 'x' Tensor device index mismatch. Expected device index to be 0, actual 1", "an input's device changed"),
    ("tensor 'x' dtype mismatch. expected Float, actual Half", "an input's dtype changed"),
    ("tensor 'x' requires_grad mismatch. expected requires_grad=0",
     "grad mode or requires_grad changed (e.g. train vs no_grad): compile each mode once"),
    ("___check_obj_id(L['self'].fn, 140512)",
     "an object the code reads is a different one (a new module or function each call)"),
    ("L['n'] == 3", "a Python value the code reads changed (each value compiles once: pass it as a tensor)"),
    ("cache_size_limit reached", "the recompile limit was hit: Dynamo falls back to eager for this frame"),
    ("tensor 'x' stride mismatch at index 0. expected 1, actual 2",
     "input shapes changed: mark the changing dimension dynamic (torch._dynamo.mark_dynamic) or compile with dynamic=True"),
    ("something new", ""),
])
def test_a_recompiles_advice_names_the_guard_that_failed(tmp_path, reason, advice):
    p = compile_log_trace([metrics(0), metrics(1, reason)]).load(tmp_path)
    rec = p.compilation().recompiles
    assert rec[["compile_id", "reason", "advice"]].values.tolist() == [["0/1", reason, advice]]


def test_kernel_provenance_keys_keep_their_names_colons(tmp_path):
    """Inductor's provenance names each kernel ``<name>:<n>``; a name may hold colons itself
    (``aten::mm``): only the last part is the number."""
    from nbprof.analysis.compilation import _provenance

    stack = '  File "/home/u/model.py", line 9, in forward\n    h = x @ w\n'
    got = _provenance(json.dumps({"aten::mm:4": [stack], "cpp_fused_add_0:2": stack, "extern_kernels.addmm:1": []}))
    assert got == {"aten::mm": [("/home/u/model.py", 9, "h = x @ w")],
                   "cpp_fused_add_0": [("/home/u/model.py", 9, "h = x @ w")], "extern_kernels.addmm": []}
    assert _provenance("not json") == {} and _provenance(None) == {} and _provenance("[1]") == {}


def test_matching_the_calls_of_ranks_without_collectives_gives_the_columns():
    from nbprof.analysis.collectives import match_calls

    calls = pd.DataFrame({"rank": pd.Series(dtype=object), "process_group": pd.Series(dtype=object),
                          "seq": pd.Series(dtype=np.int64), "name": pd.Series(dtype=object),
                          "start_us": pd.Series(dtype=np.float64), "dur_us": pd.Series(dtype=np.float64),
                          "event": pd.Series(dtype=np.int64)})
    out = match_calls(calls)
    assert len(out) == 0
    assert list(out.columns) == ["rank", "process_group", "seq", "name", "start_us", "dur_us", "event",
                                 "ranks", "last", "wait_us", "names"]
    assert [str(out[c].dtype) for c in ("ranks", "last", "wait_us", "names")] == ["int64", "bool", "float64", "object"]


def test_allocations_bytes_are_integers(tmp_path):
    t = Trace()
    t.op("aten::empty", 0, 100)
    t.memory(10, 4096, total_allocated=4096, total_reserved=1 << 20)
    t.memory(20, -4096, total_allocated=0, total_reserved=1 << 20)
    from nbprof.analysis.memory import allocations

    p = t.load(tmp_path)
    a = allocations(p.events)
    assert a["bytes"].tolist() == [4096] and a["bytes"].dtype == np.int64
