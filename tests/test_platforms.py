"""Windows and macOS, simulated on Linux: the platform facts each test changes (``sys.platform``,
the ``signal`` module, ``os.unlink`` / ``os.replace`` refusing as Windows does, IPython's table of
cell files as Windows writes it, ``torch.mps`` on an Apple-silicon Mac) are monkeypatched; the code
under test is nbprof's own, unchanged. The answers are Windows', Python's and torch's documented
behaviour (named in each test) and hand-worked numbers. The CI workflow (.github/workflows/ci.yml)
runs the fast tier, these included, on real Windows and macOS machines; docs/platforms.md says
what was verified where.
"""

from __future__ import annotations

import ast
import concurrent.futures as cf
import concurrent.futures.process  # noqa: F401  # its _MAX_WINDOWS_WORKERS
import gc
import multiprocessing.connection  # noqa: F401  # before sys.platform is changed (it reads it at import)
import os
import signal
import sys
import time
import types
from pathlib import Path

import pytest

import nbprof  # noqa: F401
import nbprof.cluster  # noqa: F401  # imported as on this platform; the tests change the facts they ask at run time
import nbprof.cluster.loading  # noqa: F401
import nbprof.cluster.timeline  # noqa: F401

from .conftest import run
from .synthetic import Trace

ROOT = Path(__file__).resolve().parents[1]


def windows_sharing_violation(path: object) -> PermissionError:
    """The error Windows raises for a file another handle holds: ``[WinError 32] The process
    cannot access the file because it is being used by another process``."""
    e = PermissionError(13, "The process cannot access the file because it is being used by another process",
                        str(path))
    e.winerror = 32  # type: ignore[attr-defined]  # set by Python on Windows only
    return e


# -- dead workers: Windows has no SIGKILL ------------------------------------------------------------


@pytest.fixture
def no_sigkill(monkeypatch):
    """The ``signal`` module as on Windows: no ``SIGKILL`` (SIGTERM, SIGINT, SIGABRT... remain)."""
    monkeypatch.delattr(signal, "SIGKILL")
    monkeypatch.setattr(sys, "platform", "win32")


def death_message(tmp_path: Path, exitcode: int) -> str:
    """The load's message for a worker that ended with ``exitcode`` while reading rank 1."""
    import multiprocessing

    from nbprof.cluster.loading import death_message
    from nbprof.cluster.workers import death_of

    files = []
    for r in range(3):
        f = tmp_path / f"rank{r}.json"
        f.write_bytes(b"x" * 2048)
        files.append(str(f))
    started = multiprocessing.get_context("spawn").SimpleQueue()
    started.put((4242, 1))  # what the worker sent as it started rank 1
    worker = types.SimpleNamespace(pid=4242, exitcode=exitcode)  # a dead process, as multiprocessing reports it
    return death_message(files, death_of([worker], started), left=2)


def test_a_worker_that_crashed_on_windows_is_one_line(tmp_path, no_sigkill):
    """Before: ``AttributeError: module 'signal' has no attribute 'SIGKILL'`` instead of the message.
    0xC0000005 is STATUS_ACCESS_VIOLATION, the exit code of a Windows process that crashed."""
    msg = death_message(tmp_path, 0xC0000005)
    assert msg == (f"{tmp_path}: a worker process crashed with 0xC0000005 (an access violation) while reading "
                   "rank1.json (2.00 KiB on disk); 2 of 3 ranks not read")


def test_a_worker_out_of_memory_on_windows_says_so(tmp_path, no_sigkill):
    """0xC0000017 is STATUS_NO_MEMORY: Windows has no out-of-memory killer, an allocation fails."""
    msg = death_message(tmp_path, 0xC0000017)
    assert msg.startswith(f"{tmp_path}: a worker process crashed with 0xC0000017 (running out of memory) while "
                          "reading rank1.json (2.00 KiB on disk): it ran out of memory; ")
    assert "try fewer workers= (now 1;" in msg and "\n" not in msg


def test_a_worker_that_exited_on_windows(tmp_path, no_sigkill):
    assert death_message(tmp_path, 3).endswith("a worker process exited with code 3 while reading rank1.json "
                                               "(2.00 KiB on disk); 2 of 3 ranks not read")


def test_the_sigkill_message_on_linux_is_unchanged(tmp_path):
    msg = death_message(tmp_path, -signal.SIGKILL)
    assert msg.startswith(f"{tmp_path}: a worker process was killed by SIGKILL while reading rank1.json (2.00 KiB "
                          "on disk): the out-of-memory killer sends SIGKILL, so it most likely ran out of memory;")


