"""``%%torchprof --lines`` / ``TorchProfile.lines()`` in a real IPython shell, against answers
counted by hand and torch's own ``key_averages()``: every operator on the line of the user's code
that ran it, the self columns summing to the profile's totals."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from .conftest import frames_equal, needs_torch, run

pytestmark = needs_torch

# a function in its own cell: torch.mm once, x @ x once (operator syntax: no Python call, only the
# line tracer can place it), torch.relu in a loop of three
F_CELL = """\
def f(x):
    y = torch.mm(x, x)
    z = x @ x
    for _ in range(3):
        z = torch.relu(z)
    return z
"""
PROFILED = """\
%%torchprof --lines --memory -q -o lp
for i in range(5):
    f(x)
s = x.sum()
v = s.item()
"""


def _cell_lines(cell: str) -> list[str]:
    return cell.splitlines()


@pytest.fixture
def profiled(shell):
    run(shell, "import torch\nx = torch.randn(32, 32)")
    run(shell, F_CELL)
    result, _ = run(shell, PROFILED)
    assert result.error_in_exec is None and result.error_before_exec is None
    assert sys.gettrace() is None
    return shell.user_ns["lp"]


def _row(table, source):
    rows = table[table["source"] == source]
    assert len(rows) == 1, (source, table[["line", "source"]])
    return rows.iloc[0]


def test_hand_counted_operators_per_line(profiled):
    lines = profiled.lines()
    # counted by hand: f ran 5 times
    assert _row(lines, "    y = torch.mm(x, x)").ops == 5
    assert _row(lines, "    z = x @ x").ops == 5
    assert _row(lines, "        z = torch.relu(z)").ops == 15
    assert _row(lines, "v = s.item()").ops == 1  # the sync line is its own line
    assert _row(lines, "    f(x)").ops == 0  # its operators are on f's lines
    # and as torch counts them: aten::mm also runs under each aten::matmul
    ka = profiled.key_averages().set_index("name")["count"]
    assert _row(lines, "    z = x @ x").ops == ka["aten::matmul"]
    assert _row(lines, "    y = torch.mm(x, x)").ops == ka["aten::mm"] - ka["aten::matmul"]
    assert _row(lines, "        z = torch.relu(z)").ops == ka["aten::relu"]
    assert _row(lines, "v = s.item()").ops == ka["aten::item"]


def test_line_numbers_and_sources_are_the_cells(profiled, shell):
    lines = profiled.lines()
    mine = lines[lines["file"].notna()]
    f_file = next(f for f, n in shell.compile._filename_map.items() if n == shell.execution_count - 2)
    for row in mine.itertuples():
        cell_text = F_CELL if row.file == f_file else PROFILED
        # the magic line is line 1: the cell as typed
        assert row.source == _cell_lines(cell_text)[row.line - 1]
    f_rows = mine[mine["file"] == f_file]
    assert set(f_rows["cell"]) == {f"In [{shell.execution_count - 2}]"}
    assert set(f_rows["function"]) == {"f"} and set(f_rows["function_line"]) == {1}
    top = mine[mine["file"] != f_file]
    assert set(top["function"]) == {"<module>"} and set(top["function_line"]) == {1}
    assert list(lines.columns) == ["cell", "file", "line", "function", "function_line", "source", "ops", "self_cpu_us",
                                   "cpu_total_us", "self_device_us", "device_total_us", "alloc_bytes",
                                   "alive_at_end_bytes"]


def test_self_columns_sum_to_the_profiles_totals(profiled):
    lines = profiled.lines()
    ka = profiled.key_averages()
    assert lines["self_cpu_us"].sum() == pytest.approx(ka["self_cpu_us"].sum(), rel=0.01)
    ev = profiled.events
    allocated = ev.loc[(ev["kind"] == "memory") & (ev["bytes"] > 0), "bytes"].sum()
    assert allocated > 0
    assert lines["alloc_bytes"].sum() == pytest.approx(allocated, rel=0.01)
    # the line that called f: its total is f's lines' self time, its own self is nothing
    call = _row(lines, "    f(x)")
    f_lines = lines[lines["function"] == "f"]
    assert call.cpu_total_us == pytest.approx(f_lines["self_cpu_us"].sum(), rel=1e-9)
    assert call.self_cpu_us == 0
    # each f line's operators allocate their outputs: 32x32 float32 per call
    assert _row(lines, "    y = torch.mm(x, x)").alloc_bytes == 5 * 32 * 32 * 4
    outside = lines[lines["file"].isna()]
    assert len(outside) == 1 and outside.iloc[0]["function"] == "(outside your code)"


def test_a_module_from_an_earlier_cell_gets_its_forwards_lines(shell):
    run(shell, "import torch\nxm = torch.randn(4, 8)")
    run(shell, "class M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
               "        self.lin = torch.nn.Linear(8, 8)\n    def forward(self, x):\n        h = self.lin(x)\n"
               "        return h * 2\nmodel = M()\n")
    result, _ = run(shell, "%%torchprof --lines -q -o mp\nfor i in range(4):\n    out = model(xm)\n")
    assert result.error_in_exec is None
    lines = shell.user_ns["mp"].lines()
    linear, times_two = _row(lines, "        h = self.lin(x)"), _row(lines, "        return h * 2")
    assert (linear.function, linear.line, linear.function_line) == ("forward", 6, 5)
    assert linear.ops == 4 and times_two.ops == 4  # aten::linear and aten::mul, once a call
    ka = shell.user_ns["mp"].key_averages().set_index("name")["count"]
    assert times_two.ops == ka["aten::mul"] and linear.ops == ka["aten::linear"]
    call = _row(lines, "    out = model(xm)")
    assert call.ops == 0 and call.cpu_total_us == pytest.approx(linear.self_cpu_us + times_two.self_cpu_us)


def test_save_and_load_keep_the_line_table(profiled, tmp_path):
    import nbprof

    path = profiled.save(tmp_path / "lines.json.gz")
    loaded = nbprof.load_trace(path)
    frames_equal(profiled.lines(), loaded.lines())
    assert loaded.meta.sources == profiled.meta.sources and profiled.meta.sources


def test_a_trace_torch_wrote_gives_function_entries(shell, tmp_path):
    import nbprof

    run(shell, "import torch\nxt = torch.randn(8, 8)")
    run(shell, "def g(x):\n    a = x.relu()\n    return a @ a\n")
    path = tmp_path / "torch.json"
    result, _ = run(shell, f"from torch.profiler import profile\nwith profile(with_stack=True) as tp:\n"
                           f"    for i in range(3):\n        g(xt)\ntp.export_chrome_trace({str(path)!r})\n")
    assert result.error_in_exec is None
    lines = nbprof.load_trace(path).lines()
    assert lines.attrs["method"] == "function_entries" and lines.attrs["notes"] == [
        "lines from torch's Python frames: each is a function's entry line (its def), not the line inside it that ran "
        "the operator (record with %%torchprof --lines for that); no memory per line"]
    g_row = lines[lines["function"] == "g"]
    assert len(g_row) == 1 and g_row.iloc[0]["line"] == 1  # the def line: all torch's trace has
    assert g_row.iloc[0]["ops"] == 6  # aten::relu and aten::matmul, three calls
    assert lines["self_cpu_us"].sum() == pytest.approx(nbprof.load_trace(path).key_averages()["self_cpu_us"].sum(),
                                                       rel=0.01)


def test_the_tracer_is_removed_whatever_the_cell_does(shell):
    run(shell, "import torch\nxe = torch.randn(4, 4)")
    result, _ = run(shell, "%%torchprof --lines -q -o ep\nye = xe @ xe\nraise ValueError('boom')\n")
    assert isinstance(result.error_in_exec, ValueError)
    assert sys.gettrace() is None
    assert _row(shell.user_ns["ep"].lines(), "ye = xe @ xe").ops == 1
    result, _ = run(shell, "%%torchprof --lines -q\nye = xe @ xe\nraise KeyboardInterrupt\n")
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert sys.gettrace() is None


@pytest.mark.parametrize("other", ["debugger", "line_profiler"])
def test_another_tracer_is_left_alone(shell, other):
    """The one policy of both --lines magics toward another tracer (collect/line_hook.py; the
    cProfile twins are in test_lines_python.py): a real debugger (bdb, pdb's base, with a
    breakpoint in h) or line_profiler (counting h), running as the cell starts, keeps running,
    undisturbed (the debugger stops at its breakpoint, line_profiler counts h's lines as alone).
    On 3.10-3.11 nbprof installs no line tracer and says so; every Python call is still placed
    (torch's tree), operator syntax lands on the calling line. On 3.12+ both run: ``a @ a`` on its
    own line."""
    from .other_tracers import debugger_running, hits_of, line_profiler_running

    run(shell, "import torch\nxd = torch.randn(4, 4)")
    run(shell, "def h(x):\n    a = torch.relu(x)\n    return a @ a\n")
    h = shell.user_ns["h"]
    with line_profiler_running(h) as alone:
        h(shell.user_ns["xd"])
    with (debugger_running(h) if other == "debugger" else line_profiler_running(h)) as tool:
        held = sys.gettrace()
        result, _ = run(shell, "%%torchprof --lines -q -o dp\nh(xd)\n")
        assert sys.gettrace() is held or sys.gettrace() == held
    assert sys.gettrace() is None
    assert result.error_in_exec is None
    if other == "debugger":
        assert len(tool.stops) == 1  # its breakpoint in h, once
    else:
        assert hits_of(tool, "h") == hits_of(alone, "h")
    dp = shell.user_ns["dp"]
    lines = dp.lines()
    assert _row(lines, "    a = torch.relu(x)").ops == 1
    if sys.version_info >= (3, 12):
        assert _row(lines, "    return a @ a").ops == 1
        assert not any("another tracer" in n for n in lines.attrs["notes"])
        return
    assert _row(lines, "h(xd)").ops == 1  # a @ a: no line tracer to place it inside h
    name = "Breakpoints.trace_dispatch (tests.other_tracers)" if other == "debugger" else "_LineProfilerManager"
    assert any(f"another tracer runs ({name}" in n for n in lines.attrs["notes"]), lines.attrs["notes"]
    assert any("another tracer runs" in n for n in dp.meta.notes)  # the report says it too


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+: sys.settrace runs beside sys.monitoring's tools")
def test_a_tracer_the_cell_sets_takes_over_and_is_said(shell):
    """A tracer the cell starts itself (a breakpoint()) replaces nbprof's and stays: nbprof removes
    only its own, and says from where on operator syntax lands on the calling line (the cProfile
    twin: test_lines_python.py)."""
    run(shell, "import torch\nxr = torch.randn(4, 4)")
    run(shell, "def g(x):\n    return x @ x\n")
    # a tracer some earlier test of this process left set would make nbprof step aside from the
    # start (another tool's tracer: "refused"); this test is about one the cell sets itself. (It
    # failed now and then with the first call's x @ x on the calling line: the clocks' join, fixed
    # since and tested by test_operator_syntax_on_a_functions_first_line_whatever_the_clocks_say.)
    sys.settrace(None)
    try:
        result, _ = run(shell, "%%torchprof --lines -q -o rp\nimport sys\ng(xr)\nsys.settrace(lambda *a: None)\ng(xr)\n")
        assert sys.gettrace() is not None  # the cell's own tracer stays
    finally:
        sys.settrace(None)
    assert result.error_in_exec is None
    lines = shell.user_ns["rp"].lines()
    assert not [n for n in lines.attrs["notes"] if "another tracer runs" in n], lines.attrs["notes"]
    assert _row(lines, "    return x @ x").ops == 1  # the first call only
    by_line = dict(zip(lines["line"].tolist(), lines["ops"].tolist()))
    assert by_line[3] == 0 and by_line[5] == 1  # the second call's x @ x: on its calling line
    assert any("replaced nbprof's line tracer" in n for n in lines.attrs["notes"]), lines.attrs["notes"]


def test_flags_that_cannot_go_with_lines(shell):
    result, _ = run(shell, "%%torchprof --lines --no-stack\nq = 1\n")
    assert result.error_in_exec is not None or result.error_before_exec is not None
    assert "q" not in shell.user_ns or shell.user_ns.get("q") != 1
    result, _ = run(shell, "%%torchprof --lines --schedule 0,1,1\nq2 = 1\n")
    assert "q2" not in shell.user_ns


def test_a_profile_without_lines_says_how_to_get_them(shell):
    from nbprof.errors import NbprofError

    run(shell, "import torch\nxn = torch.randn(4, 4)")
    run(shell, "%%torchprof -q -o np_\nyn = xn @ xn\n")
    with pytest.raises(NbprofError, match="--lines"):
        shell.user_ns["np_"].lines()


def test_the_join_is_vectorized_and_exact():
    """analysis.lines._join_lines on hand-made records: the last line of the op's own code started
    at or before the op and after its call began."""
    from nbprof.analysis.lines import _join_lines

    t_code = np.array([7, 7, 9, 7, 9])
    t_time = np.array([10, 20, 25, 30, 40])
    t_line = np.array([2, 3, 5, 4, 6])
    join = np.array([7, 7, 9, -1, 7, 7])
    start = np.array([21, 30, 41, 50, 5, 35])
    since = np.array([0, 0, 0, 0, 0, 31])
    assert _join_lines(join, start, since, t_code, t_time, t_line).tolist() == [3, 4, 6, -1, -1, -1]


def test_operators_on_a_thread_without_python_go_to_the_line_that_waited(shell):
    """TorchScript's fork runs ``work`` on an inter-op thread with no Python above its operators (as
    autograd's device threads run a CUDA backward): they go to the cell's line running then."""
    run(shell, "import torch, warnings\nwarnings.simplefilter(\"ignore\", DeprecationWarning)\nxs = torch.randn(64, 64)\n@torch.jit.script\ndef work(x):\n    y = x\n"
               "    for i in range(4):\n        y = torch.mm(y, x)\n    return y\n@torch.jit.script\ndef par(x):\n"
               "    f = torch.jit.fork(work, x)\n    y = torch.mm(x, x)\n    return torch.jit.wait(f) + y\npar(xs)\n")
    # the nap: torch.jit.wait returns when the fork's value is set, and its thread may still be
    # leaving its last operator; the profiler stopped under it once crashed the process inside
    # torch (kineto's stop, a fresh clone's fast tier on 2026-11-29; torch's race, as in
    # pytorch/pytorch#136304's test)
    result, _ = run(shell, "%%torchprof --lines -q -o tp_\nz = xs + 1\nres = par(xs)\nz = xs + 1\n"
                           "import time; time.sleep(0.05)\n")
    assert result.error_in_exec is None
    p = shell.user_ns["tp_"]
    ev = p.events
    ops = ev[ev["kind"] == "op"]
    assert ops["thread"].nunique() >= 2  # the fork did run on other threads
    lines = p.lines()
    row = _row(lines, "res = par(xs)")
    ka = p.key_averages().set_index("name")
    # every aten::mm (4 forked, 1 in par) is under this line: the outside row holds none
    assert lines.iloc[-1]["self_cpu_us"] == 0
    assert row.self_cpu_us >= ka.loc["aten::mm", "self_cpu_us"]


def test_the_command_line_gives_a_scripts_and_its_modules_lines(tmp_path, monkeypatch):
    """``nbprof torch --lines train.py``: the script (run by a relative path, its module frame
    ``exec``'d) and a module of the user's own beside it (torch names it "helper.py", without its
    ``sys.path`` prefix) each get their lines; counted by hand: four steps."""
    import nbprof
    from nbprof import cli

    (tmp_path / "helper.py").write_text("import torch\n\n\ndef block(x):\n    y = torch.tanh(x)\n    return y @ y\n")
    (tmp_path / "train.py").write_text("import torch\nfrom helper import block\n\nx = torch.randn(8, 8)\n"
                                       "for i in range(4):\n    z = block(x)\n    w = z * 3\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert cli.main(["torch", "--lines", "-q", "--no-html", "--export", "t.json.gz", "train.py"]) == 0
    assert sys.gettrace() is None
    lines = nbprof.load_trace(tmp_path / "t.json.gz").lines()
    assert _row(lines, "    y = torch.tanh(x)").ops == 4
    assert _row(lines, "    return y @ y").ops == 4
    assert _row(lines, "    w = z * 3").ops == 4
    assert _row(lines, "x = torch.randn(8, 8)").ops == 1
    tanh = _row(lines, "    y = torch.tanh(x)")
    assert tanh.file == str(tmp_path / "helper.py") and tanh.cell is None and tanh.function_line == 4
    assert lines.iloc[-1]["ops"] == 0  # nothing of the script's outside it


def test_what_ran_outside_the_users_code_is_on_one_row(profiled):
    """The line table of the hand-counted profile with aten::relu's operators and the aten::clamp_min
    under them unplaced (as torch's tree leaves another thread's operators): they move to the
    outside row, by the events table's own self times, and the self columns still sum."""
    import copy

    from nbprof.analysis.lines import OUTSIDE, line_table

    ev = profiled.events
    data = copy.deepcopy(profiled.meta.line_data)
    relu_ids = set(ev.loc[ev["name"].isin(["aten::relu", "aten::clamp_min"]), "external_id"])
    data["ops"]["stack"] = [0 if e in relu_ids else s for e, s in zip(data["ops"]["external_id"], data["ops"]["stack"])]
    lines = line_table(profiled._events, data, profiled.meta.sources)
    outside = lines.iloc[-1]
    assert outside["function"] == OUTSIDE and outside["ops"] == 15
    expected = ev.loc[ev["name"].isin(["aten::relu", "aten::clamp_min"]), "self_cpu_us"].sum()
    assert outside["self_cpu_us"] == pytest.approx(expected)
    relu_line = _row(lines, "        z = torch.relu(z)")
    assert relu_line.ops == 0 and relu_line.self_cpu_us == 0  # its allocations were left placed
    ka = profiled.key_averages()
    assert lines["self_cpu_us"].sum() == pytest.approx(ka["self_cpu_us"].sum(), rel=0.01)


def _point_nowhere(data):
    data["ops"]["stack"][0] = 10**6


def _name_a_cell_with_a_number(data):
    data["cells"] = {next(iter(data["cells"])): 7}


@pytest.mark.parametrize("break_it, said", [(_point_nowhere, "stack that is not there"),
                                            (_name_a_cell_with_a_number, "cells are not a table of text")])
def test_a_files_broken_line_table_is_left_out_and_said(profiled, tmp_path, break_it, said):
    """A saved trace whose nbprofLines point nowhere, or name a cell with something other than
    text: load_trace leaves the table out with a note, and lines() gives what the trace's Python
    frames hold (function entries), never an IndexError nor a cell named 7."""
    import json

    import nbprof

    path = profiled.save(tmp_path / "lines.json")
    doc = json.loads(open(path).read())
    assert doc["nbprofLines"]["line_data"]["cells"]  # the profile ran in a cell: it names one
    break_it(doc["nbprofLines"]["line_data"])
    (tmp_path / "broken.json").write_text(json.dumps(doc))
    loaded = nbprof.load_trace(tmp_path / "broken.json")
    assert loaded.meta.line_data is None
    assert any("nbprofLines" in n and said in n for n in loaded.meta.notes)
    assert loaded.lines().attrs["method"] == "function_entries"


def test_a_saved_line_tables_method_is_read_back(profiled, tmp_path):
    """A trace saved by a run whose line tracer was refused (another tool held the hook: method
    "calls", collect.lines) says so when loaded: ``lines().attrs["method"]`` is the file's, not
    the default "tracer"."""
    import json

    import nbprof

    doc = json.loads(open(profiled.save(tmp_path / "lines.json")).read())
    assert doc["nbprofLines"]["line_data"]["method"] == "tracer"
    assert nbprof.load_trace(tmp_path / "lines.json").lines().attrs["method"] == "tracer"
    doc["nbprofLines"]["line_data"]["method"] = "calls"
    (tmp_path / "calls.json").write_text(json.dumps(doc))
    loaded = nbprof.load_trace(tmp_path / "calls.json")
    assert loaded.meta.line_data is not None and loaded.lines().attrs["method"] == "calls"


@pytest.mark.gpu
def test_on_cuda_per_line_device_time_sums_to_the_kernels(shell):
    """On a CUDA model (GPU sessions only): each kernel on its operator's line, backward's kernels
    (launched by autograd's device thread) on the backward line, the device column summing to the
    kernels' total time."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    run(shell, "import torch\nnet_g = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),"
               " torch.nn.Linear(256, 10)).cuda()\nxg = torch.randn(64, 256, device='cuda')\n")
    result, _ = run(shell, "%%torchprof --lines --cuda -q -o gp\nfor i in range(5):\n    out = net_g(xg)\n"
                           "    loss = out.square().mean()\n    loss.backward()\n    v = loss.item()\n")
    assert result.error_in_exec is None
    p = shell.user_ns["gp"]
    lines = p.lines()
    ev = p.events
    kernels = ev.loc[ev["kind"].isin(["kernel", "memcpy", "memset"]), "dur_us"].sum()
    assert kernels > 0
    assert lines["self_device_us"].sum() == pytest.approx(kernels, rel=0.01)
    assert _row(lines, "    loss.backward()").self_device_us > 0
    assert _row(lines, "    out = net_g(xg)").device_total_us > 0
    assert lines.iloc[-1]["self_device_us"] < 0.05 * kernels  # nearly nothing outside


def test_each_event_is_on_its_line_and_a_cpu_item_is_no_wait(shell):
    """The per-event line (``_event_lines``: what the ``sync_line`` finding reads) on a real CPU
    profile whose loop reads ``.item()``: every scalar read torch recorded is on the ``.item()``
    line, every matmul on its own. On the CPU a ``.item()`` waits for no device, so ``sync_line``
    (and ``sync``) stay quiet: nothing there blocks (their CUDA side: tests/test_findings.py)."""
    run(shell, "import torch\nw8 = torch.randn(64, 64)")
    cell = ("%%torchprof --lines -q -o ip\n"
            "total = 0.0\n"
            "for step in range(6):\n"
            "    h = torch.mm(w8, w8)\n"
            "    total += h.sum().item()\n")
    result, _ = run(shell, cell)
    assert result.error_in_exec is None
    p = shell.user_ns["ip"]
    lines, at = p.lines(), p._event_lines()
    ev = p.events
    assert len(at) == len(ev) and at.max() < len(lines)
    names = ev["name"].astype(str).to_numpy()
    item_line = _row(lines, "    total += h.sum().item()").name
    mm_line = _row(lines, "    h = torch.mm(w8, w8)").name
    for op, line in (("aten::item", item_line), ("aten::_local_scalar_dense", item_line), ("aten::sum", item_line),
                     ("aten::mm", mm_line)):
        rows = np.flatnonzero(names == op)
        assert len(rows) >= 6, op  # the loop ran 6 times (aten::sum: twice a time, one nested in the other)
        assert (at[rows] == line).all(), (op, at[rows], line)
    assert (names == "aten::item").sum() == 6
    # the self CPU time of the events on a line is that line's self_cpu_us
    from nbprof.analysis.key_averages import averaged_rows

    counted = averaged_rows(p._events) & (ev["kind"] == "op").to_numpy()
    for line in (item_line, mm_line):
        mine = counted & (at == line)
        assert ev["self_cpu_us"].to_numpy()[mine].sum() == pytest.approx(lines.loc[line, "self_cpu_us"], rel=1e-9)
    kinds = set(p.findings["kind"])
    assert not {"sync", "sync_line", "device_line"} & kinds


def test_a_folder_of_saved_ranks_sums_their_full_line_tables(profiled, shell, tmp_path):
    """Two profiles saved with their line tables (``nbprofLines``) as a folder of ranks: the folder's
    ``lines()`` (each rank's table computed in its summary) adds up each line of ``f``, hand-counted
    per run; each run's own cell stays its own rows; the sources are both runs'; no rank's per-op
    line data (nor events) reaches this process, and the Source tab shows the code."""
    import nbprof

    folder = tmp_path / "ranks"
    folder.mkdir()
    profiled.save(folder / "r0.json.gz")
    result, _ = run(shell, PROFILED.replace("-o lp", "-o lp2"))
    assert result.error_in_exec is None
    shell.user_ns["lp2"].save(folder / "r1.json.gz")
    p = nbprof.load_trace(folder, workers=0, progress=False)
    assert all(s.meta.line_data is None and s.lines is not None for s in p.rank_summaries)
    lines = p.lines()
    assert _row(lines, "    y = torch.mm(x, x)").ops == 10 and _row(lines, "    z = x @ x").ops == 10
    assert _row(lines, "        z = torch.relu(z)").ops == 30
    assert (lines["source"] == "    f(x)").sum() == 2  # one per run's cell
    each = [nbprof.load_trace(f).lines() for f in sorted(folder.iterdir())]
    for c in ("ops", "self_cpu_us", "alloc_bytes"):
        assert lines[c].sum() == pytest.approx(sum(t[c].sum() for t in each))
    assert p.meta.sources == {**profiled.meta.sources, **shell.user_ns["lp2"].meta.sources}
    html = p.report().html(include_library=False)
    assert ">Source</label>" in html and "z = torch.relu(z)" in html
    assert "_merged" not in p.__dict__ and "_events" not in p.__dict__


def test_a_saved_line_table_without_frames_puts_everything_outside(profiled, tmp_path):
    """A saved trace whose line table holds no frame (every op's stack the empty one: a run where no
    line of the user's code was on the stack): it loads, and lines() is the one "outside your
    code" row holding every op's self CPU time (key_averages' sum)."""
    import json

    import nbprof

    doc = json.loads(open(profiled.save(tmp_path / "lines.json")).read())
    data = doc["nbprofLines"]["line_data"]
    data["frames"] = {k: [] for k in data["frames"]}
    data["stacks"] = [[]]
    for part in ("ops", "allocs"):
        data[part]["stack"] = [0] * len(data[part]["stack"])
    data["loops"] = []
    (tmp_path / "frameless.json").write_text(json.dumps(doc))
    loaded = nbprof.load_trace(tmp_path / "frameless.json")
    assert loaded.meta.line_data is not None and not any("nbprofLines" in n for n in loaded.meta.notes)
    lines = loaded.lines()
    assert len(lines) == 1 and lines["line"].isna().all()
    assert lines["self_cpu_us"].sum() == pytest.approx(loaded.key_averages()["self_cpu_us"].sum(), rel=0.01)


def test_operator_syntax_on_a_functions_first_line_whatever_the_clocks_say(shell, monkeypatch):
    """The join compares the line recorder's ``time.time_ns()`` with torch's event times, which
    torch converts from its own clock: the two disagree by up to a few tenths of a microsecond,
    changing from run to run, about the gap between a function's call and its first line (0.03
    µs). Compared exactly, most operators of a first profile here fell on the calling line. Each
    profile's own record is joined again with the recorder's clock moved 0.5 µs earlier and 0.7 µs
    later (more than runs were seen to differ; 0.7 puts ``y = x @ x``'s line after its operator's
    start): every operator stays on the line torch's own names say (``x @ x``: aten::matmul and
    aten::mm; ``y * 2``: aten::mul)."""
    import nbprof.analysis.lines as lines_mod

    raws = []
    finish = lines_mod.finish_line_data
    monkeypatch.setattr(lines_mod, "finish_line_data", lambda raw: raws.append(raw) or finish(raw))
    run(shell, "import torch\nxq = torch.randn(4, 4)")
    run(shell, "def g2(x):\n    y = x @ x\n    return y * 2\n")
    for k in range(3):  # fresh profiles: each has its own conversion of torch's clock
        result, _ = run(shell, f"%%torchprof --lines -q -o gq{k}\nfor i in range(20):\n    g2(xq)\n")
        assert result.error_in_exec is None
    assert len(raws) == 3
    for k, raw in enumerate(raws):
        ev = shell.user_ns[f"gq{k}"].events
        name_of = dict(zip(ev["external_id"].tolist(), ev["name"].tolist()))
        for shift_ns in (0, -500, 700):
            moved = dict(raw, tracer=dict(raw["tracer"], time=raw["tracer"]["time"] + shift_ns))
            data = finish(moved)
            frames, stacks = data["frames"], data["stacks"]
            placed: dict[str, list[tuple[str, int]]] = {}
            for eid, sid in zip(data["ops"]["external_id"], data["ops"]["stack"]):
                inner = stacks[sid][-1] if stacks[sid] else None
                where = (frames["function"][inner], frames["line"][inner]) if inner is not None else None
                placed.setdefault(name_of[eid], []).append(where)
            for name, line in (("aten::matmul", 2), ("aten::mm", 2), ("aten::mul", 3)):
                assert placed[name] == [("g2", line)] * 20, (k, shift_ns, name, placed[name])
