"""What differs between Linux, macOS and Windows, in one place: how many worker processes this
process may start, replacing a file, whether a process is alive, how a dead process ended.

Every function asks the platform at call time (``sys.platform``, ``os.name``, the ``signal``
module), never at import, so that tests/test_platforms.py can simulate Windows and macOS on Linux.

- **Workers.** ``os.cpu_count()`` counts the machine's CPUs, not the ones this process may use: a
  job scheduler (Slurm, ``taskset``, a container's cpuset) that gives a notebook 4 of 128 cores
  made nbprof start 128 workers on them. :func:`usable_cpus` asks ``os.process_cpu_count()``
  (Python 3.13+), else the affinity mask where the platform has one (Linux), else
  ``os.cpu_count()``. On Windows a ``ProcessPoolExecutor`` takes at most 61 workers (it waits on
  the processes' handles with ``WaitForMultipleObjects``, 64 at most with its own): more is a
  ``ValueError`` there, so :func:`max_workers` caps at :data:`WINDOWS_MAX_WORKERS`.
- **Replacing a file.** On Windows ``os.replace`` fails with a ``PermissionError`` while another
  process holds the target open without sharing deletion: an antivirus or the search indexer
  scanning the file just written, for some tens of ms. :func:`replace_file` tries again a few
  times on those errors only (Windows' error codes 5, 32 and 33, ``winerror``: ``_SHARING_ERRORS``);
  any other error, and any error elsewhere, is raised at once.
- **Is a process alive.** ``os.kill(pid, 0)`` asks that on POSIX; on Windows signal 0 is
  ``CTRL_C_EVENT``, so the same call sends Ctrl+C to a console process group (or fails with an
  ``OSError`` for other processes). :func:`process_alive` asks Windows' ``OpenProcess`` there.
- **How a dead worker ended.** Windows has no ``SIGKILL``: a crash is an exit code such as
  ``0xC0000005`` (an access violation). :func:`describe_exit` words both.
"""

from __future__ import annotations

import os
import sys
import time

__all__ = ["WINDOWS_MAX_WORKERS", "REPLACE_TRIES", "on_windows", "usable_cpus", "max_workers", "replace_file",
           "process_alive", "describe_exit", "out_of_memory_exit"]

WINDOWS_MAX_WORKERS = 61  # concurrent.futures.process._MAX_WINDOWS_WORKERS (63 handles - 2 of its own)
REPLACE_TRIES = 6  # waits of 10, 20, 40, 80, 160 ms between them: 0.31 s at most, then the error
_SHARING_ERRORS = (5, 32, 33)  # ERROR_ACCESS_DENIED, ERROR_SHARING_VIOLATION, ERROR_LOCK_VIOLATION

# Windows exit codes (NTSTATUS) of a process that crashed, and what they mean to a user
_NTSTATUS = {
    0xC0000005: "an access violation",
    0xC00000FD: "a stack overflow",
    0xC0000409: "a fail-fast abort",
    0xC0000017: "running out of memory",
    0xC000012D: "running out of memory (the commit limit)",
}
_NTSTATUS_OOM = (0xC0000017, 0xC000012D)


def on_windows() -> bool:
    return sys.platform == "win32"


def usable_cpus() -> int:
    """The CPUs this process may run on (at least 1): the module doc says why not ``cpu_count``."""
    count = getattr(os, "process_cpu_count", None)  # 3.13+: the affinity where the platform has one
    if count is not None:
        return max(1, count() or 1)
    affinity = getattr(os, "sched_getaffinity", None)  # Linux; not macOS nor Windows
    if affinity is not None:
        try:
            return max(1, len(affinity(0)))
        except OSError:
            pass
    return max(1, os.cpu_count() or 1)


def max_workers(wanted: int) -> int:
    """``wanted`` worker processes, capped at what a process pool takes on this platform."""
    return min(wanted, WINDOWS_MAX_WORKERS) if on_windows() else wanted


def replace_file(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """``os.replace(src, dst)``, tried again on a Windows sharing violation (module doc)."""
    for attempt in range(REPLACE_TRIES):
        try:
            os.replace(src, dst)
            return
        except PermissionError as e:
            if getattr(e, "winerror", None) not in _SHARING_ERRORS or attempt == REPLACE_TRIES - 1:
                raise
        time.sleep(0.01 * 2 ** attempt)


def process_alive(pid: int) -> bool:
    """Whether a process with this id runs on this machine (someone else's included)."""
    if on_windows():
        return _windows_process_alive(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    except OSError:
        return False
    return True


def _windows_process_alive(pid: int) -> bool:  # pragma: no cover - runs on Windows only
    """Windows' answer: OpenProcess, then GetExitCodeProcess (STILL_ACTIVE while it runs)."""
    if sys.platform != "win32":  # the API exists there only (and mypy checks what follows there only)
        raise OSError("the Windows API is only on Windows")
    import ctypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    query_limited_information, still_active, access_denied = 0x1000, 259, 5
    handle = kernel32.OpenProcess(query_limited_information, False, pid)
    if not handle:
        return ctypes.get_last_error() == access_denied  # exists, someone else's
    try:
        code = ctypes.c_ulong()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return True
        return code.value == still_active
    finally:
        kernel32.CloseHandle(handle)


def describe_exit(code: int) -> str:
    """How a process with this exit code ended: "was killed by SIGKILL", "exited with code 3",
    "crashed with 0xC0000005 (an access violation)" (Windows)."""
    import signal

    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    if code >= 0xC0000000:
        what = _NTSTATUS.get(code)
        return f"crashed with 0x{code:08X}" + (f" ({what})" if what else "")
    return f"exited with code {code}"


def out_of_memory_exit(code: int) -> bool:
    """Whether this exit code is what running out of memory gives here: SIGKILL where there is
    one (Linux's out-of-memory killer sends it), Windows' out-of-memory exit codes."""
    import signal

    kill = getattr(signal, "SIGKILL", None)  # not on Windows
    return (kill is not None and code == -kill) or code in _NTSTATUS_OOM
