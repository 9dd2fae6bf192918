"""The compile log a cell collects (nbprof/collect/compile_state.py), in the test's own process.

tests/test_compile.py checks the Compile view on a recorded run and compiles real models in the
slow tier; here a tiny ``torch.compile(backend="eager")`` (about a second: Dynamo only, no
Inductor) runs under a :class:`CompileWatch`, and what the watch kept is checked against
independent answers: torch's own counters read by the test, the compile ids and source lines of
the functions below (worked out by hand, read from this file), and records of torch's shape
sent through the ``torch.__trace`` logger as ``trace_structured`` sends them.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import sys

import pytest

from .conftest import needs_torch

pytestmark = needs_torch
HERE = os.path.abspath(__file__)


def _torch_before_2_5() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) < (2, 5)


# torch 2.4's structured log has no recompile_reasons artifact nor recompile_reason metric, and its
# dynamo_start stacks end in Dynamo's own frames (tests/test_compile.py reads 2.4's log as it is)
newer_log = pytest.mark.skipif(_torch_before_2_5(), reason="torch 2.4 logs less (see above)")


def breaks(x):
    y = x * 2
    print("a side effect")  # Dynamo cannot trace print: a graph break here
    return y + 1


def scaled(x, k):
    return x * k


def line_of(fn, text: str) -> int:
    """The line number of the source line of ``fn`` that contains ``text``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def torch_counters() -> dict[str, dict[str, int]]:
    from torch._dynamo.utils import counters

    return {str(g): {str(k): int(v) for k, v in values.items()} for g, values in counters.items()}


@pytest.fixture(scope="module")
def watched():
    """One watched cell: ``breaks`` compiled (a graph break: two frames), ``scaled`` compiled, then
    recompiled for another size; then a second cell that only runs the compiled code."""
    import torch
    import torch._dynamo

    from nbprof.collect.compile_state import TRACE_LOGGER, CompileWatch

    torch._dynamo.reset()
    logger = logging.getLogger(TRACE_LOGGER)
    level, handlers = logger.level, list(logger.handlers)
    logger.setLevel(logging.WARNING)  # the watch puts the level it found back
    before = torch_counters()
    w = CompileWatch()
    w.begin()
    during = (logger.level, len(logger.handlers) - len(handlers))
    compiled_breaks = torch.compile(breaks, backend="eager")
    compiled_scaled = torch.compile(scaled, backend="eager", dynamic=False)
    compiled_breaks(torch.ones(3))
    compiled_scaled(torch.ones(3), 2)
    compiled_scaled(torch.ones(5), 2)  # a size guard fails: the recompile
    w.end()
    after = torch_counters()
    # torch's first compile may add a handler of its own; the watch's is gone
    restored = (logger.level, [h for h in logger.handlers if h not in handlers and type(h).__module__.startswith("nbprof")])
    w2 = CompileWatch()
    w2.begin()
    compiled_scaled(torch.ones(5), 2)  # compiled code runs, nothing compiles
    w2.end()
    logger.setLevel(level)
    yield {"result": w.result(), "before": before, "after": after, "during": during, "restored": restored,
           "second": w2.result(), "torch": torch.__version__}
    torch._dynamo.reset()


def test_the_watch_keeps_torch_counters_changes_and_restores_the_logger(watched):
    r = watched["result"]
    assert watched["during"] == (logging.DEBUG, 1)  # its handler, at the level torch's records need
    assert watched["restored"] == (logging.WARNING, [])
    before, after = watched["before"], watched["after"]
    expected = {}
    for group, values in after.items():
        diff = {k: v - before.get(group, {}).get(k, 0) for k, v in values.items()
                if v != before.get(group, {}).get(k, 0)}
        if diff:
            expected[group] = diff
    assert r["counters"] == expected
    assert expected["frames"]["ok"] >= 4  # breaks and its resume function, scaled twice
    assert r["torch"] == str(watched["torch"]) and r["kernel_profile"] is True
    json.dumps(r)  # all of it JSON-able (saved beside the trace)


