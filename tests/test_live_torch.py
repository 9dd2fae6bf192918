"""Live profiles: our tables against torch's own key_averages() of the very same profiler.

Each workload runs through the real magic in a real IPython shell (``-o p``); then
``p.profiler.key_averages()`` is torch's answer computed from the same kineto results, the
independent oracle for every number we compute.
"""

from __future__ import annotations

import pytest

from .conftest import TORCH_FIELDS, needs_torch, reports, run

pytestmark = needs_torch

FIELDS = {**TORCH_FIELDS, "flops": "flops"}


def torch_rows(profiler, group_by: str = "op") -> dict:
    if group_by == "shape":
        averages = profiler.key_averages(group_by_input_shape=True)
    else:
        averages = profiler.key_averages()
    out = {}
    for a in averages:
        key = (a.key, str(a.device_type).endswith("CUDA"))
        if group_by == "shape":
            key += (str(a.input_shapes),)
        out[key] = a
    return out


def our_rows(profile, group_by: str = "op") -> dict:
    out = {}
    for r in profile.key_averages(group_by).to_dict("records"):
        key = (r["name"], r["kind"] in ("kernel", "memcpy", "memset"))
        if group_by == "shape":
            key += (str(r["input_shapes"]),)
        out[key] = r
    return out


def assert_equal_to_torch(profile, group_by="op", fields=FIELDS, skip=lambda key: False, min_rows=3):
    theirs = torch_rows(profile.profiler, group_by)
    ours = our_rows(profile, group_by)
    theirs = {k: v for k, v in theirs.items() if not skip(k)}
    ours = {k: v for k, v in ours.items() if not skip(k)}
    memory = memory_from_trace(profile.profiler, group_by == "shape") if profile.meta.profile_memory else None
    loose: dict = {}
    if memory is not None and TORCH_ROUNDS_OP_ENDS:
        # torch 2.4-2.10 files frees near an op's end by a rounded time (docs/differences.md): the
        # right answer is the exact one, from the trace; the loose "[memory]" rows are its too
        loose = {k: ours.pop(k) for k in list(ours) if k[0] == "[memory]"}
        theirs = {k: v for k, v in theirs.items() if k[0] != "[memory]"}
        assert {(k[0],) + k[2:] for k in loose} == {k for k in memory if k[0] == "[memory]"}
        for key, row in loose.items():
            exact = memory[(key[0],) + key[2:]]
            assert (row["count"], row["cpu_mem_bytes"], row["self_cpu_mem_bytes"]) == (
                exact["count"], exact["cpu_memory_usage"], exact["self_cpu_memory_usage"]), key
    assert set(ours) == set(theirs)
    assert len(ours) + len(loose) >= min_rows
    for key, t in theirs.items():
        o = ours[key]
        for tf, of in fields.items():
            tv = getattr(t, tf)
            if memory is not None and tf in MEMORY_FIELDS:
                exact = memory.get((key[0],) + key[2:], {}).get(tf, 0)
                if TORCH_ROUNDS_OP_ENDS:
                    tv = exact
                else:  # where torch is right, the plain answer from the trace is torch's
                    assert exact == tv, (key, tf, exact, tv)
            tol = 0 if tf in ("count", "flops") or "memory" in tf else 0.01
            assert abs(o[of] - tv) <= tol, (key, tf, o[of], tv)
    return ours


def _torch_shapes(dims: list) -> str:
    """The trace's "Input Dims" as torch's key_averages shows them: a tensor list is []."""
    return str([d if all(isinstance(x, int) for x in d) else [] for d in dims])


def _torch_version() -> tuple[int, int]:
    import torch

    major, minor = torch.__version__.split(".")[:2]
    return int(major), int(minor)


# torch 2.4-2.10 (fixed in 2.11) compares an op's end with memory events' times through float
# microseconds since the epoch (a float64 there is exact to 0.25 µs): a free up to ~125 ns after an
# op's end counts for the op, one up to ~125 ns before it does not.
TORCH_ROUNDS_OP_ENDS = _torch_version() < (2, 11)
MEMORY_FIELDS = ("cpu_memory_usage", "self_cpu_memory_usage")


