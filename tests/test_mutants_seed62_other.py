"""What seed 62's sample of mutants (docs/testing.md) showed no test held, each against an answer of
its own: a folder of ranks written by hand, pstats of the files cProfile wrote, IPython's own list
of post_run_cell hooks, the exception the cell raised, torch's own profiler started inside a cell."""

from __future__ import annotations

import cProfile
import gc
import os
import pstats

import pytest

import nbprof

from .conftest import needs_torch, run
from .test_cluster import cpu_only_folder


def test_a_folder_of_ranks_repr_counts_its_events_and_self_cpu(tmp_path):
    """Three CPU-only ranks written by hand, each an aten::mm (100, 130, 100 µs) and an aten::relu
    (10 µs): 6 events, self CPU 100 + 10 + 130 + 10 + 100 + 10 = 360 µs = 0.360 ms, no device."""
    p = nbprof.load_trace(cpu_only_folder(tmp_path / "cpu"), workers=0, progress=False)
    assert repr(p) == "<ClusterProfile 3 ranks, 6 events, self CPU 0.360 ms>"


def test_a_zoom_reads_the_cache_made_at_load_and_leaves_nothing_behind(tmp_path, monkeypatch):
    """A zoom of a folder's timeline reads each rank from the cache written when the folder was
    loaded: no other folder appears in the cache root ($NBPROF_CACHE_DIR) while zooming, and once
    the profile is gone nothing of this session is left there (a rank's trace file read again into
    a cache of its own would stay behind)."""
    from .test_cluster_timeline import nccl

    root = tmp_path / "cache"
    monkeypatch.setenv("NBPROF_CACHE_DIR", str(root))
    p = nbprof.load_trace(nccl(tmp_path), workers=0, progress=False)
    loaded = sorted(os.listdir(root))
    assert len(loaded) == 1  # the folder's caches, one folder of them
    tl = p._timeline()
    full = p.timeline_view().data
    window = tl.window(full.t0_us, full.t1_us)
    assert window.events_drawn > 0
    assert sorted(os.listdir(root)) == loaded
    del p, tl, full, window
    gc.collect()
    assert os.listdir(root) == []


def _fact(n: int) -> int:
    return 1 if n <= 1 else n * _fact(n - 1)


def _profile(path, calls: list[int]) -> None:
    prof = cProfile.Profile()
    prof.enable()
    for n in calls:
        _fact(n)
    prof.disable()
    prof.dump_stats(str(path))


def test_comparing_python_profiles_by_primitive_calls_totals_pstats_primitive_calls(tmp_path):
    """Before: _fact(5) twice (10 calls, 2 primitive: the recursive ones are not); after: _fact(3)
    once (3 calls, 1 primitive). Compared by primitive calls, the totals are the sums of pstats'
    primitive call counts (``cc``) over each file's functions, and _fact's row is 2 -> 1."""
    _profile(tmp_path / "b.prof", [5, 5])
    _profile(tmp_path / "a.prof", [3])
    want = [sum(v[0] for v in pstats.Stats(str(tmp_path / f)).stats.values()) for f in ("b.prof", "a.prof")]
    c = nbprof.compare(tmp_path / "b.prof", tmp_path / "a.prof", metric="primitive_calls")
    assert c.summary.metric == "primitive_calls"
    assert (c.summary.total_before, c.summary.total_after) == (want[0], want[1])
    assert c.summary.speedup == pytest.approx(want[0] / want[1])
    row = c.table.set_index("function").loc["_fact"]
    assert (row["primitive_calls_before"], row["primitive_calls_after"]) == (2, 1)


def _hf_shell(shell, tmp_path):
    pytest.importorskip("transformers")
    from .test_huggingface import SETUP

    result, _ = run(shell, SETUP + f"folder = {str(tmp_path / 'out')!r}")
    assert result.error_in_exec is None, result.error_in_exec
    return shell


@needs_torch
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
def test_a_training_that_raises_says_so_in_its_report(shell, tmp_path):
    """A training whose first optimizer step raises (a callback of the user's) never calls
    on_train_end: the cell's end finishes the profile, and its report names the cell's own
    exception, the ValueError('boom') IPython got from the cell."""
    sh = _hf_shell(shell, tmp_path)
    code = ("class Boom(TrainerCallback):\n    def on_step_end(self, args, state, control, **kw):\n"
            "        raise ValueError('boom')\n"
            "cb = ProfilerCallback(wait=0, warmup=0, active=2, show=False)\ntrainer([cb, Boom()], 2, folder).train()")
    result, _ = run(sh, code)
    assert type(result.error_in_exec) is ValueError and str(result.error_in_exec) == "boom"
    p = sh.user_ns["cb"].profile
    assert "the training raised (ValueError: boom); this report shows what was recorded until then" in p.meta.notes


@needs_torch
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
def test_a_finished_training_leaves_no_hook_in_the_shell(shell, tmp_path):
    """The callback hooks the cell's end while its training runs (a training that raises never
    calls on_train_end); once the training ended, IPython's own list of post_run_cell hooks holds
    none of the callback's (else the shell would keep the callback and its profile for good)."""
    sh = _hf_shell(shell, tmp_path)
    hooks = sh.events.callbacks["post_run_cell"]
    result, _ = run(sh, "cb = ProfilerCallback(wait=0, warmup=0, active=1, show=False)\n"
                        "trainer([cb], 1, folder).train()")
    assert result.error_in_exec is None, result.error_in_exec
    cb = sh.user_ns["cb"]
    assert cb.profile is not None
    assert not any(getattr(h, "__self__", None) is cb for h in hooks)


@needs_torch
def test_a_torch_profiler_started_in_a_torchprof_cell_ended_its_session(shell):
    """``with torch.profiler.profile()`` inside a %%torchprof cell: torch runs one profiler at a
    time, so the inner one ended nbprof's session (not "replaced", the word for a Python profile
    function); the inner profiler's own results hold the matmul (torch's key_averages)."""
    result, _ = run(shell, "%%torchprof -q -o p\nimport torch\nx = torch.randn(8, 8)\n"
                           "with torch.profiler.profile() as inner:\n    y = x @ x\n'value'")
    assert result.error_in_exec is None and result.result == "value"
    [note] = [n for n in shell.user_ns["p"].meta.notes if n.startswith("another torch profiler")]
    assert " into the cell and ended nbprof's torch session (torch runs one profiler at a time)" in note
    assert "replaced" not in note
    assert "aten::mm" in {e.key for e in shell.user_ns["inner"].key_averages()}
