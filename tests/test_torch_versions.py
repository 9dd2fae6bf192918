"""The torch releases nbprof supports, and the one-line refusal of the older ones.

These run on whatever torch this environment has: the pinned CPU wheel in the main suite, and,
through scripts/test-torch-versions.sh (CI's compat step), PyPI's CUDA builds of the oldest
supported release and the newest, each in its own venv, together with tests/test_live_torch.py.
The end-to-end test runs the magic the way a user does, in a fresh process: the first profile of
a process is where torch's one-time log lines and lazy imports happen.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from .conftest import needs_torch, run

pytestmark = needs_torch


@pytest.mark.parametrize("version", ["2.1.2", "2.2.2+cpu", "2.3.1+cu121", "1.13.1"])
def test_torch_before_2_4_is_refused_in_one_line_naming_the_version_needed(version):
    from nbprof.collect.torch_live import check_torch_version
    from nbprof.errors import MissingDependencyError

    with pytest.raises(MissingDependencyError) as e:
        check_torch_version(version)
    message = str(e.value)
    assert "\n" not in message
    assert f"this is torch {version}" in message and "torch>=2.4" in message


@pytest.mark.parametrize("version", ["2.4.0", "2.4.1+cu121", "2.6.0", "2.10.0a0+git1234", "2.13.0+cpu", "2.15.0", "3.0.0"])
def test_supported_torch_is_accepted(version):
    from nbprof.collect.torch_live import check_torch_version

    check_torch_version(version)


def test_the_magic_refuses_an_old_torch_before_running_the_cell(shell, monkeypatch):
    """The real refusal was seen with PyPI's torch 2.3.1 (a UsageError, the cell not run); here the
    installed torch says it is 2.3.1."""
    import torch

    monkeypatch.setattr(torch, "__version__", "2.3.1+cu121")
    for cell in ("%%torchprof -o p_old\nran_old = True", "%torchprof ran_old = True"):
        result, _ = run(shell, cell)
        error = result.error_before_exec or result.error_in_exec
        assert type(error).__name__ == "UsageError", error
        assert str(error) == (
            "%%torchprof needs torch 2.4 or newer; this is torch 2.3.1+cu121: pip install -U 'torch>=2.4'"
        )
        assert "ran_old" not in shell.user_ns and "p_old" not in shell.user_ns


END_TO_END = textwrap.dedent(
    """
    import json, sys, tempfile
    from IPython.testing.globalipapp import start_ipython
    from IPython.utils.capture import capture_output
    import nbprof

    ip = start_ipython()
    ip.run_line_magic("load_ext", "nbprof")
    folder = tempfile.mkdtemp()
    ip.run_cell("import torch\\nfrom torch.profiler import record_function\\nbefore = torch.ones(1000)")
    cell = (
        f"%%torchprof --memory --shapes --stack --export {folder}/cell.json -o p\\n"
        "torch.manual_seed(0)\\n"
        "net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))\\n"
        "del before\\n"
        "for step in range(2):\\n"
        "    with record_function('train_step'):\\n"
        "        net(torch.randn(8, 16)).pow(2).mean().backward()\\n"
    )
    with capture_output() as shown:
        r = ip.run_cell(cell)
    assert r.error_in_exec is None, r.error_in_exec
    p = ip.user_ns["p"]
    kinds = {k for o in shown.outputs for k in o.data}
    print("report", "text/html" in kinds, "application/vnd.plotly.v1+json" in kinds)
    ours = {r["name"]: r["count"] for r in p.key_averages().to_dict("records") if r["kind"] in ("op", "annotation")}
    theirs = {a.key: a.count for a in p.profiler.key_averages() if a.key in ours}
    print("counts", ours == theirs, ours.get("train_step"), ours.get("aten::addmm"))
    loaded = nbprof.load_trace(f"{folder}/cell.json")
    print("export_round_trip", loaded.key_averages().equals(p.key_averages()))
    p.profiler.export_chrome_trace(f"{folder}/torch.json")
    print("torch_export", len(json.load(open(f"{folder}/torch.json"))["traceEvents"]) > 0)
    print("notes", any("allocated before the profile started" in n for n in p.meta.notes))
    r = ip.run_cell("%%torchprof -q --schedule 1,1,2,1 -o s\\nimport nbprof\\nfor i in range(6):\\n"
                    "    x = torch.ones(4) * i\\n    nbprof.step()")
    assert r.error_in_exec is None, r.error_in_exec
    steps = ip.user_ns["s"].steps()
    print("steps", list(steps["step"]) if "step" in steps else list(steps.index))
    print("torch", torch.__version__ if (torch := sys.modules["torch"]) else "")
    """
)


@pytest.mark.slow  # ~5 s: a fresh process imports torch, IPython, pandas and plotly
def test_magic_end_to_end_in_a_fresh_process(tmp_path):
    out = subprocess.run([sys.executable, "-c", END_TO_END], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines() if " " in line)
    assert lines["report"] == "True True"
    assert lines["counts"] == "True 2 4"  # train_step twice, two Linear layers twice
    assert lines["export_round_trip"] == "True"
    assert lines["torch_export"] == "True"
    assert lines["notes"] == "True"  # torch's allocator warning: a note, not a line in the cell
    assert lines["steps"] == "[2, 3]", lines  # ProfilerStep#2 and #3: wait 1 (#0), warmup 1 (#1), active 2
    assert out.stderr == "", out.stderr  # no torch or Kineto log line, first profile of a process