def test_no_posix_only_name_on_a_path_windows_takes():
    """The package's source names none of the POSIX-only things Windows lacks, outside the one
    module that asks the platform (``nbprof/system.py``) and torch_live's /dev/shm (guarded by
    ``os.statvfs``, which Windows lacks too: tested below)."""
    posix_only = ("signal.SIGKILL", "signal.SIGQUIT", "signal.SIGHUP", "signal.SIGUSR1", "os.fork", "os.getuid",
                  "os.getpgid", "os.killpg", "os.setsid", "os.sched_getaffinity", "os.kill", "fcntl", "resource.",
                  "os.replace")
    found = []
    for path in sorted((ROOT / "nbprof").rglob("*.py")):
        if path.name == "system.py":
            continue
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                name = ast.unparse(node)
                if any(name == p or name.startswith(p) for p in posix_only):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(m in ("fcntl", "resource", "pwd", "grp", "termios") for m in mods):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: import {mods}")
    assert found == []


# -- worker counts ---------------------------------------------------------------------------------


def rank_files(tmp_path: Path, n: int) -> list[str]:
    files = []
    for r in range(n):
        f = tmp_path / f"r{r}.json"
        f.write_text("{}")
        files.append(str(f))
    return files


@pytest.fixture
def big_folders(monkeypatch):
    """Every folder big enough for worker processes (the plan's size rule is not under test)."""
    from nbprof.cluster import loading

    monkeypatch.setattr(loading, "IN_PROCESS_BYTES", 0)


def test_windows_starts_at_most_61_workers(tmp_path, monkeypatch, big_folders):
    """A ProcessPoolExecutor on Windows takes at most 61 workers (``ValueError: max_workers must be
    <= 61``, the stdlib's ``_MAX_WINDOWS_WORKERS``): a 128-core Windows machine, 100 ranks."""
    from nbprof.cluster.loading import plan

    assert cf.process._MAX_WINDOWS_WORKERS == 61  # the stdlib's own limit
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # Windows has none
    monkeypatch.delattr(os, "process_cpu_count", raising=False)  # Python < 3.13
    monkeypatch.setattr(os, "cpu_count", lambda: 128)
    files = rank_files(tmp_path, 100)
    assert plan(files) == (61, None)
    assert plan(files, workers=100) == (61, None)  # asked for explicitly: what the pool takes
    assert plan(files, workers=8) == (8, None)


def test_linux_takes_the_cpus_this_process_may_use(tmp_path, monkeypatch, big_folders):
    """A job given 4 of a machine's 128 cores (Slurm, taskset, a container's cpuset): 4 workers,
    not 128. Linux's affinity mask is the oracle (``os.sched_getaffinity``)."""
    from nbprof.cluster.loading import plan

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delattr(os, "process_cpu_count", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 128)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert plan(rank_files(tmp_path, 100)) == (4, None)


def test_python_313s_process_cpu_count_comes_first(tmp_path, monkeypatch, big_folders):
    from nbprof.cluster.loading import plan

    monkeypatch.setattr(os, "process_cpu_count", lambda: 6, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 128)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(128)), raising=False)
    assert plan(rank_files(tmp_path, 100)) == (6, None)


def test_macos_without_affinity_uses_cpu_count(tmp_path, monkeypatch, big_folders):
    from nbprof.cluster.loading import plan

    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # macOS has none
    monkeypatch.delattr(os, "process_cpu_count", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 10)
    assert plan(rank_files(tmp_path, 100)) == (10, None)


# -- replacing a file that an antivirus holds ------------------------------------------------------


def real_rank_cache(tmp_path: Path) -> str:
    """A rank's timeline cache as a folder of ranks writes it (cluster.timeline.write_cache)."""
    from nbprof.cluster.timeline import write_cache

    t = Trace()
    for k in range(20):
        t.op(f"aten::op{k % 3}", 10.0 * k, 5.0)
    p = t.load(tmp_path)
    folder = tmp_path / "cache"
    write_cache(folder, p._events, p.meta)
    return str(folder)


