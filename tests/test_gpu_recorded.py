"""What a run of the GPU check (scripts/gpu-check.sh) kept under tests/data/gpu, checked where no GPU
is: the CUDA paths' checks of tests/gpu_checks.py, run on the recordings instead of the live
profiles. Each test skips while nothing is kept; NBPROF_GPU_DATA points them at another folder (the
check runs them on what it just recorded, and its dry run on recordings made of the H100 traces).

What a recording is: torch's ``export_chrome_trace`` (``<name>.trace.json.gz``), torch's
``key_averages()`` of the same live profile with what the check knew (``<name>.oracle.json``, its
``gpu_check``: the device, the ``.item()`` line, torch's count of scalar reads,
``torch.cuda.max_memory_allocated()``, the DataLoader's batches, whether ``clock_skew`` fired
live) and, where a view needs what only nbprof writes (the line table, the DataLoaders' records),
``p.save()`` of the same profile (``<name>.nbprof.json.gz``). The trace oracles
(tests/test_trace_oracles.py) and the kept snapshots (tests/test_gpu_snapshot.py) read the same
folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import nbprof

from . import gpu_checks as G
from .conftest import GPU_DATA, gpu_params, gpu_traces, oracle_path


def _recordings(key: str, folder: str | None = None) -> list[Path]:
    """Oracle files of recordings whose ``gpu_check`` has ``key`` (in ``folder`` of GPU_DATA)."""
    root = GPU_DATA / folder if folder else GPU_DATA
    if not root.is_dir():
        return []
    out = []
    for path in sorted(root.glob("*.oracle.json")):
        if key in json.loads(path.read_text()).get("gpu_check", {}):
            out.append(path)
    return out


def _load(oracle_file: Path) -> tuple[dict, dict]:
    o = json.loads(oracle_file.read_text())
    return o, o["gpu_check"]


def _trace(oracle_file: Path) -> Path:
    return oracle_file.with_name(oracle_file.name.replace(".oracle.json", ".trace.json.gz"))


def _doc(oracle_file: Path, nbprof_file: Path) -> dict:
    """torch's trace of the recording, or (a hand-made one, no torch trace) the file nbprof saved."""
    trace = _trace(oracle_file)
    return G.read_trace(trace if trace.is_file() else nbprof_file)


@pytest.mark.parametrize("oracle_file", gpu_params(_recordings("item_source"), "--lines recordings"))
def test_lines_of_a_recorded_training_loop(oracle_file):
    """``--cuda --lines``: each ``.item()`` on its line (torch's count of them); on a GPU the per-line
    device time sums to torch's device records and ``sync_line`` names the ``.item()`` line."""
    _, gc = _load(oracle_file)
    nbprof_file = oracle_file.parent / gc["nbprof"]
    p = nbprof.load_trace(nbprof_file)
    G.check_item_line(p, gc["item_source"], gc["item_calls"], gc["item_reads"])
    if gc["device"] == "cuda":
        G.check_lines_device_sum(p, _doc(oracle_file, nbprof_file))
        if gc.get("sync_line"):
            G.check_sync_line(p, gc["item_source"])


@pytest.mark.parametrize("oracle_file", gpu_params(_recordings("memory"), "--memory recordings"))
def test_memory_peak_of_a_recording(oracle_file):
    """``--memory``: the CUDA curve of torch's trace, its peak the ``torch.cuda.max_memory_allocated()``
    the run read after the cell."""
    _, gc = _load(oracle_file)
    trace = _trace(oracle_file)
    G.check_memory_peak(nbprof.load_trace(trace), G.read_trace(trace), gc.get("max_memory_allocated"))


def _first_profiles() -> list[Path]:
    """The recordings that were their process's first CUDA profile (each step runs in a fresh process)."""
    out = []
    for trace in gpu_traces():
        if trace.parent != GPU_DATA:
            continue  # repeat/, toggle/: later profiles of a process
        gc = json.loads(oracle_path(trace).read_text()).get("gpu_check", {})
        if gc.get("cuda_profile") in (None, 1):
            out.append(trace)
    return out


@pytest.mark.parametrize("trace", gpu_params(_first_profiles(), "first-profile recordings"))
def test_a_first_profile_has_no_clock_skew(trace):
    """A process's first CUDA profile: torch's clocks agree, by the JSON, and the finding is quiet."""
    assert G.bug_reasons(G.clock_facts(G.read_trace(trace))) == []
    assert not G.fired(nbprof.load_trace(trace))


def _repeat_cells() -> list[Path]:
    files = _recordings("repeat", "repeat")
    return sorted(files, key=lambda f: json.loads(f.read_text())["gpu_check"]["repeat"])


@pytest.mark.parametrize("cells", gpu_params([tuple(_repeat_cells())] if _repeat_cells() else [], "repeat recordings"))
def test_repeat_profiles_against_the_bug(cells):
    """The same cell profiled N times in one process: loaded from torch's files, the ``clock_skew``
    finding fires on each exactly as it did live, and exactly where torch's bug shows in its JSON
    against the first profile (the verdict of the run, made again)."""
    docs, fired = [], []
    for oracle_file in cells:
        _, gc = _load(oracle_file)
        trace = _trace(oracle_file)
        docs.append(G.read_trace(trace))
        fired.append(G.fired(nbprof.load_trace(trace)))
        assert fired[-1] == gc["clock_skew_fired"], (oracle_file.name, "live and loaded disagree")
    G.check_repeat(docs, fired)


@pytest.mark.parametrize("oracle_file", gpu_params(_recordings("cuda_profiles_before", "toggle"), "toggle recordings"))
def test_cuda_paused_inside_a_recorded_cell(oracle_file):
    """``nbprof.cuda_collection(False)`` ... ``(True)`` in a cell: nothing of CUDA in the paused
    window of torch's trace, both runtime calls and device records in the others (their windows
    as the run found them: its ``record_function`` ranges)."""
    _, gc = _load(oracle_file)
    trace = _trace(oracle_file)
    windows = {k: tuple(v) for k, v in gc["windows"].items()}
    G.check_in_cell_toggle(nbprof.load_trace(trace), G.read_trace(trace), windows, off=gc["paused"])


@pytest.mark.parametrize("oracle_file", gpu_params(_recordings("batches"), "DataLoader recordings"))
def test_data_loading_of_a_recording(oracle_file):
    """A DataLoader with workers and pinned memory: its batches from the saved profile, the copies
    from pinned memory in torch's trace."""
    _, gc = _load(oracle_file)
    nbprof_file = oracle_file.parent / gc["nbprof"]
    G.check_data_loading(nbprof.load_trace(nbprof_file), gc["batches"], gc["workers"],
                         _doc(oracle_file, nbprof_file), gc.get("pinned", False))