@newer_log
def test_compiled_frames_metrics_name_their_function_file_and_compile_id(watched):
    from nbprof.collect.compile_state import KEPT_METRICS

    metrics = [rec for rec in watched["result"]["records"] if rec["event"] == "compilation_metrics"]
    got = [(m["metrics"]["compile_id"], m["metrics"]["co_name"], m["metrics"]["co_filename"],
            m["metrics"]["co_firstlineno"]) for m in metrics]
    resume_line = line_of(breaks, "print(")
    assert got == [("0/0", "breaks", HERE, line_of(breaks, "def breaks")),
                   ("1/0", f"torch_dynamo_resume_in_breaks_at_{resume_line}", HERE, resume_line),
                   ("2/0", "scaled", HERE, line_of(scaled, "def scaled")),
                   ("2/1", "scaled", HERE, line_of(scaled, "def scaled"))]
    assert [(m["frame_id"], m["frame_compile_id"]) for m in metrics] == [(0, 0), (1, 0), (2, 0), (2, 1)]
    for m in metrics:
        assert set(m["metrics"]) - {"resume_code"} <= set(KEPT_METRICS)
        assert all(v is not None for v in m["metrics"].values())
    # the resume function's line, as the source says it; the others have none
    assert metrics[1]["metrics"]["resume_code"] == 'print("a side effect")  # Dynamo cannot trace print: a graph break here'
    assert [("resume_code" in m["metrics"]) for m in metrics] == [False, True, False, False]
    # the recompile's reason, the size guard that failed
    assert "recompile_reason" not in metrics[2]["metrics"]
    assert "size mismatch at index 0. expected 3, actual 5" in metrics[3]["metrics"]["recompile_reason"]
    assert isinstance(metrics[0]["metrics"]["restart_reasons"], list)  # a list, as JSON holds it


@newer_log
def test_graph_breaks_recompiles_and_output_graphs_are_kept_with_their_text(watched):
    records = watched["result"]["records"]
    [brk] = [rec for rec in records if rec["event"] == "dynamo_graph_break_reason"]
    assert (brk["frame_id"], brk["frame_compile_id"]) == (0, 0)
    assert f"{HERE}:{line_of(breaks, 'print(')}" in brk["payload"] and "print" in brk["payload"]
    [rec] = [rec for rec in records if rec["event"] == "recompile_reasons"]
    assert (rec["frame_id"], rec["frame_compile_id"]) == (2, 1)
    assert "size mismatch at index 0. expected 3, actual 5" in rec["payload"]
    graphs = [rec for rec in records if rec["event"] == "dynamo_output_graph"]
    assert [(g["frame_id"], g["frame_compile_id"]) for g in graphs] == [(0, 0), (1, 0), (2, 0), (2, 1)]
    # each node's "# File:" comment, then the node's own line
    lines = graphs[2]["lines"]
    assert lines[0] == f"# File: {HERE}:{line_of(scaled, 'return x * k')} in scaled, code: return x * k"
    assert len(lines) == 2 and "l_x_ * 2" in lines[1]
    assert graphs[0]["lines"][0] == f"# File: {HERE}:{line_of(breaks, 'y = x * 2')} in breaks, code: y = x * 2"
    assert graphs[1]["lines"][0].endswith(f"in torch_dynamo_resume_in_breaks_at_{line_of(breaks, 'print(')}, "
                                          "code: return y + 1")


@newer_log
def test_dynamo_starts_name_the_calling_stack_with_file_names_not_their_interned_numbers(watched):
    starts = [rec for rec in watched["result"]["records"] if rec["event"] == "dynamo_start"]
    assert [(s["frame_id"], s["frame_compile_id"]) for s in starts] == [(0, 0), (1, 0), (2, 0), (2, 1)]
    inner = [s["stack"][-1] for s in starts]
    assert [(f["filename"], f["name"], f["line"]) for f in inner] == [
        (HERE, "breaks", line_of(breaks, "def breaks")),
        (HERE, f"torch_dynamo_resume_in_breaks_at_{line_of(breaks, 'print(')}", line_of(breaks, "print(")),
        (HERE, "scaled", line_of(scaled, "def scaled")), (HERE, "scaled", line_of(scaled, "def scaled"))]
    for s in starts:
        assert all(isinstance(f["filename"], str) for f in s["stack"])


def test_the_log_names_the_compiled_files(watched):
    from nbprof.collect.compile_state import log_files

    files = log_files(watched["result"])
    assert HERE in files
    assert log_files(None) == set() and log_files({}) == set()