def memory_from_trace(profiler, group_by_shape: bool = False) -> dict:
    """CPU bytes per key the plain way, with exact times: the profiler's own chrome trace (torch's
    writer: times in µs with three decimals, read as decimals), every memory event inside an op's
    [start, end] (any thread) counts for it, self = total minus the direct children's totals
    (nesting per thread), events inside no op are "[memory]" rows. Independent of nbprof's tree."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/trace.json"
        profiler.export_chrome_trace(path)
        return memory_from_trace_file(path, group_by_shape)


def memory_from_trace_file(path, group_by_shape: bool = False) -> dict:
    import json
    from decimal import Decimal

    with open(path) as f:
        trace = json.load(f, parse_float=Decimal)
    ns = lambda us: int(Decimal(us) * 1000)  # noqa: E731
    ops, frees = [], []
    for e in trace["traceEvents"]:
        if e.get("cat") in ("cpu_op", "user_annotation") and e.get("ph") == "X":
            start = ns(e["ts"])
            ops.append({"name": e["name"], "tid": e["tid"], "start": start, "end": start + ns(e["dur"]),
                        "shapes": _torch_shapes(e.get("args", {}).get("Input Dims", [])), "total": 0})
        elif e.get("name") == "[memory]" and e.get("args", {}).get("Device Type", 0) == 0:
            frees.append((ns(e["ts"]), int(e["args"]["Bytes"])))
    loose = []
    for t, nbytes in frees:
        inside = [op for op in ops if op["start"] <= t <= op["end"]]
        for op in inside:
            op["total"] += nbytes
        if not inside:
            loose.append(nbytes)
    for tid in {op["tid"] for op in ops}:
        stack: list[dict] = []
        for op in sorted((op for op in ops if op["tid"] == tid), key=lambda op: (op["start"], -op["end"])):
            while stack and stack[-1]["end"] < op["end"]:
                stack.pop()
            op["parent"] = stack[-1] if stack else None
            op["kids"] = []
            if stack:
                stack[-1]["kids"].append(op)
            stack.append(op)
    # torch's same-name collapse: an only child named as its parent is the parent's own call
    # (aten::mean inside aten::mean); its children become the parent's
    collapsed = True
    while collapsed:
        collapsed = False
        for op in ops:
            parent = op["parent"]
            if not op.get("gone") and parent is not None and parent["name"] == op["name"] and len(parent["kids"]) == 1:
                op["gone"] = collapsed = True
                parent["kids"] = op["kids"]
                for kid in op["kids"]:
                    kid["parent"] = parent
    ops = [op for op in ops if not op.get("gone")]
    for op in ops:
        op["children"] = sum(kid["total"] for kid in op["kids"])
    out: dict = {}
    for op in ops:
        key = (op["name"], op["shapes"]) if group_by_shape else (op["name"],)
        row = out.setdefault(key, {"cpu_memory_usage": 0, "self_cpu_memory_usage": 0})
        row["cpu_memory_usage"] += op["total"]
        row["self_cpu_memory_usage"] += op["total"] - op["children"]
    if loose:
        out[("[memory]", "[]") if group_by_shape else ("[memory]",)] = {"count": len(loose), "cpu_memory_usage": sum(loose), "self_cpu_memory_usage": sum(loose)}
    return out


WORKLOADS = {
    "nested_record_function": (
        "--shapes",
        """
import torch
from torch.profiler import record_function
x = torch.randn(32, 32)
with record_function("outer"):
    for i in range(3):
        with record_function("inner"):
            y = torch.mm(x, x).relu()
    z = y.sum()
""",
    ),
    "autograd": (
        "--memory --shapes",
        """
import torch
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = net(torch.randn(8, 16)).pow(2).mean()
    loss.backward()
    opt.step()
""",
    ),
    "varied_shapes": (
        "--shapes --memory",
        """
import torch
for n in (8, 16, 32, 64):
    a = torch.randn(n, n)
    b = torch.matmul(a, a) + a
    c = torch.cat([a, a], dim=0)
""",
    ),
    "flops": (
        "--flops --shapes",
        """
import torch
a = torch.randn(64, 64)
w = torch.randn(8, 3, 3, 3)
img = torch.randn(2, 3, 16, 16)
for _ in range(2):
    b = torch.mm(a, a)
    c = torch.nn.functional.conv2d(img, w)
    d = torch.addmm(a, a, a)
""",
    ),
    "threads": (
        "--memory",
        """
import threading, torch
def work(n):
    t = torch.randn(n, n)
    for _ in range(5):
        t = torch.tanh(t @ t)
