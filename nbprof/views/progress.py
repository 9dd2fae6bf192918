"""A status line while a big profile is post-processed, so the user knows the kernel works; a
progress bar while a folder of ranks loads (:class:`RankProgress`, through tqdm).

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
    """Ranks loaded so far while ``load_trace(folder)`` reads a folder of ranks, updated as each
    rank comes back, through tqdm (``tqdm.auto``) where a display can be redrawn: in a Jupyter
    kernel a progress widget (``tqdm.notebook``), in a terminal one line redrawn with ``\\r``.
    Where stderr is no terminal (a log, CI, a pipe), tqdm would still write ``\\r`` and the
    updates would run together on one line: there, one plain line per rank, nothing else.
    ``enabled=False``: no output at all."""

    def __init__(self, total: int, enabled: bool = True, how: str = "") -> None:
        self.total = total
        self.done = 0
        self.enabled = enabled and total > 0
        self.how = how  # "2 worker processes", "Dask", ...
        self._started = time.perf_counter()
        self._bar: Any = None
        self.mode = "off"  # "bar" (tqdm: a widget or a redrawn line) or "lines" (one line per rank)
        self.lines: list[str] = []  # what was written in "lines" mode, for tests
        if not self.enabled:
            return
        if _in_kernel() or _is_terminal(sys.stderr):
            from tqdm.auto import tqdm

            self.mode = "bar"
            self._bar = tqdm(total=total, desc="nbprof: ranks loaded", unit="rank", leave=True, file=sys.stderr,
                             postfix=how or None)
        else:
            self.mode = "lines"
            self._write(f"nbprof: loading {total} rank{'s' if total != 1 else ''}" + (f" ({how})" if how else ""))

    def advance(self) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.update(1)
        elif self.mode == "lines":
            elapsed = time.perf_counter() - self._started
            self._write(f"nbprof: {self.done} of {self.total} ranks loaded in {elapsed:.1f} s")

    def _write(self, line: str) -> None:
        self.lines.append(line)
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        """Stop (also when loading failed: the bar stays at the ranks that were read)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self.enabled = False


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _in_kernel() -> bool:
    """A Jupyter kernel (outputs can be updated in place), not a terminal IPython or a script."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None
