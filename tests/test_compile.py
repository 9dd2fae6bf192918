"""torch.compile: the Compile view against torch's and tlparse's answers for the same run.

The workload (``tests/compile_workload.py``) runs in a real IPython shell under ``%%torchprof``
with ``TORCH_TRACE`` on: a small MLP's first call (compilation), a model whose ``forward`` prints
(a graph break), a function called with a changing size (a recompile), the MLP again (its fused
C++ kernels). The oracles, all from that run: torch's ``key_averages()``, Dynamo's
``compilation_time_metrics``, the raw chrome trace (plain Python), tlparse's report of the
``TORCH_TRACE`` and ``torch._dynamo.explain``.

The fast tests read the recording in ``tests/data/compile_cpu/`` (torch 2.13, CPU); the slow
test records the workload afresh with the torch at hand (``test-torch-versions.sh`` runs it on
2.4 and 2.15 too) and checks the same things.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pytest

from .compile_workload import line_of, record
from .conftest import DATA, needs_torch

RECORDED = DATA / "compile_cpu"
TIMED = " (dynamo_timed)"
# phase-named ranges torch puts around its "(dynamo_timed)" ones (torch/_dynamo/utils.py, 2.6+)
PHASE_NAMES = {"dynamo", "entire_frame_compile", "backend_compile", "inductor_compile", "code_gen",
               "PythonDispatchMode"}


class Run:
    """One recording: the raw trace, what nbprof collected, torch's, explain's and tlparse's answers."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        trace = folder / "trace.json.gz"
        opener = gzip.open if trace.exists() else open
        path = trace if trace.exists() else folder / "trace.json"
        with opener(path, "rt") as f:
            self.raw = json.load(f)
        self.trace_path = path
        self.run = json.loads((folder / "run.json").read_text())
        self.explain = json.loads((folder / "explain.json").read_text())
        tl = folder / "tlparse.json"
        self.tlparse = json.loads(tl.read_text()) if tl.exists() else None

    def profile(self):
        from nbprof.collect.chrome_trace import read_trace_file
        from nbprof.model import TorchProfile

        return TorchProfile.from_trace(read_trace_file(self.trace_path), compile_log=self.run["compile_log"],
                                       code_names=self.run["code_names"])

    def events(self, pattern: str) -> list[dict]:
        return [e for e in self.raw["traceEvents"] if e.get("ph") == "X" and re.search(pattern, e.get("name", ""))]


@pytest.fixture(scope="module")
def recorded():
    return Run(RECORDED)


# ------------------------------------------------------------------------------- the checks


def check_operators(run: Run, profile) -> None:
    """Compile ranges leave the operators table; every other row is torch's."""
    theirs = {r["key"]: r for r in run.run["key_averages"]}
    ours = {r["name"]: r for r in profile.key_averages().to_dict("records")}
    timed = {k for k in theirs if k.endswith(TIMED)}
    assert timed, "the run compiled: torch lists its (dynamo_timed) ranges"
    assert not any(k.endswith(TIMED) for k in ours)
    assert set(ours) <= set(theirs)
    for name in set(theirs) - set(ours):  # exactly torch.compile's own ranges are gone
        assert (name.endswith(TIMED) or name + TIMED in timed or name in PHASE_NAMES
                or re.match(r"[\w.<>]+_data: .*compile_id=", name) or re.match(r"compile_attempt_\d+$", name)), name
    for name, o in ours.items():
        t = theirs[name]
        assert o["count"] == t["count"], name
        assert abs(o["cpu_total_us"] - t["cpu_time_total"]) <= 0.01, name
        assert abs(o["self_cpu_us"] - t["self_cpu_time_total"]) <= 0.01, name


