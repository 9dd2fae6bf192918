"""A status line while a big profile is post-processed, so the user knows the kernel works.

Shown only when the work is big enough to take about a second (judged from the size of the
trace torch wrote), updated at each stage, and cleared once the report is on screen.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["Progress", "BIG_TRACE_BYTES"]

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
            "text/html": f'<div style="color:#666;font-style:italic">{line}</div>',
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
