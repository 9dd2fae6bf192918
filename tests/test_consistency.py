"""A report says only true things, and the same thing once (issue 15): each test profiles real
code in a real IPython shell (or reads a recorded trace) and checks that two places that state
the same fact state the same number, that advice only names what applies, and that nbprof says
what it did."""

from __future__ import annotations

import re
from collections import Counter

import pytest

import nbprof

from . import htmltext, units
from .conftest import needs_torch, reports, run

# ------------------------------------------------------------- 1. one share for the top operator


@needs_torch
def test_headline_and_top_op_finding_give_one_share_when_grouped_by_shape(shell):
    """Grouped by shape, aten::mm is split over two rows; the headline and the finding both give
    its share over all of them, which is its self CPU time over the profile's (torch's own
    key_averages, summed by name, is the oracle)."""
    code = ("%%torchprof -o grouped --shapes --group-by shape\nimport torch\n"
            "a, b = torch.randn(192, 192), torch.randn(96, 96)\n"
            "for _ in range(10):\n    a @ a\n    b @ b\n")
    result, captured = run(shell, code)
    assert result.error_in_exec is None
    [report] = reports(captured)
    p = shell.user_ns["grouped"]
    rows = [r for r in p.profiler.key_averages() if r.key == "aten::mm"]
    total = sum(r.self_cpu_time_total for r in p.profiler.key_averages())
    mm_share = sum(r.self_cpu_time_total for r in rows) / total
    assert len(p.key_averages("shape").query("name == 'aten::mm'")) == 2
    headline = next(line for line in report["text/plain"].splitlines() if line.startswith("top by"))
    top = p.findings[p.findings["kind"] == "top_op"].iloc[0]
    assert top["evidence"]["op"] == "aten::mm"
    assert top["evidence"]["share"] == pytest.approx(mm_share, abs=2e-3)  # torch's µs rounding
    shown = f"{100 * top['evidence']['share']:.1f}%"
    assert headline == f"top by self CPU: aten::mm ({shown}, all its input shapes)"
    assert f"aten::mm takes {shown} of self CPU time" in top["message"]
    shown_html = htmltext.text(report["text/html"])
    assert headline in shown_html and top["message"] in shown_html


# ------------------------------------------------------------- 2. advice only when it applies


@needs_torch
@pytest.mark.parametrize("flags", ["", "--shapes --group-by shape"])
def test_top_op_advice_names_only_what_applies(shell, flags):
    # the matmuls must be the top op by far: with randn(128, 128) and 5 of them, a loaded CI worker
    # once measured aten::normal_ (the randn) at 35 % and on top; then torch.ones(256, 256)'s
    # aten::fill_ at 57 % (3.8 ms: its fresh pages, on a VM where a first touch was slow), so the
    # operand is made before the profiled cell; 20 products of 256 x 256
    shell.run_cell("import torch\na = torch.ones(256, 256)")
    result, _ = run(shell, f"%%torchprof -q -o adv {flags}\nfor _ in range(20):\n    a @ a\n")
    assert result.error_in_exec is None
    p = shell.user_ns["adv"]
    assert not p.summary.has_device  # a CPU-only run: no TF32, no CUDA advice
    msg = p.findings[p.findings["kind"] == "top_op"].iloc[0]["message"]
    assert msg.startswith("aten::mm takes") and "It is compute" in msg
    assert "TF32" not in msg and "torch.autocast('cpu', dtype=torch.bfloat16)" in msg
    if flags:
        assert "--shapes" not in msg and "--group-by" not in msg and "By input shape tab" in msg
    else:
        assert "--shapes --group-by shape" in msg


def test_top_op_advice_on_a_gpu_trace_keeps_gpu_remedies():
    import nbprof

    from .conftest import trace_path

    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    msg = p.findings[p.findings["kind"] == "top_op"].iloc[0]["message"]
    assert "TF32 matmuls" in msg


# ------------------------------------------------------- 7. one policy for what a view needs