def test_a_replace_is_tried_again_while_windows_reports_a_sharing_violation(tmp_path, monkeypatch):
    """An antivirus scanning the file just written holds it for a moment: ``os.replace`` fails with
    WinError 32, then succeeds. Before: the PermissionError reached the user (a zoom failed)."""
    from nbprof.cluster.timeline import _RankCache

    folder = real_rank_cache(tmp_path)
    real_replace = os.replace
    calls: list[str] = []

    def held_twice(src, dst):
        calls.append(str(dst))
        if len(calls) <= 2:
            raise windows_sharing_violation(dst)
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", held_twice)
    monkeypatch.setattr(time, "sleep", lambda s: None)
    rows, row_table, lanes = _RankCache(folder).layout()
    assert len(calls) == 3 and calls[-1].endswith("layout.pkl")
    assert os.path.exists(os.path.join(folder, "layout.pkl"))
    assert not [f for f in os.listdir(folder) if f.startswith("layout.pkl.")]  # the temporary file went
    assert len(rows) == 20 and len(row_table) > 0


def test_a_replace_that_keeps_failing_or_fails_otherwise_raises(tmp_path, monkeypatch):
    from nbprof import system

    src, dst = tmp_path / "a", tmp_path / "b"
    src.write_text("new")
    waits: list[float] = []
    monkeypatch.setattr(system, "time", types.SimpleNamespace(sleep=waits.append))  # its waits, not taken

    def always_held(a, b):
        raise windows_sharing_violation(b)

    monkeypatch.setattr(os, "replace", always_held)
    with pytest.raises(PermissionError):
        system.replace_file(src, dst)
    assert len(waits) == system.REPLACE_TRIES - 1 and sum(waits) < 0.5  # a few tries, well under a second

    def posix_permission(a, b):  # a POSIX EACCES (no winerror): no point in waiting
        raise PermissionError(13, "Permission denied", str(b))

    waits.clear()
    monkeypatch.setattr(os, "replace", posix_permission)
    with pytest.raises(PermissionError):
        system.replace_file(src, dst)
    assert waits == []


# -- is a process alive, on Windows ------------------------------------------------------------------


def test_stale_cache_folders_on_windows_never_signal_a_process(tmp_path, monkeypatch):
    """On Windows ``os.kill(pid, 0)`` sends CTRL_C_EVENT (signal 0) to that console process group
    (Python's docs, os.kill), or fails with OSError: the cache's clean-up must not call it there.
    Before: os.kill(pid, 0) was called for every other process's folder."""
    from nbprof import system
    from nbprof.cluster import timeline as cluster_timeline

    monkeypatch.setenv("NBPROF_CACHE_DIR", str(tmp_path))
    prefix = cluster_timeline._prefix().rsplit("-", 2)[0] + "-"
    (tmp_path / f"{prefix}111-gone").mkdir()
    (tmp_path / f"{prefix}222-running").mkdir()
    signals: list[tuple[int, int]] = []

    def kill(pid, sig):
        signals.append((pid, sig))
        raise OSError(87, "The parameter is incorrect")  # what Windows answers for most pids

    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(os, "kill", kill)
    # the Windows API's answer (OpenProcess + GetExitCodeProcess), the platform fact simulated
    monkeypatch.setattr(system, "_windows_process_alive", lambda pid: pid == 222)
    new = cluster_timeline.new_cache_dir()
    assert signals == []
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != os.path.basename(new)) == [f"{prefix}222-running"]


# -- the live profile's trace file: Windows removes no open file -----------------------------------


@pytest.fixture
def windows_files(monkeypatch, tmp_path):
    """Files as Windows treats them: a file open in this process cannot be removed (WinError 32),
    no ``os.statvfs`` (so no /dev/shm either), the temporary folder in ``tmp_path``."""
    import tempfile

    psutil = pytest.importorskip("psutil")
    me = psutil.Process()
    real_unlink = os.unlink

    def unlink(path, *args, **kwargs):
        target = os.path.realpath(path)
        if any(os.path.realpath(f.path) == target for f in me.open_files()):
            raise windows_sharing_violation(path)
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    monkeypatch.setattr(os, "remove", unlink)
    monkeypatch.delattr(os, "statvfs", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("nbprof-"))


def test_a_live_profile_leaves_no_trace_file_on_windows(shell, windows_files):
    """Before: the trace was unlinked while open, which Windows refuses (caught and ignored), so
    every live profile left its trace in %TEMP%. Now it is closed, then removed, with the profile;
    until then torch's own export (which reads it) works."""
    run(shell, "import torch\nx = torch.randn(64, 64)")
    result, _ = run(shell, "%%torchprof -q -o p_win\ny = x @ x")
    assert result.error_in_exec is None
    p = shell.user_ns["p_win"]
    assert "aten::mm" in set(p.key_averages()["name"])
    assert len(leftovers(windows_files)) == 1  # open while the profile lives: Windows keeps its name
    out = windows_files / "export.json"
    p.profiler.export_chrome_trace(str(out))
    assert b"aten::mm" in out.read_bytes()
    del p
    shell.user_ns.pop("p_win")
    gc.collect()
    assert leftovers(windows_files) == []