threads = [threading.Thread(target=work, args=(16 * (i + 1),)) for i in range(3)]
for t in threads: t.start()
work(8)
for t in threads: t.join()
""",
    ),
}


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_live_key_averages_equal_torch(shell, workload):
    flags, code = WORKLOADS[workload]
    result, _ = run(shell, f"%%torchprof -q -o p {flags}\n{code}")
    assert result.error_in_exec is None
    profile = shell.user_ns["p"]
    assert profile.profiler is not None
    assert_equal_to_torch(profile, "op")
    if "--shapes" in flags:
        assert_equal_to_torch(profile, "shape")


def test_flops_are_torchs(shell):
    run(shell, "%%torchprof -q -o p --flops\n" + WORKLOADS["flops"][1])
    rows = our_rows(shell.user_ns["p"])
    assert rows[("aten::mm", False)]["flops"] == 2 * 2 * 64 * 64 * 64
    assert rows[("aten::conv2d", False)]["flops"] > 0


def test_memory_is_attributed_like_torch(shell):
    run(shell, "%%torchprof -q -o p --memory\nimport torch\nkeep = [torch.empty(1 << 20) for _ in range(4)]\ndel keep[0]")
    rows = our_rows(shell.user_ns["p"])
    assert rows[("aten::empty", False)]["cpu_mem_bytes"] == 4 * 4 * (1 << 20)
    assert_equal_to_torch(shell.user_ns["p"], min_rows=2)  # aten::empty and a loose "[memory]" free


def test_stacks_group_ops_by_user_code(shell):
    """torch 2.13 puts Python frames in its table (and in its tree, where their overlaps give it
    negative self times); we keep operators' numbers and group them by the user's frames."""
    code = """
import torch
net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
def forward_twice(x):
    return net(net(x))
out = forward_twice(torch.randn(4, 8))
"""
    run(shell, "%%torchprof -q -o p --stack\n" + code)
    p = shell.user_ns["p"]
    # operator rows: counts and total CPU time are torch's (they do not depend on the tree)
    theirs = torch_rows(p.profiler)
    ours = our_rows(p)
    for key, row in ours.items():
        if row["kind"] == "op":
            assert row["count"] == theirs[key].count
            assert abs(row["cpu_total_us"] - theirs[key].cpu_time_total) <= 0.01
    by_stack = p.key_averages("stack")
    linear = by_stack[by_stack["name"] == "aten::linear"]
    assert len(linear) == 1 and linear["count"].iloc[0] == 2
    stack = linear["stack"].iloc[0]
    assert "nn.Module: Linear_0" in stack and "forward_twice" in stack
    assert "torch/nn/modules" not in stack


def test_empty_cell_gives_empty_report(shell):
    result, captured = run(shell, "%%torchprof -o p\nx = 1 + 1")
    assert result.error_in_exec is None
    text = captured.outputs[-1].data["text/plain"]
    assert "recorded no events" in text
    assert shell.user_ns["p"].key_averages().empty


def test_no_torch_log_lines_in_cell_output(shell, capfd):
    """torch prints USDT profiler_start/stop lines and allocator warnings on fd 2; ipykernel
    would copy them into the cell. They must not reach fd 2; the useful one becomes a note."""
    run(shell, "import torch\nbefore = torch.ones(1000)")
    capfd.readouterr()
    result, captured = run(shell, "%%torchprof --memory -o p\ndel before\nimport os\nos.write(2, b'own stderr line\\n')")
    err = capfd.readouterr().err
    assert "USDT" not in err and "CPUAllocator" not in err
    assert "own stderr line" in err  # the cell's own C-level output still shows
    assert err.split() == ["own", "stderr", "line"]  # and nothing else


def test_first_profile_of_a_process_prints_nothing_on_fd2():
    """Kineto logs once a process, at the first profile or its first save (CUDA builds without a
    GPU: "gpuGetDeviceCount failed with code 35"): a fresh process, its fd 2 read whole."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        from IPython.testing.globalipapp import start_ipython
        ip = start_ipython()
        ip.run_line_magic("load_ext", "nbprof")
        ip.run_cell("import torch\\nbefore = torch.ones(1000)")
        ip.run_cell("%%torchprof -q --memory --stack -o p\\ndel before\\ny = torch.ones(3) * 2")
        ip.run_cell("%%torchprof -q --shapes -o p2\\ny = torch.ones(3) * 2")
        print(len(ip.user_ns["p"].key_averages()) > 0, len(ip.user_ns["p2"].key_averages()) > 0)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == ["True", "True"]
    assert out.stderr == ""