def check_phases(run: Run, profile) -> None:
    """Each compilation's phases add up to its time, and the frames' times are torch's own
    ``compilation_time_metrics`` for the cell (the ``compile_inner`` ranges of the raw trace too)."""
    c = profile.compilation()
    frames = c.frames
    phases = [col for col in frames.columns if col.endswith("_us") and col not in ("start_us", "compile_us")]
    assert len(phases) >= 6
    for _, f in frames.iterrows():
        assert abs(sum(f[p] for p in phases) - f["compile_us"]) <= 1e-3 * max(f["compile_us"], 1)
    dynamo = frames[frames["kind"].isin(["frame", "recompile"])]
    torch_us = sorted(t * 1e6 for t in run.run["compile_inner_s"])
    raw_us = sorted(e["dur"] for e in run.events(r"compile_inner \(dynamo_timed\)$"))
    assert len(dynamo) == len(torch_us) == len(raw_us) == 5  # MLP, Chatty and its resume function, scale twice
    for ours, theirs, raw in zip(sorted(dynamo["compile_us"]), torch_us, raw_us):
        # a frame's compilation: torch's compile_inner range, plus the phase range around it (2.6+: "dynamo")
        assert theirs - 5e3 <= ours <= theirs * 1.01 + 10e3, (ours, theirs)
        assert raw <= ours + 1e-3
    # the phases of the profile as a whole are the frames' sums
    assert abs(c.phases["compile_us"].sum() - frames["compile_us"].sum()) <= 1e-3 * frames["compile_us"].sum()


def check_graph_breaks(run: Run, profile) -> None:
    """nbprof's graph breaks are tlparse's (count, reason) and explain()'s (count, reason, line)."""
    breaks = profile.compilation().graph_breaks
    version = tuple(int(x) for x in re.findall(r"\d+", run.run["torch_version"])[:2])
    line = line_of('print("shape"')
    assert len(breaks) == run.explain["graph_break_count"] == 1
    # Dynamo's own counter of graph breaks for the cell (torch._dynamo.utils.counters, read before and after)
    assert sum(run.run["compile_log"]["counters"]["graph_break"].values()) == len(breaks)
    b = breaks.iloc[0]
    assert b["source"] == f"In [1] line {line}"
    assert b["code"] == 'print("shape", h.shape)'
    assert b["reason"] and b["reason"] in run.explain["break_reasons"][0]["reason"]  # explain's reason starts with it
    assert run.explain["break_reasons"][0]["line"] == line
    if run.tlparse is not None:
        restarts = [r for r in run.tlparse["restarts"] if r["type"] == "RestartAnalysis"]
        assert len(restarts) == len(breaks)  # tlparse's failures and restarts page
        assert b["reason"] in restarts[0]["text"]
        if run.tlparse["graph_breaks"] or version >= (2, 6):  # the break's own artifact (not in torch 2.4)
            assert len(run.tlparse["graph_breaks"]) == len(breaks)
            text = run.tlparse["graph_breaks"][0]["text"]
            assert b["reason"] in text
            assert f":{line}" in text.splitlines()[0]


def check_recompiles(run: Run, profile) -> None:
    c = profile.compilation()
    rec = c.recompiles
    version = tuple(int(x) for x in re.findall(r"\d+", run.run["torch_version"])[:2])
    scale = f"In [1] line {line_of('def scale')}"
    assert (c.frames["source"] == scale).sum() == 2  # compiled, then recompiled
    if version < (2, 6):  # torch 2.4 logs no recompile reason (neither does its TORCH_TRACE)
        assert len(rec) == 0
        return
    assert len(rec) == 1
    r = rec.iloc[0]
    assert r["frame"] == "scale" and r["source"] == scale
    assert "size mismatch at index 0" in r["reason"] and "mark_dynamic" in r["advice"]
    if run.tlparse is not None:
        assert len(run.tlparse["recompiles"]) == len(rec)
        assert r["reason"] in run.tlparse["recompiles"][0]["text"]