def test_the_traces_of_processes_that_are_gone_are_removed(shell, windows_files, monkeypatch):
    """A kernel killed while its profile was open leaves its trace on Windows: the next profile
    removes it (its process is gone), never another live process's. nbprof asks "is this Windows"
    and Windows' answer about a process (OpenProcess): both simulated, the latter from the real
    process table (psutil)."""
    import subprocess

    import psutil

    from nbprof import system

    monkeypatch.setattr(system, "on_windows", lambda: True)
    monkeypatch.setattr(system, "_windows_process_alive", psutil.pid_exists)

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(gone.stdout)
    (windows_files / f"nbprof-{dead_pid}-abc.json").write_text("{}")
    (windows_files / f"nbprof-{os.getppid()}-def.json").write_text("{}")  # pytest's parent: alive
    run(shell, "import torch")
    result, _ = run(shell, "%%torchprof -q\ntorch.ones(3).sum()")
    assert result.error_in_exec is None
    gc.collect()
    assert leftovers(windows_files) == [f"nbprof-{os.getppid()}-def.json"]


# -- notebook cells' file names --------------------------------------------------------------------


def stack_trace(tmp_path: Path, cell_file: str, torch_file: str) -> Path:
    """A --stack trace: the cell's frame, torch's module call inside it, an op inside that, the
    frame names written as torch writes them ("file(line): function")."""
    t = Trace()
    t.events += [
        {"ph": "X", "cat": "python_function", "name": f"{cell_file}(3): <module>", "pid": 1000, "tid": 1000,
         "ts": 0.0, "dur": 100.0, "args": {"Python parent id": None, "Python id": 1}},
        {"ph": "X", "cat": "python_function", "name": f"{torch_file}(1775): _call_impl", "pid": 1000,
         "tid": 1000, "ts": 10.0, "dur": 80.0, "args": {"Python parent id": 1, "Python id": 2}},
    ]
    t.op("aten::mm", 20.0, 50.0)
    return t.write(tmp_path / "stack.json")


def stacks_of(shell, path: Path) -> list[str]:
    """The stacks ``%%torchprof --stack`` would show for this trace, run in this shell."""
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.run.runner import torch_profile
    from nbprof.settings import TorchOptions

    options = TorchOptions(stack=True)
    p = torch_profile(read_trace_file(str(path)), profiler=None, options=options, notes=[], wall_s=None,
                      shell=shell)
    table = p.key_averages("stack")
    return list(table.loc[table["name"] == "aten::mm", "stack"])


@pytest.fixture
def cell_map(shell):
    """IPython's table of cell files (``shell.compile._filename_map``), with entries added as
    ipykernel writes them on each platform (its compiler: ``<tempdir>/ipykernel_<pid>/<hash>.py``)."""
    table = shell.compile._filename_map
    added: list[str] = []

    def add(name: str, number: int) -> None:
        table[name] = number
        added.append(name)

    yield add
    for name in added:
        table.pop(name, None)


def test_a_windows_cell_file_is_named_as_its_cell(shell, cell_map, tmp_path):
    """Windows: IPython's table holds ``C:\\Users\\...\\ipykernel_4242\\3141592653.py``; the trace
    names it with ``/`` and its drive in another case. Torch's own frames there are written with
    ``\\`` (torch trims the sys.path prefix, os.sep included): they are torch's, not the user's.
    Before: the stack read "C:/Users/...(3): <module>" under torch's frame."""
    cell_map(r"C:\Users\Student\AppData\Local\Temp\ipykernel_4242\3141592653.py", 7)
    path = stack_trace(tmp_path, "c:/Users/Student/AppData/Local/Temp/ipykernel_4242/3141592653.py",
                       r"torch\nn\modules\module.py")
    assert stacks_of(shell, path) == ["In [7](3): <module>"]


def test_a_windows_cell_file_written_with_backslashes(shell, cell_map, tmp_path):
    cell_map(r"C:\Users\Student\AppData\Local\Temp\ipykernel_4242\2718281828.py", 9)
    path = stack_trace(tmp_path, r"C:\Users\Student\AppData\Local\Temp\ipykernel_4242\2718281828.py",
                       r"torch\nn\modules\module.py")
    assert stacks_of(shell, path) == ["In [9](3): <module>"]