def test_torchs_allocator_warning_becomes_a_note():
    """torch warns once per process (TORCH_WARN_ONCE) when a block allocated before the profile
    is freed during it: a fresh process, so that this is the first time whatever ran before."""
    out = _fresh(
        """
        from IPython.testing.globalipapp import start_ipython
        ip = start_ipython()
        ip.run_line_magic("load_ext", "nbprof")
        ip.run_cell("import torch\\nbefore = torch.ones(1000)")
        ip.run_cell("%%torchprof -q --memory -o p\\ndel before")
        notes = ip.user_ns["p"].meta.notes
        print(any("allocated before the profile started" in n for n in notes))
        """
    )
    assert out == ["True"]


def test_cuda_flag_without_cuda_says_so_once_and_profiles_cpu(shell, capfd):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result, captured = run(shell, "%%torchprof --cuda -o p\nimport torch\ny = torch.ones(3) * 2")
    assert result.error_in_exec is None
    err = captured.stderr + capfd.readouterr().err
    [report] = reports(captured)
    # said once: in the report's notes, not also on stderr
    assert err.count("CUDA is not available") == 0
    assert report["text/plain"].count("CUDA is not available") == 1
    p = shell.user_ns["p"]
    assert p.collected["cuda"] is False
    assert any("CUDA is not available" in n for n in p.meta.notes)
    # the CPU side was profiled all the same: the ops torch's own table has
    ours = p.key_averages()
    assert set(ours.loc[ours["kind"] == "op", "name"]) == {r.key for r in p.profiler.key_averages()}
    # with no report shown (-q), on stderr, once
    result, captured = run(shell, "%%torchprof --cuda -q\nimport torch\ny = torch.ones(3) * 2")
    err = captured.stderr + capfd.readouterr().err
    assert err.count("CUDA is not available") == 1 and not reports(captured)


def _fresh(code: str) -> list[str]:
    import subprocess
    import sys
    import textwrap

    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=300, check=True)
    return out.stdout.split()


def test_first_record_function_of_a_process_imports_nothing_inside_the_profile():
    """torch 2.13 imports a module the first time a record_function is entered; with --stack, the
    freed code of that import gave torch's key_averages() a UnicodeDecodeError (1 run in 4) and
    nbprof's table a frame "_cupti_monitor.py(0): python_tracer". Whether the freed memory is
    reused is chance; that the import is recorded is not: a fresh process (torch imports once a
    process), the profiled cell imports nothing itself, so no import machinery may be in it."""
    out = _fresh(
        """
        from IPython.testing.globalipapp import start_ipython
        ip = start_ipython()
        ip.run_line_magic("load_ext", "nbprof")
        ip.run_cell("import torch\\nfrom torch.profiler import record_function\\nx = torch.randn(8, 8)")
        r = ip.run_cell("%%torchprof -q --stack -o p\\nwith record_function('outer'):\\n    y = (x @ x).relu()")
        assert r.error_in_exec is None, r.error_in_exec
        p = ip.user_ns["p"]
        frames = set(p.events.loc[p.events["kind"] == "python", "name"].astype(str))
        wrong = sorted(f for f in frames if "importlib" in f or ".py(0)" in f)
        print(len(frames) > 0, ";".join(wrong[:3]).replace(" ", "_") or "none")
        keys = {a.key for a in p.profiler.key_averages()}  # raised UnicodeDecodeError
        print("outer" in keys, "aten::relu" in keys)
        """
    )
    assert out == ["True", "none", "True", "True"]


def test_first_profile_does_not_import_inductor():
    """torch's prepare_trace would import inductor and dynamo (seconds) to read one setting."""
    out = _fresh(
        """
        import sys
        from IPython.testing.globalipapp import start_ipython
        ip = start_ipython()
        ip.run_line_magic("load_ext", "nbprof")
        ip.run_cell("%%torchprof -q -o p\\nimport torch\\nx = torch.ones(3) + 1")
        import torch.profiler.profiler as m
        print(len(ip.user_ns["p"].key_averages()) > 0, "torch._inductor" in sys.modules,
              "torch._dynamo" in sys.modules, "hasattr" in m.__dict__)
        """
    )
    assert out == ["True", "False", "False", "False"]


def test_with_inductor_loaded_torch_reads_its_setting():
    """Newer torch keeps what it read in ``has_cudagraphs``; older releases (2.4, 2.6) have no such
    attribute and act on the setting at once: no CUPTI teardown (TEARDOWN_CUPTI=0)."""
    out = _fresh(
        """
        import os
        os.environ.pop("TEARDOWN_CUPTI", None)
        import torch, torch._inductor.config as cfg
        cfg.triton.cudagraphs = True
        from nbprof.collect.torch_live import TorchSession
        from nbprof.settings import TorchOptions
        s = TorchSession(TorchOptions())
        s.begin()
        try:
            seen = getattr(s.profiler, "has_cudagraphs", None)
            if seen is None:
                seen = os.environ.get("TEARDOWN_CUPTI") == "0"
        finally:
            s.end()  # an exception here left the profiler on: the process crashed at exit
        print(seen)
        """
    )
    assert out == ["True"]


