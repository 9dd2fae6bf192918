"""nbprof.from_profiler(prof): a torch profiler the user ran, as the report %%torchprof gives.

Oracles: torch's own ``prof.key_averages()`` of the very same profiler (every table, with memory,
shapes and stacks), and, for "the same as %%torchprof", the profile %%torchprof built from the same
kineto results (its ``p.profiler`` read again through from_profiler).
"""

from __future__ import annotations

import pytest

from .conftest import frames_equal, needs_torch, run
from .test_live_torch import WORKLOADS, assert_equal_to_torch, our_rows, torch_rows

pytestmark = needs_torch

FLAGS_TO_KWARGS = {"--shapes": "record_shapes=True", "--memory": "profile_memory=True", "--flops": "with_flops=True",
                   "--stack": "with_stack=True"}


def _plain(code: str, flags: str, name: str = "prof", kind: str = "torch.profiler.profile") -> str:
    """The workload under a plain torch profiler, as a user writes it."""
    kwargs = ", ".join(FLAGS_TO_KWARGS[f] for f in flags.split())
    body = "\n".join("    " + line for line in code.strip().splitlines())
    return f"import torch, torch.profiler, torch.autograd.profiler\nwith {kind}({kwargs}) as {name}:\n{body}\n"


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_every_table_equals_torchs_key_averages(shell, workload):
    flags, code = WORKLOADS[workload]
    result, _ = run(shell, _plain(code, flags) + "import nbprof\np = nbprof.from_profiler(prof)")
    assert result.error_in_exec is None, result.error_in_exec
    p = shell.user_ns["p"]
    assert p.profiler is shell.user_ns["prof"]
    assert p.collected["memory"] == ("--memory" in flags) and p.collected["shapes"] == ("--shapes" in flags)
    assert p.collected["flops"] == ("--flops" in flags) and p.collected["stack"] == ("--stack" in flags)
    assert_equal_to_torch(p, "op")
    if "--shapes" in flags:
        assert_equal_to_torch(p, "shape")


def test_autograd_profiler_too(shell):
    flags, code = WORKLOADS["autograd"]
    result, _ = run(shell, _plain(code, flags, kind="torch.autograd.profiler.profile")
                    + "import nbprof\np = nbprof.from_profiler(prof)")
    assert result.error_in_exec is None, result.error_in_exec
    assert_equal_to_torch(shell.user_ns["p"], "op")
    assert_equal_to_torch(shell.user_ns["p"], "shape")


def test_stacks_group_ops_by_user_code(shell):
    code = """
net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
def forward_twice(x):
    return net(net(x))
out = forward_twice(torch.randn(4, 8))
"""
    result, _ = run(shell, _plain(code, "--stack") + "import nbprof\np = nbprof.from_profiler(prof)")
    assert result.error_in_exec is None, result.error_in_exec
    p = shell.user_ns["p"]
    theirs = torch_rows(p.profiler)
    for key, row in our_rows(p).items():
        if row["kind"] == "op":
            assert row["count"] == theirs[key].count
            assert abs(row["cpu_total_us"] - theirs[key].cpu_time_total) <= 0.01
    by_stack = p.key_averages("stack")
    linear = by_stack[by_stack["name"] == "aten::linear"]
    assert len(linear) == 1 and linear["count"].iloc[0] == 2
    assert "forward_twice" in linear["stack"].iloc[0] and "In [" in linear["stack"].iloc[0]


def test_the_same_as_torchprof_for_the_same_run(shell, tmp_path):
    """%%torchprof's own profiler, read again through from_profiler: every table is the same, and
    torch's one-shot save still works on it afterwards (the trace nbprof read)."""
    flags, code = WORKLOADS["autograd"]
    result, _ = run(shell, f"%%torchprof -q -o p {flags} --stack\n{code}")
    assert result.error_in_exec is None
    import nbprof

    p = shell.user_ns["p"]
    q = nbprof.from_profiler(p.profiler)
    frames_equal(p.events, q.events)
    for group_by in ("op", "shape", "stack"):
        assert q.key_averages(group_by).equals(p.key_averages(group_by)), group_by
    assert q.summary == p.summary
    assert q.collected == p.collected
    assert q.findings[["kind", "message"]].equals(p.findings[["kind", "message"]])
    p.profiler.export_chrome_trace(str(tmp_path / "t.json"))
    assert nbprof.load_trace(tmp_path / "t.json").key_averages().equals(q.key_averages())