def test_a_macos_cell_file_is_named_as_its_cell(shell, cell_map, tmp_path):
    """macOS: ipykernel's cells are under ``$TMPDIR`` (``/var/folders/<xx>/<id>/T``); ``/var`` is a
    link to ``/private/var``, so a resolved path names the same file."""
    cell_map("/var/folders/x4/6h2k_3d14fz0000gn/T/ipykernel_4242/1618033988.py", 4)
    path = stack_trace(tmp_path, "/var/folders/x4/6h2k_3d14fz0000gn/T/ipykernel_4242/1618033988.py",
                       "torch/nn/modules/module.py")
    assert stacks_of(shell, path) == ["In [4](3): <module>"]
    path = stack_trace(tmp_path, "/private/var/folders/x4/6h2k_3d14fz0000gn/T/ipykernel_4242/1618033988.py",
                       "torch/nn/modules/module.py")
    assert stacks_of(shell, path) == ["In [4](3): <module>"]


def test_windows_paths_in_labels_are_shortened():
    from nbprof.format import short_location
    from nbprof.views.timeline import _label_name

    assert _label_name(r"torch\nn\modules\module.py(1775): _call_impl", "python") == "_call_impl (module.py:1775)"
    assert short_location(r"C:\Users\me\proj\train.py:12(step)") == "…/proj/train.py:12(step)"


# -- Apple's MPS device, simulated -----------------------------------------------------------------


class SimulatedMps:
    """What ``torch.mps`` answers on an Apple-silicon Mac (a simulation: there is no Mac here).
    The counters are the platform's facts the cell changes (``allocate``); the events' elapsed time
    is what the device would report; nothing of nbprof's result is simulated."""

    def __init__(self, allocated: int = 0, driver: int = 0, elapsed_ms: float = 12.5) -> None:
        self.allocated, self.driver, self.elapsed_ms = allocated, driver, elapsed_ms
        self.events = 0
        self.synchronized = 0
        sim = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing
                sim.events += 1
                self.recorded = False

            def record(self) -> None:
                self.recorded = True

            def elapsed_time(self, end: "Event") -> float:
                assert self.recorded and end.recorded and sim.synchronized
                return sim.elapsed_ms

        self.Event = Event

    def allocate(self, tensors: int, pools: int) -> None:
        self.allocated, self.driver = tensors, pools

    def current_allocated_memory(self) -> int:
        return self.allocated

    def driver_allocated_memory(self) -> int:
        return self.driver

    def synchronize(self) -> None:
        self.synchronized += 1


@pytest.fixture
def mac(monkeypatch, shell):
    """An Apple-silicon Mac's torch: MPS available, ``torch.mps`` answering as ``SimulatedMps``."""
    import torch

    def make(**kwargs):
        sim = SimulatedMps(**kwargs)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
        for name in ("Event", "current_allocated_memory", "driver_allocated_memory", "synchronize"):
            monkeypatch.setattr(torch.mps, name, getattr(sim, name))
        shell.user_ns["mps_sim"] = sim
        return sim

    yield make
    shell.user_ns.pop("mps_sim", None)


MIB = 2**20


def test_a_cell_on_mps_says_what_torch_records_and_shows_device_time_and_memory(shell, mac):
    """Before: nothing said that torch records no MPS device work; no device time, no MPS memory."""
    sim = mac(allocated=1 * MIB, driver=8 * MIB, elapsed_ms=12.5)
    run(shell, "import torch")
    result, captured = run(shell, "%%torchprof -o p_mps\nx = torch.randn(32, 32)\ny = (x @ x).sum()\n"
                                  "mps_sim.allocate(3 * 2**20, 16 * 2**20)")
    assert result.error_in_exec is None
    p = shell.user_ns.pop("p_mps")
    assert sim.events == 2 and sim.synchronized >= 1
    assert p.meta.mps.device_time_us == pytest.approx(12_500.0)
    assert (p.meta.mps.allocated_before_bytes, p.meta.mps.allocated_after_bytes) == (MIB, 3 * MIB)
    assert (p.meta.mps.driver_before_bytes, p.meta.mps.driver_after_bytes) == (8 * MIB, 16 * MIB)
    text = p._repr_mimebundle_()["text/plain"]
    summary = text.splitlines()[0]
    assert "MPS device time 12.50 ms" in summary, summary
    assert "MPS memory 1.00 MiB → 3.00 MiB (driver 8.00 MiB → 16.00 MiB)" in summary, summary
    notes = [n for n in p.meta.notes if "MPS" in n]
    assert len(notes) == 1 and "records the ops' host side only (no MPS kernels, no device time)" in notes[0]
    assert "no MPS kernels" in p._repr_mimebundle_()["text/html"]
    assert "aten::mm" in set(p.key_averages()["name"])  # the profile itself is torch's, as on Linux


