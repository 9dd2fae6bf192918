"""nbprof.trace_handler(): on_trace_ready= for a scheduled torch profiler, a report per cycle.

Oracles: torch's own ``prof.key_averages()`` taken in the same on_trace_ready call as each cycle
ends (torch keeps only the last cycle), the trace files read back with plain ``json``, the
display messages a real IPython shell publishes, and a real kernel (nbclient) that applies the
display updates to the saved notebook.
"""

from __future__ import annotations

import json

import pytest

from .conftest import needs_torch, run

# torch warns once a process that a schedule's cycles clear each other's events: what each test
# here is about (each cycle its own profile); which test gets it depends on the workers' order
pytestmark = [needs_torch,
              pytest.mark.filterwarnings("ignore:Warning. Profiler clears events at the end of each cycle:UserWarning")]

LOOP = """
import torch, nbprof
from torch.profiler import profile, schedule
oracle = []
def on_ready(prof):
    h(prof)
    oracle.append({a.key: (a.count, a.cpu_time_total, a.self_cpu_time_total) for a in prof.key_averages()})
with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=2), on_trace_ready=on_ready, record_shapes=True) as prof:
    for i in range(10):
        torch.ones(i + 1).sum()
        (torch.ones(4, 4) @ torch.ones(4, 4)).relu()
        prof.step()
"""


def _torch_adds_up_cycles() -> bool:
    """torch 2.4 appends the earlier cycles' events to each new cycle's (its own TODO: "we are
    overwriting previous kineto results here"), so its key_averages() at a cycle's end counts every
    cycle so far while its trace holds that cycle only; later releases (with ``acc_events``) do not."""
    import inspect

    import torch

    return "acc_events" not in inspect.signature(torch.autograd.profiler.profile).parameters


def _minus(now: dict, before: dict) -> dict:
    """One cycle's answer from torch's running totals."""
    out = {}
    for key, (count, total, self_) in now.items():
        b = before.get(key, (0, 0.0, 0.0))
        if count - b[0]:
            out[key] = (count - b[0], total - b[1], self_ - b[2])
    return out


def _displays(captured) -> list:
    return [o for o in captured.outputs if (getattr(o, "transient", None) or {}).get("display_id")]


def test_each_cycle_is_a_profile_equal_to_torchs_and_a_trace_file(shell, tmp_path):
    folder = tmp_path / "traces"
    result, captured = run(shell, "import nbprof\n"
                           f"h = nbprof.trace_handler({str(folder)!r}, worker_name='w0', keep=None)\n" + LOOP)
    assert result.error_in_exec is None, result.error_in_exec
    h, oracle = shell.user_ns["h"], shell.user_ns["oracle"]
    assert h.cycles == 2 and len(h.profiles) == 2 and len(oracle) == 2 and h.latest is h.profiles[-1]
    if _torch_adds_up_cycles():
        oracle = [oracle[0], _minus(oracle[1], oracle[0])]
    for profile, theirs in zip(h.profiles, oracle):
        ours = {r["name"]: (r["count"], r["cpu_total_us"], r["self_cpu_us"])
                for r in profile.key_averages().to_dict("records")}
        assert set(ours) == set(theirs)
        for key, (count, total, self_) in theirs.items():
            assert ours[key][0] == count and abs(ours[key][1] - total) <= 0.01 and abs(ours[key][2] - self_) <= 0.01
        assert profile.collected["shapes"]
    # each cycle's own steps: wait 0, warmup 1, active 2-3; then wait 4, warmup 5, active 6-7
    steps = [sorted(set(p.events.loc[p.events["name"].astype(str).str.startswith("ProfilerStep#"), "name"]
                        .astype(str))) for p in h.profiles]
    assert steps == [["ProfilerStep#2", "ProfilerStep#3"], ["ProfilerStep#6", "ProfilerStep#7"]]
    assert [n for n in h.profiles[1].meta.notes if n.startswith("cycle")] == [
        "cycle 2 of the schedule, ended at step 8 (nbprof.trace_handler)"]
    # torch's tensorboard layout, one file per cycle, each the cycle nbprof read
    names = sorted(p.name for p in folder.iterdir())
    assert len(names) == 2 and all(n.startswith("w0.") and n.endswith(".pt.trace.json") for n in names)
    assert h.files == [str(folder / n) for n in names]
    import nbprof

    for path, profile in zip(h.files, h.profiles):
        trace = json.loads(open(path).read())
        ops = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "cpu_op"}
        assert ops == {n for n in profile.key_averages()["name"] if not n.startswith("ProfilerStep")}
        assert nbprof.load_trace(path).key_averages().equals(profile.key_averages())
    # one output, updated: the first cycle's report displayed, the second replacing it
    shown = _displays(captured)
    assert len(shown) == 2
    assert shown[0].transient["display_id"] == shown[1].transient["display_id"]
    assert not shown[0].update and shown[1].update
    assert "cycle 1 of the schedule" in shown[0].data["text/plain"]
    assert "cycle 2 of the schedule" in shown[1].data["text/plain"]
    assert shown[1].data["text/plain"] == h.profiles[1].report().text()


