from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
TRACES = ("cnn_train_cuda", "transformer_infer_stack", "cnn_cuda_toggled", "two_streams")
HAS_TORCH = importlib.util.find_spec("torch") is not None
# what a run of scripts/gpu-check.sh on a GPU kept (docs/testing.md, "The GPU check"); NBPROF_GPU_DATA
# points the tests that read it elsewhere (the check's own run, its dry run's recordings)
GPU_DATA = Path(os.environ.get("NBPROF_GPU_DATA") or DATA / "gpu")

needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed in this environment")


# torch's FunctionEventAvg attribute -> our key_averages column
TORCH_FIELDS = {
    "count": "count",
    "cpu_time_total": "cpu_total_us",
    "self_cpu_time_total": "self_cpu_us",
    "device_time_total": "device_total_us",
    "self_device_time_total": "self_device_us",
    "cpu_memory_usage": "cpu_mem_bytes",
    "self_cpu_memory_usage": "self_cpu_mem_bytes",
    "device_memory_usage": "device_mem_bytes",
    "self_device_memory_usage": "self_device_mem_bytes",
}


def union_length(intervals) -> float:
    """Total length covered by [start, end] intervals: a plain loop, independent of nbprof's
    vectorized unions."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


# ------------------------------------------------------- environments the slow tests build


def cache_root() -> Path:
    """Where the slow tests keep the environments they build (Binder's, the other Pythons'),
    shared by every checkout and run: a clean clone in CI reuses them. NBPROF_TEST_CACHE, default
    ~/.cache/nbprof-tests."""
    return Path(os.environ.get("NBPROF_TEST_CACHE", Path.home() / ".cache" / "nbprof-tests"))


def project_table(pyproject: Path) -> str:
    """pyproject.toml up to its [tool.*] settings: what pip resolves an environment from. Cached test
    environments are keyed by this, so that a change to the pytest or type checker settings does
    not rebuild them (nbprof itself is reinstalled from the working tree on every run)."""
    return pyproject.read_text(encoding="utf-8").split("\n[tool.", 1)[0]


def package_copy(dest: Path) -> Path:
    """The repository root as pip installs it (`pip install .`), copied so that building it does
    not write into the working tree."""
    root = Path(__file__).resolve().parent.parent
    src = dest / "nbprof-src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (root / name).exists():
            shutil.copy2(root / name, src / name)
    shutil.copytree(root / "nbprof", src / "nbprof", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return src


def pip_install(python: Path, *args: str, timeout: float = 900) -> None:
    result = subprocess.run([str(python), "-m", "pip", "install", "-q", *args], capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"pip install {' '.join(args)}:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"


def without_pythonpath() -> dict[str, str]:
    """This process's environment for another environment's Python: without PYTHONPATH (a checkout
    on it, a worktree under test, would shadow the nbprof installed there) and without VIRTUAL_ENV
    (which names this Python's venv, see ``_subprocesses_run_this_python``)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def trace_path(name: str) -> Path:
    return DATA / f"{name}.trace.json.gz"


def gpu_traces() -> list[Path]:
    """torch's traces a GPU check run kept (``<name>.trace.json.gz`` beside ``<name>.oracle.json``),
    every folder of it; [] where none was kept."""
    if not GPU_DATA.is_dir():
        return []
    return sorted(p for p in GPU_DATA.rglob("*.trace.json.gz") if oracle_path(p).is_file())


def oracle_path(trace: Path) -> Path:
    return trace.with_name(trace.name.replace(".trace.json.gz", ".oracle.json"))


def gpu_params(paths: list, what: str) -> list:
    """pytest parameters for recorded GPU files, or one skipped one saying none is there."""
    if paths:
        return [pytest.param(p, id=str(p.relative_to(GPU_DATA)) if isinstance(p, Path) else str(p)) for p in paths]
    return [pytest.param(None, marks=pytest.mark.skip(reason=f"no {what} in {GPU_DATA}: a GPU check run keeps them "
                                                              "(scripts/gpu-check.sh, docs/testing.md)"))]


def oracle(name: str) -> dict:
    with open(DATA / f"{name}.oracle.json") as f:
        return json.load(f)


@pytest.fixture(scope="session")
def ip():
    """A real IPython shell (IPython's own test shell) with nbprof loaded."""
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    # start_ipython() starts a shell once per process and returns None after: pytest run twice in
    # one process (mutmut's runs, scripts/mutation.sh) gets the shell the first run started
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "nbprof")
    yield shell