def test_the_first_mps_use_is_said_not_measured_and_metal_is_not_started_for_it(shell, mac):
    """A process whose driver holds no MPS memory yet: nbprof records no MPS event (that would
    start Metal in a process that may never use it); the cell then uses MPS for the first time."""
    sim = mac(allocated=0, driver=0)
    run(shell, "import torch")
    run(shell, "%%torchprof -q -o p_first\ny = torch.ones(4).sum()\nmps_sim.allocate(2**20, 4 * 2**20)")
    p = shell.user_ns.pop("p_first")
    assert sim.events == 0
    assert p.meta.mps is not None and p.meta.mps.device_time_us is None
    assert "MPS device time not measured (the first MPS use in this process: run it again)" in p._repr_mimebundle_()["text/plain"].splitlines()[0]


def test_a_step_that_frees_what_it_allocates_is_still_an_mps_cell(shell, mac):
    """A training step in steady state: the same tensors' memory before and after (its temporaries
    freed, the model's weights still there): the cell used MPS all the same."""
    sim = mac(allocated=4 * MIB, driver=32 * MIB, elapsed_ms=3.0)
    run(shell, "import torch")
    run(shell, "%%torchprof -q -o p_steady\ny = torch.ones(4).sum()")
    p = shell.user_ns.pop("p_steady")
    assert sim.events == 2 and p.meta.mps is not None and p.meta.mps.device_time_us == pytest.approx(3000.0)
    assert p.meta.mps.allocated_before_bytes == p.meta.mps.allocated_after_bytes == 4 * MIB


def test_a_cpu_cell_on_a_mac_says_nothing_about_mps(shell, mac):
    sim = mac(allocated=0, driver=0)
    run(shell, "import torch")
    run(shell, "%%torchprof -q -o p_cpu\ny = torch.ones(4).sum()")
    p = shell.user_ns.pop("p_cpu")
    assert sim.events == 0 and p.meta.mps is None
    assert "MPS" not in p._repr_mimebundle_()["text/plain"]


def mps_training_trace(tmp_path: Path):
    """A step on MPS as torch records it: the model's ops take little CPU time; ``.item()`` waits
    for the device (its ``aten::_local_scalar_dense``: 60 ms of the 100 ms span); a copy to the CPU
    waits too (``aten::copy_`` under ``aten::to``: 15 ms)."""
    t = Trace()
    t.op("aten::linear", 0.0, 10.0)
    t.op("aten::addmm", 1.0, 8.0)
    t.op("aten::relu", 10.0, 5.0)
    t.op("aten::item", 20.0, 60.5)
    t.op("aten::_local_scalar_dense", 20.2, 60.0)
    t.op("aten::to", 81.0, 15.5)
    t.op("aten::_to_copy", 81.1, 15.3)
    t.op("aten::copy_", 81.2, 15.0)
    t.op("aten::mul", 97.0, 3.0)
    for e in t.events:  # times in ms, as a training step's
        e["ts"] *= 1000.0
        e["dur"] *= 1000.0
    return t.write(tmp_path / "mps_step.json")