def test_keep_show_and_gzip(shell, tmp_path):
    result, captured = run(shell, f"import nbprof\nh = nbprof.trace_handler({str(tmp_path)!r}, use_gzip=True, "
                                  "show=False)\n" + LOOP)
    assert result.error_in_exec is None, result.error_in_exec
    h = shell.user_ns["h"]
    assert h.cycles == 2 and len(h.profiles) == 1  # keep=1: the latest
    assert [n for n in h.latest.meta.notes if n.startswith("cycle")][0].startswith("cycle 2 ")
    assert not _displays(captured)
    import gzip

    assert len(h.files) == 2 and all(f.endswith(".pt.trace.json.gz") for f in h.files)
    with gzip.open(h.files[-1]) as f:
        assert json.load(f)["traceEvents"]
    # without a folder: nothing written
    result, _ = run(shell, "h = nbprof.trace_handler(show=False, keep=0)\n" + LOOP)
    assert result.error_in_exec is None and shell.user_ns["h"].cycles == 2
    assert shell.user_ns["h"].files == [] and shell.user_ns["h"].profiles == []


def test_a_new_cell_gets_its_own_output(shell):
    run(shell, "import nbprof\nh = nbprof.trace_handler()")
    _, first = run(shell, LOOP)
    _, second = run(shell, LOOP)
    a, b = _displays(first), _displays(second)
    assert len(a) == 2 and len(b) == 2
    assert a[0].transient["display_id"] != b[0].transient["display_id"]
    assert not b[0].update and b[1].update


def test_keep_must_be_a_count(shell):
    import nbprof

    with pytest.raises(nbprof.OptionError, match="keep must be a count"):
        nbprof.trace_handler(keep=-1)


@pytest.mark.slow
def test_in_a_kernel_the_saved_notebook_holds_the_last_cycles_report(tmp_path):
    """A real kernel: torch's loop in a notebook cell; the display updates reach the notebook
    nbclient saves, which holds one report, the last cycle's, with the tables' library."""
    nbformat = pytest.importorskip("nbformat")
    NotebookClient = pytest.importorskip("nbclient").NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import nbprof\nh = nbprof.trace_handler()\n" + LOOP.replace("repeat=2", "repeat=3")
                                          .replace("range(10)", "range(14)"))]
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for o in nb.cells[0].outputs if o.output_type == "display_data"]
    assert len(outputs) == 1
    text = outputs[0].data["text/plain"]
    assert text.startswith("torch profile") and "cycle 3 of the schedule" in text
    assert "nbprofUnzip" in outputs[0].data["text/html"]  # the first report of the kernel: the library stays