def test_a_cell_that_only_runs_compiled_code_gets_the_earlier_compilations_code_records(watched):
    """No compilation in the second cell: its log is the first cell's output graphs (what its
    compiled code came from), marked as earlier; no counter moved."""
    second = watched["second"]
    first_graphs = [rec for rec in watched["result"]["records"] if rec["event"] == "dynamo_output_graph"]
    assert second["counters"] == {}
    kept = [rec for rec in second["records"] if rec["event"] == "dynamo_output_graph"]
    assert [rec["lines"] for rec in kept][-4:] == [rec["lines"] for rec in first_graphs]
    assert all(rec["earlier"] is True for rec in second["records"])
    assert {rec["event"] for rec in second["records"]} <= {"dynamo_output_graph", "inductor_output_code",
                                                           "inductor_provenance_tracking_kernel_stack_traces"}
    assert all("earlier" not in rec for rec in watched["result"]["records"])  # the first cell's own


def test_a_cell_that_compiles_nothing_and_ran_no_compiled_code_has_no_log(monkeypatch):
    from nbprof.collect import compile_state

    monkeypatch.setattr(compile_state, "_EARLIER", [])  # a process that never compiled
    w = compile_state.CompileWatch()
    w.begin()
    w.end()
    assert w.result() is None


def test_the_latest_code_records_are_kept_for_later_cells(monkeypatch):
    from nbprof.collect import compile_state

    monkeypatch.setattr(compile_state, "_EARLIER", [])
    monkeypatch.setattr(compile_state, "_EARLIER_MAX", 3)
    trace = logging.getLogger(compile_state.TRACE_LOGGER)
    w = compile_state.CompileWatch()
    w.begin()
    for i in range(5):
        trace.debug("", extra={"metadata": {"dynamo_output_graph": {}, "frame_id": i, "frame_compile_id": 0},
                               "payload": f"# File: /m.py:{i} in f, code: x\nnode_{i}\n"})
    trace.debug("", extra={"metadata": {"artifact": {"name": "fx_graph_cache_miss"}, "frame_id": 9,
                                        "frame_compile_id": 0}, "payload": "{}"})
    w.end()
    assert [rec["frame_id"] for rec in w.result()["records"]] == [0, 1, 2, 3, 4, 9]
    later = compile_state.CompileWatch()
    later.begin()
    later.end()
    assert [(rec["frame_id"], rec["lines"], rec["earlier"]) for rec in later.result()["records"]] == [
        (i, [f"# File: /m.py:{i} in f, code: x", f"node_{i}"], True) for i in (2, 3, 4)]


def emit_all(messages: list[tuple]) -> list[dict]:
    """Send (metadata, payload) pairs through the ``torch.__trace`` logger as torch's
    ``trace_structured`` does (``extra={"metadata": ..., "payload": ...}``) while a watch is on;
    the records it kept."""
    from nbprof.collect import compile_state

    w = compile_state.CompileWatch()
    trace = logging.getLogger(compile_state.TRACE_LOGGER)
    saved = list(compile_state._EARLIER)
    try:
        w.begin()
        for meta, payload in messages:
            trace.debug("", extra={"metadata": meta, "payload": payload})
        w.end()
    finally:
        compile_state._EARLIER[:] = saved
    result = w.result()
    return [rec for rec in (result or {}).get("records", []) if not rec.get("earlier")]