def test_findings_on_mps_do_not_call_a_wait_slow(tmp_path):
    """Hand-worked: self CPU times aten::_local_scalar_dense 60 ms, aten::copy_ 15 ms, aten::addmm
    8 ms, aten::relu 5 ms; the wait ops' self times are 60 + 0.5 (item) + 15 + 0.2 (to) + 0.3
    (_to_copy) = 76.0 ms of the 100 ms span. Before: top_op named aten::_local_scalar_dense
    ("takes 62% of self CPU time") and no finding said it was the device's work."""
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.meta import MpsRun
    from nbprof.model import TorchProfile

    trace = read_trace_file(str(mps_training_trace(tmp_path)))
    plain = TorchProfile.from_trace(trace)
    assert plain.findings.set_index("kind").loc["top_op", "evidence"]["op"] == "aten::_local_scalar_dense"

    trace = read_trace_file(str(mps_training_trace(tmp_path)))
    p = TorchProfile.from_trace(trace, mps=MpsRun(device_time_us=90_000.0, allocated_after_bytes=MIB))
    f = p.findings.set_index("kind")
    top = f.loc["top_op"]
    assert top["evidence"]["op"] == "aten::addmm"
    assert top["evidence"]["time_us"] == pytest.approx(8_000.0)
    # 76 ms of the 94 ms of self CPU time (the selfs: linear 2, addmm 8, relu 5, the waits 76, mul 3)
    assert ("Ops that wait for the MPS device (.item(), copies: 81% of it) are not named here: their time is the "
            "device's work.") in top["message"], top["message"]
    sync = f.loc["sync"]
    assert sync["severity"] == "high"
    assert sync["evidence"]["blocked_us"] == pytest.approx(76_000.0)
    assert sync["evidence"]["share_of_span"] == pytest.approx(0.76)
    assert sync["evidence"]["scalar_reads"] == 1
    # one call each of the five ops that wait (item, _local_scalar_dense, to, _to_copy, copy_)
    assert sync["evidence"]["calls"] == 5 and "in 5 calls of ops that wait for it" in sync["message"]
    assert sync["evidence"]["device"] == "mps"
    assert list(sync["evidence"]["by_op"])[:2] == ["aten::_local_scalar_dense", "aten::copy_"]
    assert "the device's work queued before them" in sync["message"]


def mps_profile(tmp_path: Path, wait_us: float, name: str = "aten::_local_scalar_dense"):
    """1000 µs of ops on MPS: ``aten::addmm`` for the rest, then ``wait_us`` in an op that waits
    for the device. The span is 1000 µs, and so is the self CPU time."""
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.meta import MpsRun
    from nbprof.model import TorchProfile

    t = Trace()
    t.op("aten::addmm", 0.0, 1000.0 - wait_us)
    t.op(name, 1000.0 - wait_us, wait_us)
    return TorchProfile.from_trace(read_trace_file(str(t.write(tmp_path / f"mps_{wait_us}.json"))), mps=MpsRun())


def finding(p, kind: str):
    rows = p.findings[p.findings["kind"] == kind]
    return None if rows.empty else rows.iloc[0]


@pytest.mark.parametrize("wait_us, said", [(10.0, True), (9.9, False)])
def test_top_op_says_the_waits_it_left_out_from_one_percent(tmp_path, wait_us, said):
    """MPS_WAIT_NOTE_SHARE = 0.01 of the 1000 µs of self CPU time: 10 µs is said, 9.9 µs not."""
    top = finding(mps_profile(tmp_path, wait_us), "top_op")
    assert top["evidence"]["op"] == "aten::addmm"
    assert ("Ops that wait for the MPS device (.item(), copies: 1% of it)" in top["message"]) is said


@pytest.mark.parametrize("wait_us, severity", [(49.9, None), (50.0, "medium"), (199.9, "medium"), (200.0, "high")])
def test_the_mps_waits_fire_at_the_sync_thresholds(tmp_path, wait_us, severity):
    """SYNC_MIN_SHARE = 0.05 and SYNC_HIGH_SHARE = 0.20 of the 1000 µs span: 50 µs and 200 µs."""
    sync = finding(mps_profile(tmp_path, wait_us, name="aten::copy_"), "sync")
    assert (None if sync is None else sync["severity"]) == severity
    if sync is not None:
        assert sync["evidence"]["blocked_us"] == pytest.approx(wait_us)
        assert sync["message"].startswith(f"The CPU waited for the MPS device up to {wait_us:.1f} µs")
        assert "in 1 call of ops that wait for it, most in aten::copy_" in sync["message"]


def test_without_mps_a_wait_op_is_named_as_before(tmp_path):
    """The same trace without an MPS run (a CPU profile, a trace file): nothing changes."""
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.model import TorchProfile

    t = Trace()
    t.op("aten::addmm", 0.0, 100.0)
    t.op("aten::_local_scalar_dense", 100.0, 900.0)
    p = TorchProfile.from_trace(read_trace_file(str(t.write(tmp_path / "cpu.json"))))
    assert finding(p, "top_op")["evidence"]["op"] == "aten::_local_scalar_dense" and finding(p, "sync") is None


# -- a CUDA build without CUPTI (torch 2.4-2.6 on Windows) -----------------------------------------