def check_kernels(run: Run, profile) -> None:
    """The fused C++ kernels: calls and time from the raw trace, their ATen ops, and their source
    lines as Inductor's provenance says (tlparse's artifact)."""
    k = profile.compilation().kernels
    cpp = k[k["kind"] == "cpp"]
    raw: dict[str, list[float]] = {}
    for e in run.events(r"^graph_\d+_cpp_fused_"):
        raw.setdefault(e["name"], []).append(e["dur"])
    assert len(raw) >= 2 and set(cpp["name"]) == set(raw)
    for _, row in cpp.iterrows():
        assert row["count"] == len(raw[row["name"]])
        assert abs(row["total_us"] - sum(raw[row["name"]])) <= 1e-3
    gelu = cpp[cpp["name"].str.contains("gelu")].iloc[0]
    assert "aten.gelu" in gelu["aten_ops"] and "aten.mul" in gelu["aten_ops"]
    version = tuple(int(x) for x in re.findall(r"\d+", run.run["torch_version"])[:2])
    if run.tlparse is not None and run.tlparse["provenance"]:
        for _, row in cpp.iterrows():
            short = re.sub(r"^graph_\d+_", "", row["name"])
            stacks = [s for key, v in run.tlparse["provenance"].items() if key.rsplit(":", 1)[0] == short for s in v]
            lines = {int(n) for s in stacks for n in re.findall(r"line (\d+)", s)}
            assert {int(n) for n in re.findall(r"line (\d+)", row["sources"])} == lines, row["name"]
        assert str(line_of("h = h * 2 + 1")) in gelu["sources"]
        # "by source line": a line's kernels are those whose provenance names it (two for the sin line)
        by_line = profile.compilation().lines.set_index("source")["kernels"]
        for code in ("return (x * 2).sin()", "h = h * 2 + 1"):
            n = line_of(code)
            want = sorted(name for name in cpp["name"] if n in {
                int(m) for key, v in run.tlparse["provenance"].items() if key.rsplit(":", 1)[0] == re.sub(r"^graph_\d+_", "", name)
                for s in v for m in re.findall(r"line (\d+)", s)})
            if want:  # (a live run on another torch may fuse these lines otherwise)
                assert sorted(by_line[f"In [1] line {n}"].split(", ")) == want
        # the same kind of kernel in two graphs (MLP's and Chatty's relu): each with its own line
        relu = cpp[cpp["name"].str.contains("relu")].set_index("name")["sources"]
        assert sorted(relu) == sorted(f"In [1] line {line_of(code)}" for code in
                                      ("return torch.relu(self.b(h))", "h = torch.relu(self.a(x))"))
    lines = profile.compilation().lines
    if version >= (2, 8):  # Inductor's provenance tracking: every C++ kernel has its lines
        assert (cpp["sources"] != "").all()
        assert f"In [1] line {line_of('h = h * 2 + 1')}" in set(lines["source"])


def check_all(run: Run) -> None:
    profile = run.profile()
    check_operators(run, profile)
    check_phases(run, profile)
    check_graph_breaks(run, profile)
    check_recompiles(run, profile)
    check_kernels(run, profile)
    # what nbprof reported live in the recorded process is what the recording gives again
    live = run.run["nbprof"]
    c = profile.compilation()
    assert [b["reason"] for b in live["graph_breaks"]] == list(c.graph_breaks["reason"])
    assert [r["reason"] for r in live["recompiles"]] == list(c.recompiles["reason"])
    after = run.run["after_cell"]  # kernel profiling was on for the cell only
    assert after["enable_kernel_profile"] is False and after["env"] is None and after["trace_handlers"] == 1


# ------------------------------------------------------------------------ on the recording


@pytest.mark.parametrize("check", [check_operators, check_phases, check_graph_breaks, check_recompiles, check_kernels])
def test_recorded_run(recorded, check):
    check(recorded, recorded.profile())


def test_findings_name_compilation_breaks_and_recompiles(recorded):
    f = recorded.profile().findings
    by_kind = {k: m for k, m in zip(f["kind"], f["message"])}
    assert f["kind"].iloc[0] == "compile_time"
    assert "C++ / Triton compile" in by_kind["compile_time"] and "profile a later call" in by_kind["compile_time"]
    assert f"In [1] line {line_of('print(')}" in by_kind["graph_break"]
    assert "scale" in by_kind["recompile"] and "mark_dynamic" in by_kind["recompile"]
    assert "top_op" not in set(f["kind"]) or "dynamo_timed" not in by_kind["top_op"]