@needs_torch
@pytest.mark.parametrize("flags,option,note", [
    ("--group-by shape", "shapes", "--group-by shape: recording --shapes too"),
    ("--group-by stack", "stack", "--group-by stack: recording --stack too"),
    ("--sort flops", "flops", "--sort flops: recording --flops too"),
    ("--sort cpu_mem_bytes", "memory", "--sort cpu_mem_bytes: recording --memory too"),
])
def test_a_view_that_needs_an_option_turns_it_on_and_says_so(shell, flags, option, note):
    from nbprof import settings

    saved = (settings.panel.memory, settings.panel.shapes, settings.panel.stack)
    settings.panel.memory = settings.panel.shapes = settings.panel.stack = False
    try:
        result, captured = run(shell, f"%%torchprof -o needs {flags}\nimport torch\n"
                                      "a = torch.randn(32, 32)\ny = (a @ a).relu()")
    finally:
        settings.panel.memory, settings.panel.shapes, settings.panel.stack = saved
    assert result.error_in_exec is None
    p = shell.user_ns["needs"]
    assert p.collected[option] is True
    [report] = reports(captured)
    assert report["text/plain"].count(note) == 1 and htmltext.text(report["text/html"]).count(note) == 1
    # what was turned on was recorded: the view has its data (torch's own table as the oracle)
    averages = p.profiler.key_averages(group_by_input_shape=option == "shapes")
    if option == "shapes":
        assert {str(r.input_shapes) for r in averages if r.key == "aten::mm"} == \
               set(p.key_averages("shape").query("name == 'aten::mm'")["input_shapes"].astype(str))
    if option == "flops":
        assert p.key_averages().set_index("name").loc["aten::mm", "flops"] == \
               next(r.flops for r in averages if r.key == "aten::mm") == 2 * 32 ** 3
    if option == "memory":  # a @ a allocates its 32 x 32 float result: 4 KiB, as torch counts it
        mm = next(r for r in averages if r.key == "aten::mm")
        ours = p.key_averages().set_index("name").loc["aten::mm"]
        assert ours["cpu_mem_bytes"] == mm.cpu_memory_usage == 32 * 32 * 4
    if option == "stack":
        stacks = p.key_averages("stack").query("name == 'aten::mm'")["stack"]
        assert len(stacks) == 1 and re.fullmatch(r"In \[\d+\]\(1\): <module>", stacks.iloc[0]), stacks.tolist()
    # a view is never silently changed: no "not recorded" note
    assert "not recorded" not in report["text/plain"]


@needs_torch
def test_what_a_view_needs_is_said_on_stderr_when_no_report_is_shown(shell, capfd):
    result, captured = run(shell, "%%torchprof -q -o needs --group-by shape\nimport torch\ntorch.ones(3) * 2")
    assert result.error_in_exec is None and not reports(captured)
    err = captured.stderr + capfd.readouterr().err
    assert err.count("--group-by shape: recording --shapes too") == 1


@needs_torch
def test_a_mistyped_flag_suggests_the_nearest(shell):
    from IPython.core.error import UsageError

    for typed, meant in (("--memroy", "--memory"), ("--group_by", "--group-by"), ("--stak", "--stack")):
        result, _ = run(shell, f"%%torchprof {typed}\nran = True")
        err = result.error_in_exec or result.error_before_exec
        assert isinstance(err, UsageError)
        assert f"unrecognized arguments: {typed} (did you mean {meant}?); valid flags:" in str(err), str(err)
    result, _ = run(shell, "%%cprofile --srot cumtime\nran = True")
    err = result.error_in_exec or result.error_before_exec
    assert "--srot (did you mean --sort?)" in str(err)