def test_records_of_each_shape_are_kept_as_the_view_reads_them(tmp_path):
    src = tmp_path / "model.py"
    src.write_text("def f(x):\n    y = x + 1\n    print(y)\n    return y\n")
    code = "\n".join([
        "# Topologically Sorted Source Nodes: [add, gelu], Original ATen: [aten.add, aten.gelu]",
        "buf0 = empty_strided_cpu((4, ), (1, ), torch.float32)",
        "cpp_fused_add_gelu_0(arg0_1, buf0)",
        "del arg0_1",
        "return (buf0, )",
        "    RECORD_FUNCTION(\"graph_0_cpp_fused_add_gelu_0\", c10::ArrayRef<c10::IValue>({}));",
        "# Source Nodes: [only this half]",
        "int main() {}",
    ])
    ctx = {"frame_id": 3, "frame_compile_id": 1, "attempt": 0}
    got = emit_all([
        ({"str": ["/home/u/model.py", 7]}, None),  # an interned file name: kept, not a record
        ({"dynamo_start": {"stack": [{"line": 2, "name": "f", "filename": 7}]}, **ctx}, None),
        ({"compilation_metrics": {"compile_id": "3/1", "co_name": "torch_dynamo_resume_in_f_at_3",
                                  "co_filename": str(src), "guard_count": 4, "fail_type": None,
                                  "restart_reasons": {"b", "a"}, "not_kept": 1, "is_forward": True,
                                  "graph_op_count": (1, 2), "fail_reason": ValueError("x")}, **ctx}, None),
        ({"artifact": {"name": "recompile_reasons", "encoding": "string"}, **ctx}, "3/0: size mismatch"),
        ({"artifact": {"name": "dynamo_graph_break_reason"}, **ctx}, {"not": "a string"}),
        ({"artifact": {"name": "fx_graph_cache_hit"}, **ctx}, "{...}"),
        ({"artifact": {"name": "some_other_artifact"}, **ctx}, "dropped"),
        ({"inductor_output_code": {"filename": "/tmp/torchinductor/ab/cab.py"}, **ctx}, code),
        ({"dynamo_output_graph": {}, "frame_id": 3, "frame_compile_id": 1, "compiled_autograd_id": None},
         "class GraphModule:\n    # File: /home/u/model.py:2 in f, code: y = x + 1\n    add = l_x_ + 1\n"
         "    # File: /home/u/model.py:4 in f, code: return y\n"),
        ({"unknown_record": {}}, "dropped"),
        ("not a dict", "dropped"),
        ({"str": "not a pair"}, None),  # a shape nbprof does not know: left out, never raised
        ({"artifact": {"name": "aotautograd_cache_miss"}, "frame_id": 3}, None),
    ])
    assert [rec["event"] for rec in got] == ["dynamo_start", "compilation_metrics", "recompile_reasons",
                                             "dynamo_graph_break_reason", "fx_graph_cache_hit",
                                             "inductor_output_code", "dynamo_output_graph", "aotautograd_cache_miss"]
    start, metrics, recompile, brk, hit, output, graph, miss = got
    assert start == {"event": "dynamo_start", **ctx, "stack": [{"line": 2, "name": "f", "filename": "/home/u/model.py"}]}
    assert metrics == {"event": "compilation_metrics", **ctx, "metrics": {
        "compile_id": "3/1", "co_name": "torch_dynamo_resume_in_f_at_3", "co_filename": str(src), "guard_count": 4,
        "restart_reasons": ["a", "b"], "is_forward": True, "graph_op_count": [1, 2], "fail_reason": "x",
        "resume_code": "print(y)"}}
    assert recompile == {"event": "recompile_reasons", **ctx, "payload": "3/0: size mismatch"}
    assert brk == {"event": "dynamo_graph_break_reason", **ctx, "payload": None}
    assert hit == {"event": "fx_graph_cache_hit", **ctx}
    assert output == {"event": "inductor_output_code", **ctx, "filename": "/tmp/torchinductor/ab/cab.py", "lines": [
        "# Topologically Sorted Source Nodes: [add, gelu], Original ATen: [aten.add, aten.gelu]",
        "buf0 = empty_strided_cpu((4, ), (1, ), torch.float32)", "cpp_fused_add_gelu_0(arg0_1, buf0)", "del arg0_1",
        'RECORD_FUNCTION("graph_0_cpp_fused_add_gelu_0", c10::ArrayRef<c10::IValue>({}));']}
    assert graph == {"event": "dynamo_output_graph", "frame_id": 3, "frame_compile_id": 1, "lines": [
        "# File: /home/u/model.py:2 in f, code: y = x + 1", "add = l_x_ + 1",
        "# File: /home/u/model.py:4 in f, code: return y"]}
    assert miss == {"event": "aotautograd_cache_miss", "frame_id": 3}


def test_records_without_payload_or_with_empty_parts(tmp_path):
    """Payloads that are not text and empty metadata give empty, never missing, fields."""
    got = emit_all([
        ({"inductor_output_code": None}, None),
        ({"dynamo_output_graph": None}, 12),
        ({"dynamo_start": {}}, None),
        ({"compilation_metrics": None}, None),
        ({"artifact": None}, "x"),
        ({"compilation_metrics": {"co_name": "torch_dynamo_resume_in_g_at_2", "co_filename": str(tmp_path / "none.py")}},
         None),
    ])
    assert got == [{"event": "inductor_output_code", "filename": "", "lines": []},
                   {"event": "dynamo_output_graph", "lines": []},
                   {"event": "dynamo_start", "stack": []},
                   {"event": "compilation_metrics", "metrics": {}},
                   {"event": "compilation_metrics", "metrics": {
                       "co_name": "torch_dynamo_resume_in_g_at_2", "co_filename": str(tmp_path / "none.py"),
                       "resume_code": ""}}]