# ------------------------------------------------------------- torch's own API on p.profiler

API_CODE = """
import torch
from torch.profiler import record_function
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
with record_function("train_step"):
    loss = net(torch.randn(8, 16)).pow(2).mean()
    loss.backward()
"""


def _torch_api_outputs(profiler, folder) -> dict:
    """Every output of torch's own API that course material and users call on a profile."""
    import json
    from collections import Counter

    folder.mkdir()
    profiler.export_chrome_trace(str(folder / "trace.json"))  # torch's save is one-shot: once here
    trace = json.loads((folder / "trace.json").read_text())
    profiler.export_stacks(str(folder / "stacks.txt"), "self_cpu_time_total")
    stacks = (folder / "stacks.txt").read_text().splitlines()
    profiler.export_memory_timeline(str(folder / "memory.json"), device="cpu")
    times, sizes = json.loads((folder / "memory.json").read_text())
    ops = lambda names: Counter(n for n in names if n.startswith("aten::") or n == "train_step")  # noqa: E731
    return {
        "trace_keys": set(trace),
        "trace_ops": ops(e["name"] for e in trace["traceEvents"] if e.get("cat") in ("cpu_op", "user_annotation")),
        "key_averages": {a.key: a.count for a in profiler.key_averages() if a.key in ops([a.key])},
        "events": ops(e.name for e in profiler.events()),
        # torch writes operators' stacks only with experimental_config(verbose=True): by default
        # the file is written and empty, for both
        "stacks_written": (folder / "stacks.txt").exists(),
        "stack_leaves": {line.rsplit(" ", 1)[0].split(";")[-1] for line in stacks},
        "stack_lines_well_formed": all(line.rsplit(" ", 1)[1].isdigit() for line in stacks),
        "memory_timeline": (len(times) > 0, len(times) == len(sizes), len({len(s) for s in sizes})),
    }


@pytest.mark.filterwarnings("ignore:`export_memory_timeline` is deprecated:FutureWarning")
def test_torchs_own_api_on_the_kept_profiler(shell, tmp_path):
    """After %%torchprof -o p, p.profiler answers torch's API as a plain torch.profiler.profile
    run of the same code does: nbprof reading the profile used up torch's one-shot save
    ("RuntimeError: Trace is already saved.") before."""
    flags = "--memory --shapes --stack"
    result, _ = run(shell, f"%%torchprof -q -o p {flags}\n{API_CODE}")
    assert result.error_in_exec is None
    p = shell.user_ns["p"]
    plain = "\n".join("    " + line for line in API_CODE.strip().splitlines())
    # torch 2.4's own profiler imports inductor inside its region (to read one setting); with
    # with_stack the freed module code then names a frame with invalid UTF-8 in torch's own trace.
    # nbprof keeps that import out (_skip_inductor_import); for the plain run it happens first.
    result, _ = run(shell, "import torch._inductor.config\nimport torch.profiler\nwith torch.profiler.profile(profile_memory=True, record_shapes=True, "
                           f"with_stack=True) as plain_prof:\n{plain}")
    assert result.error_in_exec is None
    ours = _torch_api_outputs(p.profiler, tmp_path / "nbprof")
    theirs = _torch_api_outputs(shell.user_ns["plain_prof"], tmp_path / "plain")
    assert ours == theirs
    assert ours["trace_ops"]["train_step"] == 1 and ours["trace_ops"]["aten::addmm"] == 2
    assert ours["stack_lines_well_formed"]
    assert ours["memory_timeline"][0]
    # torch's trace is the one nbprof read: loaded back, every table is the same
    import gzip

    import nbprof

    p.profiler.export_chrome_trace(str(tmp_path / "trace.json.gz"))  # nbprof's saves are not one-shot
    with gzip.open(tmp_path / "trace.json.gz") as f:
        assert f.read() == (tmp_path / "nbprof" / "trace.json").read_bytes()

    loaded = nbprof.load_trace(tmp_path / "nbprof" / "trace.json")
    assert loaded.key_averages().equals(p.key_averages())