def test_a_mistyped_flag_suggests_the_nearest_on_the_command_line(tmp_path):
    import subprocess
    import sys

    (tmp_path / "job.py").write_text("open('ran', 'w').close()\n")
    r = subprocess.run([sys.executable, "-m", "nbprof", "cprofile", "--dupm", "x.prof", "job.py"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "unrecognized arguments: --dupm (did you mean --dump?)" in r.stderr
    assert not (tmp_path / "ran").exists()


# ------------------------------------------------- 5. stacks end at the cell, named "In [n]"


def _ipykernel_code_name(raw_code, transformed_code, number):
    """ipykernel's XCachingCompiler.get_code_name: a kernel compiles each cell from a temporary
    file (/tmp/ipykernel_<pid>/<hash>.py) that IPython maps back to its execution count."""
    import os
    import zlib

    return f"/tmp/ipykernel_{os.getpid()}/{zlib.crc32(transformed_code.encode())}.py"


@needs_torch
@pytest.mark.parametrize("kernel_names", [False, True], ids=["ipython-input", "ipykernel-file"])
def test_by_stack_names_cells_as_cprofile_does_and_shows_no_kernel_frames(shell, monkeypatch, kernel_names):
    if kernel_names:
        monkeypatch.setattr(shell.compile, "get_code_name", _ipykernel_code_name)
    run(shell, "import torch\ndef work(a):\n    return a @ a\n")
    defined = shell.execution_count - 1
    code = "%%torchprof -q -o st --stack\nx = torch.randn(16, 16)\ny = work(x)\n"
    result, _ = run(shell, code)
    assert result.error_in_exec is None
    cell = shell.execution_count - 1
    run(shell, "%%cprofile -q -o cp\ny = work(x)\n")
    p, cp = shell.user_ns["st"], shell.user_ns["cp"]
    [stack] = p.key_averages("stack").query("name == 'aten::mm'")["stack"].tolist()
    # the innermost frame first, the cell last, nothing of what ran the cell
    assert stack == f"In [{defined}](2): work ← In [{cell}](1): <module>", stack  # torch: first lines
    # %%cprofile names the same cell file the same way
    assert f"In [{defined}]:2(work)" in cp.report().text()
    every = " ".join(p.key_averages("stack")["stack"].tolist())
    for kernel_frame in ("conftest.py", "_pytest", "pluggy", "tornado", "asyncio", "ipykernel_", "<ipython-input"):
        assert kernel_frame not in every


# ------------------------------------------------------ 9. the traceback shows the magic line


@pytest.mark.parametrize("magic", ["torchprof", "cprofile"])
def test_traceback_shows_the_magic_line_as_typed(shell, magic):
    if magic == "torchprof":
        pytest.importorskip("torch")
    shell.run_line_magic("xmode", "Context")  # a kernel's default
    result, captured = run(shell, f"%%{magic}   -q  -o tb\nx = 1\ny = x + undefined_name\n")
    assert isinstance(result.error_in_exec, NameError)
    text = re.sub(r"\x1b\[[0-9;]*m", "", captured.stdout + captured.stderr)
    assert re.search(rf"^\s+1 %%{magic}   -q  -o tb$", text, re.M), text
    assert re.search(r"^-+> 3 y = x \+ undefined_name$", text, re.M), text  # the cell's line numbers
    assert f"'%%{magic}" not in text


def test_a_cell_run_again_unchanged_in_a_kernel_shows_its_magic_line_as_typed(shell):
    """ipykernel names a cell's file by its source (ipykernel.compiler.XCachingCompiler, what
    JupyterLab's kernel compiles with): a cell run again unchanged keeps its first place in
    IPython's table of cell files, however many cells ran since."""
    from ipykernel.compiler import XCachingCompiler

    shell.run_line_magic("xmode", "Context")
    cell = "%%cprofile -q -o tb\nx = 1\ny = x + undefined_name\n"
    kept = shell.compile
    shell.compile = XCachingCompiler()
    try:
        first, _ = run(shell, cell)
        for i in range(12):  # other cells, each a file of its own
            run(shell, f"other_{i} = {i}\n")
        again, captured = run(shell, cell)
        names = list(shell.compile._filename_map)
    finally:
        shell.compile = kept
    assert isinstance(first.error_in_exec, NameError) and isinstance(again.error_in_exec, NameError)
    assert len(names) == 13 and shell.compile is kept  # the cell's file named once, 12 after it
    text = re.sub(r"\x1b\[[0-9;]*m", "", captured.stdout + captured.stderr)
    assert re.search(r"^\s+1 %%cprofile -q -o tb$", text, re.M), text
    assert "'%%cprofile" not in text


# --------------------------------------------------------------------- 8. --schedule says what it did

SCHEDULED = """%%torchprof -o sched --schedule {schedule}
import torch, nbprof
x = torch.randn(32, 32)
for i in range({n}):
    y = torch.mm(x, x)
    nbprof.step()
"""


def _notes(captured) -> list[str]:
    [report] = reports(captured)
    return [line[len("note: "):] for line in report["text/plain"].splitlines() if line.startswith("note: ")]


@needs_torch
def test_schedule_whose_active_steps_never_ran_says_so(shell):
    result, captured = run(shell, SCHEDULED.format(schedule="1,1,3", n=2))
    assert result.error_in_exec is None
    p = shell.user_ns["sched"]
    # torch recorded only the empty step the last nbprof.step() began (its own table: the oracle)
    assert [e.key for e in p.profiler.key_averages()] == ["ProfilerStep*"]
    [note] = [n for n in _notes(captured) if n.startswith("--schedule 1,1,3,1")]
    assert "recording starts at step 2" in note and "the cell ran 2 steps" in note and "no active step ran" in note


@needs_torch
def test_schedule_without_warmup_says_it_once_and_leaks_no_warning(shell):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result, captured = run(shell, SCHEDULED.format(schedule="0,0,1", n=3))
    assert result.error_in_exec is None
    leaked = [str(w.message) for w in caught if "warmup" in str(w.message)]
    assert leaked == [] and "torch_live.py" not in captured.stderr and "warmup" not in captured.stderr
    assert sum("no warmup step" in n for n in _notes(captured)) == 1
    assert shell.user_ns["sched"].key_averages().set_index("name").loc["aten::mm", "count"] == 1


@needs_torch
def test_schedule_cycles_are_merged_and_the_report_says_so(shell, tmp_path):
    """1,1,2,2: two cycles of two active steps: the report holds all four matmuls, torch's own
    profiler (result.profiler) only the last cycle's two."""
    result, captured = run(shell, SCHEDULED.format(schedule="1,1,2,2", n=12))
    assert result.error_in_exec is None
    p = shell.user_ns["sched"]
    assert p.key_averages().set_index("name").loc["aten::mm", "count"] == 4
    assert next(e.count for e in p.profiler.key_averages() if e.key == "aten::mm") == 2
    assert "2 cycles of --schedule merged into this report" in " ".join(_notes(captured))
    assert not [n for n in _notes(captured) if n.startswith("--schedule")]  # every active step ran
    # saved and read back: every event of its cycle (the events' order is the file's: by start)
    back = nbprof.load_trace(p.save(tmp_path / "sched.json.gz"))
    live = p.events.sort_values("start_us", kind="stable")
    assert sorted(back.events["cycle"].unique()) == [0, 1]
    assert Counter(zip(back.events["name"], back.events["cycle"])) == Counter(zip(live["name"], live["cycle"]))


@needs_torch
def test_schedule_that_ends_early_says_how_many_active_steps_ran(shell):
    result, captured = run(shell, SCHEDULED.format(schedule="1,1,3", n=3))
    assert result.error_in_exec is None
    assert "--schedule 1,1,3,1: 1 of its 3 active steps ran (the cell ran 3 steps)" in _notes(captured)
    assert shell.user_ns["sched"].key_averages().set_index("name").loc["aten::mm", "count"] == 1


# ------------------------------------------------- 6. comprehensions on one line stay apart


def test_two_comprehensions_on_one_line_keep_their_own_rows_and_subtrees(shell):
    import pstats
    import sys

    run(shell, "import time\ndef slow(x):\n    time.sleep(0.002)\n    return x\ndef fast(x):\n    return x\n")
    result, captured = run(shell, "%%cprofile -o lc\na = [slow(i) for i in range(20)]; b = [fast(i) for i in range(500)]\n")
    assert result.error_in_exec is None
    cp = shell.user_ns["lc"]
    # the oracle: cProfile's own entries, one per code object
    comps = {id(e.code): e for e in cp.profiler.getstats()
             if not isinstance(e.code, str) and e.code.co_name == "<listcomp>"}
    assert len(comps) == 2
    by_callee = {next(s.code.co_name for s in e.calls): e for e in comps.values()}
    rows = cp.stats[cp.stats["function"].str.startswith("<listcomp>")].set_index("function")
    if sys.version_info >= (3, 11):
        assert sorted(rows.index) == ["<listcomp> at col 39", "<listcomp> at col 5"]
        slow_comp, fast_comp = "<listcomp> at col 5", "<listcomp> at col 39"
    else:
        assert sorted(rows.index) == ["<listcomp> #1", "<listcomp> #2"]
        slow_comp = cp.callers("slow")["function"].iloc[0]
        fast_comp = cp.callers("fast")["function"].iloc[0]
    assert rows.loc[slow_comp, "cumtime_s"] == by_callee["slow"].totaltime
    assert rows.loc[fast_comp, "cumtime_s"] == by_callee["fast"].totaltime
    # callers and the flame tree keep both subtrees
    assert cp.callers("slow")["function"].tolist() == [slow_comp]
    assert cp.callers("fast")["function"].tolist() == [fast_comp]
    tree = cp.call_tree(min_fraction=0)
    slow_box = tree[tree["function"] == slow_comp]
    assert len(slow_box) == 1
    assert tree.loc[tree["parent"] == slow_box["id"].iloc[0], "function"].tolist() == ["slow"]
    assert slow_box["value_s"].iloc[0] == pytest.approx(by_callee["slow"].totaltime)
    # pstats itself keeps one <listcomp> row for both: what nbprof no longer loses
    merged = [k for k in pstats.Stats(cp.profiler).stats if k[2] == "<listcomp>"]
    assert len(merged) == 1
    # the header: pstats' total (own times summed) and the wall time, both said
    [report] = reports(captured)
    header = report["text/plain"].splitlines()[0]
    assert re.fullmatch(r"cProfile: [\d,]+ function calls in .+ of own time \(.+ wall\)", header), header
    # the own time of everything but nbprof's frames, from cProfile's entries: a builtin's own time
    # less what nbprof's frames spent in it (their sub-call entries). Exact: the builtins nbprof
    # calls at the start and end take longer on a busy machine (0.3 % of this cell once)
    entries = cp.profiler.getstats()
    ours = [e for e in entries if not isinstance(e.code, str) and "nbprof" in e.code.co_filename]
    on_our_behalf = sum(c.inlinetime for e in ours for c in (e.calls or ()) if isinstance(c.code, str))
    theirs = sum(e.inlinetime for e in entries if isinstance(e.code, str) or "nbprof" not in e.code.co_filename)
    assert cp.total_s == pytest.approx(theirs - on_our_behalf, rel=1e-9, abs=1e-9)


# ------------------------------------------------------------ 3. memory numbers that add up

TRAIN = """%%torchprof -q -o mem --memory
import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                      nn.Flatten(), nn.Linear(16 * 24 * 24, 10))
x = torch.randn(8, 3, 24, 24)
for _ in range(3):
    model.zero_grad()
    model(x).sum().backward()
"""


def _replay_held(events, device: str, until_row: int, freed_older: list | None = None) -> dict[int, tuple[int, int]]:
    """The blocks of ``device`` held right after event row ``until_row``: a plain replay of the
    memory events in time order (addr -> (bytes, row)). ``freed_older`` gets the bytes of each
    block freed by then that the profile never saw allocated (held since before it)."""
    mem = events[(events["kind"] == "memory") & (events["device"].astype(str) == device)]
    live: dict[int, tuple[int, int]] = {}
    seen: set[int] = set()
    for row, addr, nbytes in sorted(zip(mem.index, mem["addr"], mem["bytes"]),
                                    key=lambda r: (events.at[r[0], "start_us"], r[0])):
        if nbytes > 0:
            live[addr] = (nbytes, row)
            seen.add(addr)
        else:
            live.pop(addr, None)
            if addr not in seen and freed_older is not None:
                freed_older.append(-int(nbytes))
        if row == until_row:
            break
    return live


@needs_torch
def test_memory_peak_names_what_is_held_at_the_peak_and_it_adds_up(shell):
    from nbprof.views.tabs.memory import held_at_peak

    result, _ = run(shell, TRAIN)
    assert result.error_in_exec is None
    p = shell.user_ns["mem"]
    row = p.findings[p.findings["kind"] == "memory_peak"].iloc[0]
    ev = row["evidence"]
    peak = ev["peak_allocated_bytes"]
    events = p.events
    mem = events[(events["kind"] == "memory") & (events["device"].astype(str) == "cpu")]
    peak_row = mem.index[int(mem["total_allocated_bytes"].to_numpy().argmax())]
    freed_older: list[int] = []
    live = _replay_held(events, "cpu", peak_row, freed_older)
    # each operator's number is the bytes its blocks hold at the peak: together at most the peak
    by_op: dict[str, int] = {}
    parent, kind, name = events["parent"].tolist(), events["kind"].astype(str).tolist(), events["name"].tolist()
    for nbytes, at in live.values():
        op, up = "(outside operators)", parent[at]
        while up >= 0:  # the outermost operator above the allocation
            if kind[up] == "op":
                op = name[up]
            up = parent[up]
        by_op[op] = by_op.get(op, 0) + nbytes
    expected = sorted(by_op.items(), key=lambda kv: -kv[1])[:3]
    assert [(t["op"], t["bytes"]) for t in ev["top_ops"]] == expected
    assert sum(t["bytes"] for t in ev["top_ops"]) <= peak
    assert "Held at the peak, by the operator that allocated it: " in row["message"]
    # the Memory tab's held-at-peak line: its blocks add up to the peak (with what came before)
    head = re.search(r"<b>(Held on cpu at its peak .*?)</b>", held_at_peak(p)).group(1)
    during = sum(nbytes for nbytes, _ in live.values())
    assert f"{len(live):,} blocks allocated during the profile" in head
    # what was allocated before the profile and is still held (blocks of it freed before the peak
    # are not: how many there are depends on what earlier cells left, e.g. the tests run before)
    older = max(ev["allocated_before_profile_bytes"] - sum(freed_older), 0)
    if during + older == peak:
        assert "more than the peak" not in head and "in no block" not in head
    else:  # never two sums that disagree without a word
        assert "more than the peak" in head or "in no block the profile saw allocated" in head


def test_held_at_peak_says_why_its_blocks_exceed_the_peak(tmp_path):
    """A free the profile did not record (a --schedule warmup step): the block still counts as
    held, the allocator's total does not; the line says so instead of two sums that disagree."""
    from nbprof.views.tabs.memory import held_at_peak

    from .synthetic import Trace

    t = Trace()
    t.op("aten::empty", 0, 10)
    t.memory(5, 100_000, 100_000, 0, device=-1)
    t.op("aten::empty", 50, 10)
    t.memory(55, 120_000, 120_000, 0, device=-1)  # the first block was freed unseen: total 120 KB
    t.events[-1]["args"]["Addr"] = 2
    p = t.load(tmp_path)
    head = re.search(r"<b>(Held on cpu .*?)</b>", held_at_peak(p)).group(1)
    assert units.shows_bytes(units.find(rf"peak \(({units.BYTES})", head), 120_000)
    assert units.shows_bytes(units.find(rf"2 blocks allocated during the profile \(({units.BYTES})", head), 220_000)
    assert units.shows_bytes(units.find(rf"these add up to ({units.BYTES}) more than the peak", head), 100_000)


@needs_torch
def test_memory_axis_ticks_are_round_in_binary_units(shell):
    from nbprof.views.memory import memory_curve_svg

    result, _ = run(shell, TRAIN)
    p = shell.user_ns["mem"]
    ev = p.events
    svg = memory_curve_svg(p._memory_curve, float((ev["start_us"] + ev["dur_us"]).max()))
    labels = re.findall(r'text-anchor="end" fill="#555">([\d.]+) (B|KiB|MiB|GiB)</text>', svg)
    assert len(labels) >= 2 and len({u for _, u in labels}) <= 2
    values = [float(v) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[u] for v, u in labels]
    unit = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[labels[-1][1]]
    steps = {round((b - a) / unit, 6) for a, b in zip(values, values[1:])}
    assert len(steps) == 1
    [step] = steps
    import math

    assert round(step / 10 ** math.floor(math.log10(step)), 6) in (1, 2, 2.5, 5)
    assert all(abs(v / unit / step - round(v / unit / step)) < 1e-6 for v in values)
    fig = p.memory_curve()
    assert list(fig.layout.yaxis.ticktext)[1:] and all(re.fullmatch(r"[\d.]+ (B|KiB|MiB|GiB)", t)
                                                       for t in fig.layout.yaxis.ticktext)