def test_compile_tab(recorded):
    from nbprof.views.tabs import TORCH_TABS

    p = recorded.profile()
    html = p.report()._repr_mimebundle_()["text/html"]
    assert ">Compile<" in html
    assert "Graph breaks (1)" in html and "Recompiles (1)" in html and "By source line" in html
    tab = next(t for t in TORCH_TABS if t.title == "Compile")
    assert tab.applies(p)


def test_the_compile_tabs_sections_and_columns_as_a_reader_reads_them(recorded):
    """The recorded run's Compile tab: its sections in order and each table's headers, read back
    with the standard library's HTML parser. A phase column shows only where some compilation
    spent time in it (this run never autotuned: no Autotune column)."""
    from nbprof.views.tabs.compile import compilation_html

    from .htmltext import texts_of
    from .test_mutants_views3 import dt_tables

    c = recorded.profile().compilation()
    assert (c.frames["autotune_us"] == 0).all() and (c.frames["codegen_us"] > 0).any()
    html = compilation_html(c)
    assert texts_of(html, "nbprof-sub")[2:] == [
        "Compilations", "Per compiled function",
        "Graph breaks (1): each splits the compiled graph in two, with Python running between them",
        "Recompiles (1): a guard of an earlier compilation failed", "Compiled code: the kernels that ran",
        "By source line: the compiled code's time, line by line"]
    assert [t["headers"] for t in dt_tables(html)] == [
        ["Phase", "Time", "Share"],
        ["Id", "Frame", "Source", "Kind", "Compile time", "Dynamo", "AOT", "Lowering", "Codegen", "C++/Triton", "Caches",
         "Graph breaks", "FX graph cache", "AOT cache", "Guards"],
        ["Frame", "Source", "Compiles", "Recompiles", "Graph breaks", "Compile time"],
        ["Id", "Where", "Code", "Reason", "Explanation"],
        ["Id", "Frame", "Source", "Failed guard", "What to try"],
        ["Kernel", "Kind", "Calls", "Time", "Avg", "Share", "ATen ops fused", "Source lines"],
        ["Line", "Code", "Time", "Kernel calls", "Kernels"]]


def test_a_profile_without_compilation_has_no_compile_tab():
    import nbprof

    p = nbprof.load_trace(DATA / "two_streams.trace.json.gz")
    assert p.compilation().empty
    assert ">Compile<" not in p.report()._repr_mimebundle_()["text/html"]


def test_save_and_load_keep_the_compile_log(recorded, tmp_path):
    import nbprof

    p = recorded.profile()
    loaded = nbprof.load_trace(p.save(tmp_path / "c.json.gz"))
    a, b = p.compilation(), loaded.compilation()
    for table in ("frames", "graph_breaks", "recompiles", "kernels"):
        assert getattr(a, table).drop(columns=["source"], errors="ignore").equals(
            getattr(b, table).drop(columns=["source"], errors="ignore")), table
    assert list(b.graph_breaks["source"]) == list(a.graph_breaks["source"])  # "<ipython-input-1-…>" is In [1]


def test_a_trace_without_the_log_still_has_phases(recorded):
    import nbprof

    p = nbprof.load_trace(recorded.trace_path)
    c = p.compilation()
    assert len(c.frames) >= 4 and c.frames["compile_us"].sum() > 0 and not len(c.graph_breaks)
    assert any("structured log" in n for n in c.notes)


def test_kernel_ops_from_names():
    from nbprof.analysis.compilation import kernel_ops

    assert kernel_ops("graph_0_cpp_fused_add_gelu_mul_0") == ["add", "gelu", "mul"]
    assert kernel_ops("triton_poi_fused__to_copy_relu_1") == ["_to_copy", "relu"]
    assert kernel_ops("graph_3_cpp_fused_relu_threshold_backward_1") == ["relu", "threshold_backward"]
    assert kernel_ops("aten::mm") == []