def test_read_twice_and_torchs_api_still_works(shell, tmp_path):
    flags, code = WORKLOADS["varied_shapes"]
    result, _ = run(shell, _plain(code, flags) + "import nbprof\np = nbprof.from_profiler(prof)\n"
                                                 "q = nbprof.from_profiler(prof)")
    assert result.error_in_exec is None
    import nbprof

    p, q, prof = shell.user_ns["p"], shell.user_ns["q"], shell.user_ns["prof"]
    frames_equal(p.events, q.events)
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    assert nbprof.load_trace(tmp_path / "t.json").key_averages().equals(p.key_averages())
    assert {a.key for a in prof.key_averages()} >= {"aten::matmul", "aten::cat"}


def test_the_report_shows_in_the_shell(shell):
    result, captured = run(shell, _plain("y = torch.randn(64, 64) @ torch.randn(64, 64)", "")
                           + "import nbprof\nnbprof.from_profiler(prof)")
    assert result.error_in_exec is None
    texts = [o.data.get("text/plain", "") for o in captured.outputs]
    assert any(t.startswith("torch profile") and "aten::mm" in t for t in texts)


# torch's own warning about what this test is about: each cycle clears the last one's events
@pytest.mark.filterwarnings("ignore:Warning. Profiler clears events at the end of each cycle:UserWarning")
def test_a_scheduled_profiler_gives_its_last_cycle_and_says_so(shell):
    code = """
import torch, nbprof
from torch.profiler import profile, schedule
with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=2)) as prof:
    for i in range(10):
        torch.ones(i + 1).sum()
        prof.step()
p = nbprof.from_profiler(prof)
"""
    result, _ = run(shell, code)
    assert result.error_in_exec is None, result.error_in_exec
    p = shell.user_ns["p"]
    steps = sorted(set(p.events.loc[p.events["name"].astype(str).str.startswith("ProfilerStep#"), "name"].astype(str)))
    assert steps == ["ProfilerStep#6", "ProfilerStep#7"]  # the second cycle: wait 4, warmup 5, active 6-7
    assert any("last cycle of a schedule" in n for n in p.meta.notes)


@pytest.mark.parametrize("case, error, words", [
    ("saved", "TraceError", "load_trace"),
    ("never_run", "OptionError", "not run yet"),
    ("running", "ProfilerBusyError", "still running"),
    ("not_a_profiler", "OptionError", "got builtins.int"),
])
def test_what_cannot_be_read_is_one_line(shell, case, error, words, tmp_path):
    setup = {
        "saved": f"with profile() as prof:\n    torch.ones(3).sum()\nprof.export_chrome_trace({str(tmp_path / 't.json')!r})",
        "never_run": "prof = profile()",
        "running": "prof = profile()\nprof.start()\ntorch.ones(3).sum()",
        "not_a_profiler": "prof = 3",
    }[case]
    run(shell, "import torch, nbprof\nfrom torch.profiler import profile\n" + setup)
    try:
        result, captured = run(shell, "nbprof.from_profiler(prof)")
        err = result.error_in_exec
        assert type(err).__name__ == error and words in str(err) and "\n" not in str(err), err
    finally:
        if case == "running":
            run(shell, "prof.stop()")
    if case == "running":  # once stopped, it reads
        result, _ = run(shell, "p = nbprof.from_profiler(prof)")
        assert result.error_in_exec is None and "aten::sum" in set(shell.user_ns["p"].key_averages()["name"])


def test_a_session_another_profiler_ended_is_one_line_not_a_crash():
    """torch's outer profiler whose session an inner one ended holds results whose save crashes the
    process (torch 2.13: exit 139); torch 2.4 raises at its exit. A fresh process: a crash is seen
    as its exit code."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import torch, nbprof
        from torch.profiler import profile
        outer = profile()
        outer.start()
        with profile() as inner:
            torch.ones(3).sum()
        try:
            outer.stop()
        except RuntimeError:
            pass  # torch 2.4: "Can't disable Kineto profiler when it's not running"
        try:
            nbprof.from_profiler(outer)
        except nbprof.NbprofError as e:
            print(type(e).__name__, "ended by another profiler" in str(e))
        print(len(nbprof.from_profiler(inner).key_averages()) > 0)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["TraceError", "True", "True"]