@pytest.fixture
def shell(ip):
    """The shell, checked clean before and after each test: no profiler left running."""
    _assert_idle()
    ip.run_line_magic("load_ext", "nbprof")
    yield ip
    _assert_idle()


@pytest.fixture(scope="session")
def tutorial_runs(tmp_path_factory):
    """Each tutorial notebook run once for the whole session (tests/tutorials.py): the students'
    notebooks in JupyterLab in headless Chromium when it is installed, the solutions with nbclient."""
    from . import lab
    from .tutorials import TutorialRuns

    runs = TutorialRuns(tmp_path_factory.mktemp("tutorials"), use_browser=lab.chromium_available())
    yield runs
    runs.close()


def _assert_idle() -> None:
    from nbprof.run import runner

    assert runner.active() is None, "a profiled run was left active"
    assert sys.getprofile() is None, "a Python profiler was left running"
    if "torch" in sys.modules:
        import torch

        assert not torch.autograd._profiler_enabled(), "a torch profiler was left running"


def run(shell, code: str, store_history: bool = True):
    """Run a cell; return (ExecutionResult, captured outputs). Kernels store history."""
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        result = shell.run_cell(code, store_history=store_history)
    return result, captured


def reports(captured) -> list[dict]:
    """The mime bundles of nbprof reports among a cell's display outputs."""
    out = []
    for o in captured.outputs:
        text = o.data.get("text/plain", "")
        if text.startswith(("torch profile", "cProfile")):
            out.append(o.data)
    return out


os.environ.setdefault("NBPROF_TESTING", "1")


def _subprocesses_run_this_python() -> None:
    """The tests start this Python (``sys.executable``) in subprocesses: IPython shells, kernels,
    scripts. Run from a shell where another virtualenv is activated, VIRTUAL_ENV would name that
    one, and IPython would warn "Attempting to work in a virtualenv" on the stderr of every shell
    and kernel (which the tests that read a process's stderr whole take for nbprof's output) and
    put the other venv's packages on sys.path, in the test shell of this process too. So
    VIRTUAL_ENV names this Python's own venv, as activating it would, or none outside a venv. Run
    when pytest loads this file, before any shell starts."""
    if sys.prefix != sys.base_prefix:
        os.environ["VIRTUAL_ENV"] = sys.prefix
    else:
        os.environ.pop("VIRTUAL_ENV", None)


_subprocesses_run_this_python()


def frames_equal(a, b) -> None:
    """Two events tables hold the same columns, dtypes and values (categoricals by their text)."""
    import numpy as np
    import pandas as pd

    assert list(a.columns) == list(b.columns)
    for c in a.columns:
        x, y = a[c], b[c]
        if isinstance(x.dtype, pd.CategoricalDtype):
            assert isinstance(y.dtype, pd.CategoricalDtype), c
            assert x.astype(str).tolist() == y.astype(str).tolist(), c
        else:
            assert x.dtype == y.dtype, c
            np.testing.assert_array_equal(x.to_numpy(), y.to_numpy(), err_msg=c)


# Fast-tier tests that need what only some systems have, skipped elsewhere with the reason (the
# CI's macOS and Windows jobs run the rest: docs/platforms.md). Found by reading the tests; the
# first run on those systems may name more.
NEEDS_SYSTEM: dict[str, tuple[tuple[str, ...], str]] = {
    "tests/test_boundaries.py::test_a_timeline_far_from_zero_draws_its_ticks_and_ends":
        (("linux",), "caps a child's address space (resource.RLIMIT_AS, enforced on Linux only)"),
    "tests/test_hostile_traces.py::test_a_gzip_bomb_is_one_line_within_seconds_in_bounded_memory":
        (("linux",), "caps a child's address space (resource.RLIMIT_AS, enforced on Linux only)"),
    "tests/test_progress.py::test_in_a_terminal_one_line_redrawn":
        (("linux", "darwin"), "a POSIX pseudo-terminal (pexpect.spawn)"),
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        need = NEEDS_SYSTEM.get(item.nodeid.split("[")[0])
        if need is not None and not sys.platform.startswith(need[0]):
            item.add_marker(pytest.mark.skip(reason=f"needs {' or '.join(need[0])}: {need[1]}"))
        if "tutorial_runs" in getattr(item, "fixturenames", ()):
            # under pytest-xdist (--dist loadgroup, the full tier) every check of a tutorial's one
            # run goes to one worker: each worker would otherwise run the notebooks again
            item.add_marker(pytest.mark.xdist_group("tutorials"))
