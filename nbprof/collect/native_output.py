"""Keep torch's C++ log lines out of the cell's output.

torch's native code writes log lines straight to file descriptor 2: ``USDT: ... profiler_start`` /
``profiler_stop`` on every start and stop, Kineto's errors (every PyPI CUDA build without a GPU:
``ERROR:<date> <pid>:<tid> DeviceProperties.cpp:56] gpuGetDeviceCount failed with code 35``), the
allocator's warnings. ipykernel copies everything written to fd 2 into the cell's output, so the
user would see them under every profiled cell.

While a profile runs, fd 2 points into a pipe; a thread reads it line by line, forwards every line
that is not a torch log line to the real stderr (so the cell's own C-level output still shows, in
order), and keeps torch's lines so the report can surface the ones that matter.
"""

from __future__ import annotations

import os
import re
import sys
import threading

__all__ = ["NativeStderrFilter", "summarize_native_warnings"]

# The formats torch's native code logs in (each seen on fd 2 during a profile; the file names vary
# with the version, so any file:line is accepted):
#   c10 logging, torch 2.4+:        [W1123 20:44:12.042066936 CPUAllocator.cpp:249] Memory block ...
#   c10 logging, torch 2.1-2.3:     [W CPUAllocator.cpp:249] Memory block ...
#   glog itself (builds with glog): W1123 20:44:12.042066 31263 CPUAllocator.cpp:249] Memory block ...
#   Kineto's logger (also its USDT: and STAGE: progress lines):
#                                   ERROR:2026-11-23 20:43:26 30826:30826 DeviceProperties.cpp:46] ...
#   and, whatever follows them, Kineto's USDT: / STAGE: prefixes and its ...ActivityProfiler lines.
_SOURCE = rb"[\w.+-]+:\d+\] ?"
_C10 = rb"\[(?P<c10>[IWEF])(?:\d{4} [\d:.]+(?: +\d+)?)? " + _SOURCE
_GLOG = rb"(?P<glog>[IWEF])\d{4} [\d:.]+ +\d+ " + _SOURCE
_KINETO = rb"(?P<kineto>[A-Z]+):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ " + _SOURCE
_PROGRESS = rb"(?:USDT:|STAGE:|\S*ActivityProfiler)"
_TORCH_LINE = re.compile(rb"(?:" + _C10 + rb"|" + _GLOG + rb"|" + _KINETO + rb"|" + _PROGRESS + rb")(?P<text>.*)", re.S)

# Severities worth a note; USDT / STAGE / INFO lines are progress, dropped.
_WARNING_SEVERITIES = {"W", "E", "F", "WARNING", "ERROR", "FATAL"}

# Errors that say nothing about this profile. Kineto's "gpuGetDeviceCount failed" (2.4+;
# "cudaGetDeviceCount failed" in 2.1-2.3; code 35: no CUDA driver) is printed by every CUDA build
# of torch on a machine without a GPU, whether or not CUDA was asked for; a --cuda run there
# already says "CUDA is not available".
_NOISE = ("GetDeviceCount failed",)


class NativeStderrFilter:
    """Context manager: while active, profiler lines on fd 2 are captured instead of shown."""

    def __init__(self) -> None:
        self.captured: list[str] = []
        self._saved_fd: int | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "NativeStderrFilter":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        try:
            sys.stderr.flush()
        except (AttributeError, ValueError, OSError):
            pass
        try:
            saved = os.dup(2)
        except OSError:
            return  # no fd 2 (some embedded interpreters): nothing to filter
        read_fd, write_fd = os.pipe()
        forward_fd = os.dup(saved)  # the reader owns its own copy of the real stderr
        os.dup2(write_fd, 2)
        os.close(write_fd)
        self._saved_fd = saved
        self._thread = threading.Thread(
            target=self._pump, args=(read_fd, forward_fd), name="nbprof-stderr", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._saved_fd is None:
            return
        try:
            sys.stderr.flush()
        except (AttributeError, ValueError, OSError):
            pass
        os.dup2(self._saved_fd, 2)  # closes the pipe's last write end: the reader sees EOF
        os.close(self._saved_fd)
        self._saved_fd = None
        if self._thread is not None:
            # A subprocess the cell started may still hold the pipe; never wait on it for long.
            self._thread.join(timeout=2.0)
            self._thread = None

    def _pump(self, read_fd: int, forward_fd: int) -> None:
        pending = b""
        try:
            while True:
                try:
                    chunk = os.read(read_fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._route(line + b"\n", forward_fd)
            if pending:
                self._route(pending, forward_fd)
        finally:
            os.close(read_fd)
            os.close(forward_fd)

    def _route(self, line: bytes, forward_fd: int) -> None:
        if _TORCH_LINE.match(line):
            self.captured.append(line.decode(errors="replace").rstrip())
            return
        try:
            os.write(forward_fd, line)
        except OSError:
            pass


def summarize_native_warnings(lines: list[str]) -> list[str]:
    """The captured lines worth telling the user, once each, without log prefixes.

    Progress lines (USDT, STAGE, INFO) and known noise are dropped; warnings and errors are kept.
    """
    out: list[str] = []
    for line in lines:
        m = _TORCH_LINE.match(line.encode())
        if not m:
            continue
        severity = (m.group("c10") or m.group("glog") or m.group("kineto") or b"").decode()
        text = m.group("text").decode(errors="replace").strip()
        if severity not in _WARNING_SEVERITIES or any(noise in text for noise in _NOISE):
            continue
        if "Memory block of unknown size was allocated before the profiling started" in text:
            text = (
                "memory allocated before the profile started was freed during it; "
                "those frees are not in the memory numbers"
            )
        if text and text not in out:
            out.append(text)
    return out
