"""Keep torch's C++ log lines out of the cell's output.

torch prints ``USDT: ... profiler_start`` / ``profiler_stop`` on every start and stop, and Kineto and
the allocator print warnings, straight to file descriptor 2. ipykernel copies everything written
to fd 2 into the cell's output, so the user would see them under every profiled cell.

While a profile runs, fd 2 points into a pipe; a thread reads it line by line, forwards every line
that is not profiler chatter to the real stderr (so the cell's own C-level output still shows, in
order), and keeps the profiler's lines so the report can surface the ones that matter.
"""

from __future__ import annotations

import os
import re
import sys
import threading

__all__ = ["NativeStderrFilter", "summarize_native_warnings"]

# Lines torch's profiler stack writes: USDT probes, old "STAGE:" lines, and glog-style warnings
# from the profiler, Kineto, CUPTI or the allocator's profiler hooks.
_PROFILER_LINE = re.compile(
    rb"^(USDT:|STAGE:|\S*ActivityProfiler|"
    rb"\[[WEI]\d{4} [^\]]*(CPUAllocator|profiler|Profiler|kineto|Kineto|CUPTI|cupti|Activity)[^\]]*\])"
)


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
        if _PROFILER_LINE.match(line):
            self.captured.append(line.decode(errors="replace").rstrip())
            return
        try:
            os.write(forward_fd, line)
        except OSError:
            pass


_WARNING_TEXT = re.compile(r"^\[[WE]\d{4}[^\]]*\]\s*(.*)$")


def summarize_native_warnings(lines: list[str]) -> list[str]:
    """The captured lines worth telling the user, once each, without log prefixes.

    USDT / STAGE progress lines are dropped; warnings and errors are kept.
    """
    out: list[str] = []
    for line in lines:
        m = _WARNING_TEXT.match(line)
        if not m:
            continue
        text = m.group(1).strip()
        if "Memory block of unknown size was allocated before the profiling started" in text:
            text = (
                "memory allocated before the profile started was freed during it; "
                "those frees are not in the memory numbers"
            )
        if text and text not in out:
            out.append(text)
    return out
