"""A status line while a big profile is post-processed, so the user knows the kernel works; a
progress bar while a folder of ranks loads (:class:`RankProgress`).

Shown only when the work is big enough to take about a second (judged from the size of the
trace torch wrote), updated at each stage, and cleared once the report is on screen.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from ..format import esc

__all__ = ["Progress", "RankProgress", "BIG_TRACE_BYTES"]

# ~400 bytes per event in torch's trace JSON; post-processing runs at a few µs per event, so
# 50 MB (~125k events) is about where it starts to take a second.
BIG_TRACE_BYTES = 50 << 20


class Progress:
    def __init__(self) -> None:
        self._handle: Any = None
        self._started = 0.0
        self.active = False
        self.stages: list[str] = []  # what was shown, for tests and notes

    def start_if_big(self, trace_bytes: int) -> None:
        if trace_bytes >= BIG_TRACE_BYTES:
            self.active = True
            self._started = time.perf_counter()

    def stage(self, text: str) -> None:
        if not self.active:
            return
        self.stages.append(text)
        elapsed = time.perf_counter() - self._started
        line = f"nbprof: {text} ({elapsed:.1f} s)"
        bundle = {
            "text/plain": line,
            "text/html": f'<div style="color:#666;font-style:italic">{esc(line)}</div>',
        }
        try:
            from IPython.display import display

            if self._handle is None:
                self._handle = display(bundle, raw=True, display_id=True)
            else:
                self._handle.update(bundle, raw=True)
        except Exception:  # no IPython display (a script): nothing to update
            pass

    def done(self) -> None:
        if self._handle is not None:
            try:
                self._handle.update({"text/plain": ""}, raw=True)
            except Exception:
                pass
            self._handle = None
        self.active = False


class RankProgress:
    """Ranks loaded so far while ``load_trace(folder)`` reads a folder of ranks: a bar with ranks
    done / total and the time since the start, updated as each rank comes back.

    In a notebook (a kernel with a display), one output updated in place, left with its last
    line ("8 of 8 ranks in 41.2 s"); elsewhere (a terminal, a script), one line on stderr
    rewritten with ``\\r``. ``enabled=False``: no output at all."""

    def __init__(self, total: int, enabled: bool = True, how: str = "") -> None:
        self.total = total
        self.done = 0
        self.enabled = enabled and total > 0
        self.how = how  # "2 worker processes", "Dask", ...
        self._started = time.perf_counter()
        self._handle: Any = None
        self._kernel = _in_kernel()
        self.lines: list[str] = []  # what was shown, for tests
        if self.enabled:
            self._show()

    def advance(self) -> None:
        self.done += 1
        if self.enabled:
            self._show()

    def _line(self) -> str:
        elapsed = time.perf_counter() - self._started
        how = f", {self.how}" if self.how else ""
        return f"nbprof: {self.done} of {self.total} ranks loaded in {elapsed:.1f} s{how}"

    def _show(self) -> None:
        line = self._line()
        self.lines.append(line)
        if self._kernel:
            from IPython.display import display

            bar = (f'<progress value="{self.done}" max="{self.total}" style="width:16em;vertical-align:middle">'
                   "</progress> ")
            bundle = {"text/plain": line, "text/html": f'<div style="color:#666">{bar}{esc(line)}</div>'}
            if self._handle is None:
                self._handle = display(bundle, raw=True, display_id=True)
            else:
                self._handle.update(bundle, raw=True)
        else:
            end = "\n" if self.done == self.total else ""
            sys.stderr.write("\r" + line + end)
            sys.stderr.flush()

    def close(self) -> None:
        """Stop (also when loading failed): a terminal's line is ended."""
        if self.enabled and not self._kernel and self.done != self.total:
            sys.stderr.write("\n")
            sys.stderr.flush()
        self.enabled = False


def _in_kernel() -> bool:
    """A Jupyter kernel (outputs can be updated in place), not a terminal IPython or a script."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None