def test_a_kernel_that_records_itself_under_a_record_function_handle_is_named():
    code = ('    RecordFunctionHandle guard("graph_1_cpp_fused_mul_2", c10::ArrayRef<c10::IValue>({}));\n'
            '    RECORD_FUNCTION("not_a_graph_kernel", {});\n'
            "# Source Nodes: [a], Original ATen: [aten.mul]\n"
            "last_line()\n")
    [out] = emit_all([({"inductor_output_code": {"filename": "k.py"}}, code)])
    assert out["lines"] == ['RecordFunctionHandle guard("graph_1_cpp_fused_mul_2", c10::ArrayRef<c10::IValue>({}));',
                            "# Source Nodes: [a], Original ATen: [aten.mul]", "last_line()"]


# ------------------------------------------------------------------- inductor's settings, in-process


SETTINGS = ("TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE", "INDUCTOR_PROVENANCE")


@pytest.fixture
def cfg():
    """Inductor's config, its two settings put back after the test (pytest's monkeypatch cannot:
    it reads the config's attributes as missing and deletes them on undo)."""
    import torch._inductor.config as cfg

    saved = [(holder, name, getattr(holder, name)) for holder, name in
             ((cfg.cpp, "enable_kernel_profile"), (cfg.trace, "provenance_tracking_level")) if hasattr(holder, name)]
    yield cfg
    for holder, name, value in saved:
        setattr(holder, name, value)


def _settings_off(monkeypatch, cfg) -> bool:
    """No setting in the environment, inductor's two off; whether its torch has the second."""
    for env in SETTINGS:
        monkeypatch.delenv(env, raising=False)
    cfg.cpp.enable_kernel_profile = False
    has_level = hasattr(cfg.trace, "provenance_tracking_level")
    if has_level:
        cfg.trace.provenance_tracking_level = 0
    return has_level


def test_inductor_settings_set_as_attributes_when_its_config_is_imported(monkeypatch, cfg):
    from nbprof.collect.compile_state import CompileWatch

    has_level = _settings_off(monkeypatch, cfg)
    w = CompileWatch()
    w.begin()
    during = (cfg.cpp.enable_kernel_profile, getattr(cfg.trace, "provenance_tracking_level", None),
              [os.environ.get(env) for env in SETTINGS])
    w.end()
    after = (cfg.cpp.enable_kernel_profile, getattr(cfg.trace, "provenance_tracking_level", None),
             [os.environ.get(env) for env in SETTINGS])
    assert during == (True, 1 if has_level else None, [None, None])  # the attributes, not the environment
    assert after == (False, 0 if has_level else None, [None, None])


def test_inductor_settings_set_through_the_environment_before_its_config_is_imported(monkeypatch, cfg):
    """Inductor's config not imported yet: the environment variables it reads are set for the
    cell and removed after it; where inductor was imported during the cell (it read them), its
    settings go back to their defaults; a variable the user set is left alone."""
    from nbprof.collect.compile_state import CompileWatch

    has_level = _settings_off(monkeypatch, cfg)
    monkeypatch.delitem(sys.modules, "torch._inductor.config")
    w = CompileWatch()
    w.begin()
    during = [os.environ.get(env) for env in SETTINGS]
    # inductor imported during the cell: its config read the variables
    sys.modules["torch._inductor.config"] = cfg
    cfg.cpp.enable_kernel_profile = True
    if has_level:
        cfg.trace.provenance_tracking_level = 1
    w.end()
    assert during == ["1", "1"]
    assert [os.environ.get(env) for env in SETTINGS] == [None, None]
    assert cfg.cpp.enable_kernel_profile is False
    if has_level:
        assert cfg.trace.provenance_tracking_level == 0

    # the user's own variable: kept during the cell and after it, and inductor's value too
    monkeypatch.delitem(sys.modules, "torch._inductor.config")
    monkeypatch.setenv("TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE", "0")
    w = CompileWatch()
    w.begin()
    during = [os.environ.get(env) for env in SETTINGS]
    sys.modules["torch._inductor.config"] = cfg
    cfg.cpp.enable_kernel_profile = True  # as if the user's "0" read as on: nbprof does not touch it
    w.end()
    assert during == ["0", "1"]
    assert [os.environ.get(env) for env in SETTINGS] == ["0", None]
    assert cfg.cpp.enable_kernel_profile is True


def test_a_watch_ended_without_beginning_changes_nothing(monkeypatch, cfg):
    from nbprof.collect.compile_state import CompileWatch

    cfg.cpp.enable_kernel_profile = True
    w = CompileWatch()
    w.end()
    assert w.result() is None and cfg.cpp.enable_kernel_profile is True