@pytest.mark.filterwarnings("ignore:CUDA is not available, disabling CUDA profiling")  # this machine has none
def test_cuda_without_cupti_says_the_trace_has_no_kernels(shell, monkeypatch):
    """torch.profiler.supported_activities()'s own doc: with CUDA but no CUPTI, ProfilerActivity.CUDA
    falls back to the legacy CUDA timing: CUDA time in torch's table, not in the trace. Simulated:
    CUDA available, CUPTI not (the activity missing from torch's supported set). Before: a report
    with no device time and no word why."""
    import torch
    from torch.profiler import ProfilerActivity

    from nbprof.collect import torch_live

    monkeypatch.setattr(torch_live, "cuda_available", lambda: True)
    monkeypatch.setattr(torch.autograd, "_supported_activities", lambda: {ProfilerActivity.CPU})
    run(shell, "import torch")
    result, _ = run(shell, "%%torchprof --cuda -o p_nocupti\ny = torch.ones(8, 8) @ torch.ones(8, 8)")
    assert result.error_in_exec is None
    p = shell.user_ns.pop("p_nocupti")
    assert p.meta.cuda_without_cupti
    notes = [n for n in p.meta.notes if "CUPTI" in n]
    assert len(notes) == 1 and "the trace has no kernels" in notes[0] and "key_averages()" in notes[0]


@pytest.mark.filterwarnings("ignore:CUDA is not available, disabling CUDA profiling")
def test_a_cuda_build_with_cupti_has_no_such_note(shell, monkeypatch):
    import torch
    from torch.profiler import ProfilerActivity

    from nbprof.collect import torch_live

    monkeypatch.setattr(torch_live, "cuda_available", lambda: True)
    monkeypatch.setattr(torch.autograd, "_supported_activities",
                        lambda: {ProfilerActivity.CPU, ProfilerActivity.CUDA})
    run(shell, "import torch")
    run(shell, "%%torchprof --cuda -q -o p_cupti\ny = torch.ones(8, 8) @ torch.ones(8, 8)")
    p = shell.user_ns.pop("p_cupti")
    assert not p.meta.cuda_without_cupti and not [n for n in p.meta.notes if "CUPTI" in n]


# -- the CI workflow ---------------------------------------------------------------------------------


def test_the_ci_workflow_runs_the_fast_tier_on_three_systems():
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    job = doc["jobs"]["fast"]
    matrix = job["strategy"]["matrix"]
    systems = set(matrix["os"]) | {i["os"] for i in matrix.get("include", [])}
    assert {"ubuntu-latest", "macos-latest", "windows-latest"} <= systems
    uses = [s["uses"] for s in job["steps"] if "uses" in s]
    assert "actions/checkout@v4" in uses and "actions/setup-python@v5" in uses
    commands = "\n".join(s.get("run", "") for s in job["steps"])
    assert 'not slow and not browser and not notebook' in commands
    assert ".[torch,test]" in commands or ".[test,torch]" in commands  # the project's own extras


def test_the_tests_skipped_on_other_systems_exist():
    """conftest.NEEDS_SYSTEM names tests by node id: a renamed test would leave a dead entry (and the
    test failing on macOS or Windows)."""
    from .conftest import NEEDS_SYSTEM

    for node in NEEDS_SYSTEM:
        file, name = node.split("::")
        tree = ast.parse((ROOT / file).read_text(encoding="utf-8"))
        assert name in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, node


def test_a_cell_file_added_or_run_again_after_a_run_is_named_by_its_number_now(shell, cell_map):
    """The table of cell files keyed by path is kept between runs and extended with the cells
    added since (a long session's whole table keyed again each run cost milliseconds a run): a
    cell added after a run is found, and a cell run again is named by its new number."""
    from nbprof.run.runner import _code_names

    first = r"C:\Users\Student\AppData\Local\Temp\ipykernel_4242\1111111111.py"
    later = r"C:\Users\Student\AppData\Local\Temp\ipykernel_4242\2222222222.py"
    cell_map(first, 3)
    assert _code_names(shell, {"c:/Users/Student/AppData/Local/Temp/ipykernel_4242/1111111111.py"}) == {
        "c:/Users/Student/AppData/Local/Temp/ipykernel_4242/1111111111.py": "In [3]"}
    cell_map(later, 5)
    cell_map(first, 8)  # the same code run again: IPython's table gives its file the new number
    assert _code_names(shell, {"c:/Users/Student/AppData/Local/Temp/ipykernel_4242/1111111111.py",
                               "C:/USERS/student/AppData/Local/Temp/ipykernel_4242/2222222222.py", "/usr/lib/x.py"}) == {
        "c:/Users/Student/AppData/Local/Temp/ipykernel_4242/1111111111.py": "In [8]",
        "C:/USERS/student/AppData/Local/Temp/ipykernel_4242/2222222222.py": "In [5]"}