# ------------------------------------------------------------------------------- live, slow


@needs_torch
@pytest.mark.slow
def test_live_run_matches_torch_tlparse_and_explain(tmp_path):
    record(tmp_path)
    check_all(Run(tmp_path))


@needs_torch
def test_compare_eager_and_compiled_by_aten_op(recorded, shell):
    """compare(eager, compiled): each ATen op's eager self time (torch's key_averages) against the
    compiled code's time on it (the fused kernel's time from the raw trace, split among its ops)."""
    import nbprof

    from .conftest import run

    result, _ = run(shell, "%%torchprof -q -o eager_mlp\n" + SETUP_MLP)
    assert result.error_in_exec is None
    eager = shell.user_ns["eager_mlp"]
    c = nbprof.compare(eager, recorded.profile())
    assert c.by == "compiled"
    t = c.table.set_index("op")
    theirs = {a.key: a for a in eager.profiler.key_averages()}
    assert abs(t.loc["aten::gelu", "time_us_before"] - theirs["aten::gelu"].self_cpu_time_total) <= 0.01
    gelu = recorded.events(r"^graph_\d+_cpp_fused_add_gelu_mul_\d+$")
    assert abs(t.loc["aten::gelu", "time_us_after"] - sum(e["dur"] for e in gelu) / 3) <= 1e-3
    assert t.loc["aten::gelu", "count_after"] == len(gelu)
    assert f"In [1] line {line_of('h = h * 2 + 1')}" in t.loc["aten::gelu", "sources"]
    assert t.loc["aten::linear", "status"] == "removed"  # the compiled code calls addmm directly
    assert "eager vs compiled" in c.text()


SETUP_MLP = """import torch
torch.manual_seed(0)
class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 64)
        self.b = torch.nn.Linear(64, 32)
    def forward(self, x):
        h = torch.nn.functional.gelu(self.a(x))
        h = h * 2 + 1
        return torch.relu(self.b(h))
y = MLP()(torch.randn(8, 32))
y = MLP()(torch.randn(8, 32))"""


@pytest.mark.browser
def test_compile_tab_in_a_browser(recorded, tmp_path):
    """The report as a standalone page in headless Chromium: the Compile tab opens and draws its
    tables, the graph break's reason and line and the kernels' source lines among them."""
    pytest.importorskip("playwright")
    lab = pytest.importorskip("tests.lab")
    if not lab.chromium_available():
        pytest.skip("Debian's chromium is not installed")
    path = tmp_path / "compile.html"
    recorded.profile().to_html(path)
    artifacts = Path(__file__).parent / "artifacts"
    artifacts.mkdir(exist_ok=True)
    with lab.browser(width=1500, height=2400) as context:
        page = context.new_page()
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file://") else r.abort())
        page.goto(path.as_uri())
        page.locator(".nbprof-tabs > label", has_text="Compile").click()
        panel = page.locator(".nbprof-panel:visible")
        page.wait_for_function("() => document.querySelectorAll('.nbprof-panel table.dataTable').length >= 5",
                               timeout=30_000)
        assert panel.locator("table.dataTable").count() >= 6  # phases, compilations, breaks, recompiles, kernels, lines
        text = panel.inner_text()
        assert "Failed to trace builtin operator" in text and f"In [1] line {line_of('print(')}" in text
        assert "size mismatch at index 0" in text
        assert "graph_0_cpp_fused_add_gelu_mul_0" in text and "aten.gelu" in text
        page.screenshot(path=str(artifacts / "compile-tab.png"), full_page=True)


def test_triton_kernels_of_a_compiled_gpu_step(tmp_path):
    """A compiled region on a GPU (torch's names and nesting, every number chosen): Triton kernels
    are device work with their device time and the ops their names fuse; an extern matmul counts
    the device time of the kernel it launched, not its launch."""
    from .synthetic import Trace

    t = Trace()
    t.op("Torch-Compiled Region: 0/0", 0, 200)
    t.op("CompiledFunction", 5, 190)
    t.op("## Call CompiledFxGraph fabc ##", 10, 180)
    mm = t.op("aten::mm", 20, 30)
    t.launch("sm90_xmma_gemm_f32f32_tn", mm, cpu_ts=25, cpu_dur=5, gpu_ts=40, gpu_dur=50)
    t.launch("triton_poi_fused_add_gelu_0", 0, cpu_ts=60, cpu_dur=5, gpu_ts=95, gpu_dur=10)
    t.launch("triton_red_fused__log_softmax_1", 0, cpu_ts=70, cpu_dur=5, gpu_ts=110, gpu_dur=14)
    t.launch("triton_poi_fused_add_gelu_0", 0, cpu_ts=80, cpu_dur=5, gpu_ts=130, gpu_dur=6)
    k = t.load(tmp_path).compilation().kernels.set_index("name")
    assert k.loc["triton_poi_fused_add_gelu_0", ["kind", "count", "total_us"]].tolist() == ["triton", 2, 16.0]
    assert k.loc["triton_poi_fused_add_gelu_0", "aten_ops"] == "aten.add, aten.gelu"
    assert k.loc["triton_red_fused__log_softmax_1", "aten_ops"] == "aten._log_softmax"
    assert k.loc["aten::mm", ["kind", "count", "total_us", "device"]].tolist() == ["extern", 1, 50.0, "cuda"]
    assert k.loc["triton_poi_fused_add_gelu_0", "device"] == "cuda:0"


@needs_torch
def test_inductor_settings_are_on_for_the_cell_only():
    """Kernel profiling and provenance are on while a cell runs and back as they were after it,
    whether Inductor's config was imported before the cell (attributes) or during it (its
    environment variables); the structured-log handler leaves with the cell."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import logging, os, sys
        from nbprof.collect.compile_state import CompileWatch
        import torch
        w = CompileWatch()
        w.begin()
        import torch._inductor.config as cfg  # imported during the cell: reads the environment
        level = lambda: getattr(cfg.trace, "provenance_tracking_level", "-")  # torch 2.9+
        during = (cfg.cpp.enable_kernel_profile, level())
        w.end()
        after = (cfg.cpp.enable_kernel_profile, level(),
                 "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE" in os.environ, "INDUCTOR_PROVENANCE" in os.environ)
        cfg.cpp.enable_kernel_profile = True  # the user's own choice survives a cell
        before = len(logging.getLogger("torch.__trace").handlers)
        w = CompileWatch()
        w.begin()
        handlers = len(logging.getLogger("torch.__trace").handlers) - before
        during2 = level()
        w.end()
        print(during, after, handlers, during2, cfg.cpp.enable_kernel_profile, level(),
              len(logging.getLogger("torch.__trace").handlers) - before)
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE",
                                                              "INDUCTOR_PROVENANCE", "TORCH_COMPILE_DEBUG")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    line = out.stdout.strip().splitlines()[-1]
    if "'-'" in line:  # no provenance tracking in this torch
        assert line == "(True, '-') (False, '-', False, False) 1 - True - 0", line
    else:
        assert line == "(True, 1) (False, 0, False, False) 1 1 True 0 0", line


def test_a_cell_file_from_another_kernel_process_is_the_same_cell():
    """A FX graph cache hit brings back the provenance of the process that compiled first, whose
    cell files live in /tmp/ipykernel_<its pid>/: ipykernel names a cell's file by a hash of its
    code, so the same file name in another folder is the same cell."""
    compiler = pytest.importorskip("ipykernel.compiler")
    from nbprof.analysis.compilation import cell_location

    here = compiler.get_file_name("h = h * 2 + 1\n")
    stale = "/tmp/ipykernel_1/" + Path(here).name
    assert cell_location(stale, 1, {here: "In [5]"}) == "In [5] line 1"
    assert cell_location("/tmp/ipykernel_1/123.py", 1, {here: "In [5]"}) == "…/ipykernel_1/123.py:1"
