"""The result of a CUDA memory snapshot: ``nbprof.load_snapshot(path)`` and ``%%torchprof
--snapshot`` (``TorchProfile.snapshot()``).

It holds the snapshot's tables (``collect.snapshot.SnapshotData``) and typed metadata
(``meta.SnapshotMeta``); the analyses are ``analysis.snapshot``'s, computed on first use and
cached (``_<table>``, shallow copies out, as ``model.py``'s results do); it renders itself as its
report (``views.snapshot``). Bytes and µs in the column names; ``time_us`` is the wall clock torch
stamped each history entry with (µs since the epoch), as recorded.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np
import pandas as pd

from .collect.snapshot import SnapshotData
from .errors import OptionError
from .meta import SnapshotMeta

__all__ = ["SnapshotProfile"]


class SnapshotProfile:
    """A CUDA memory snapshot (what ``torch.cuda.memory._dump_snapshot`` writes and memory_viz
    opens): the allocator's segments and blocks at the end, and its history of allocations and
    frees replayed.

    ``segments()``: reserved vs allocated per segment (fragmentation); ``blocks(at=)``: the blocks
    alive at the end, at the peak or at a moment, each with its stack and the line of your code
    that allocated it; ``active_memory()``: the history replayed, the active and reserved bytes
    after each entry (OOMs among them, ``action == "oom"``); ``memory_curve()``: that curve as a
    zoomable figure, stacked by the line that allocated; ``report()``: all of it."""

    kind = "snapshot"

    def __init__(self, data: SnapshotData, meta: SnapshotMeta | None = None, *, shell: Any = None) -> None:
        from .collect.user_code import UserCode, current_shell

        self._data = data
        self.meta = meta if meta is not None else SnapshotMeta(source=data.source, notes=list(data.notes),
                                                               max_entries=data.max_entries,
                                                               allocator_settings=dict(data.settings))
        self._user = UserCode(shell if shell is not None else current_shell())

    # -- tables ---------------------------------------------------------------------------------

    def segments(self) -> pd.DataFrame:
        """One row per segment (memory the allocator got from ``cudaMalloc``), largest first:
        ``device, address, total_size_bytes`` (reserved), ``allocated_bytes`` (its blocks in use),
        ``requested_bytes`` (what their tensors asked for), ``rounding_bytes`` (allocated −
        requested), ``free_bytes`` (reserved, in no block in use), ``largest_free_bytes`` (the
        largest of those in one piece: what a new allocation can get without a new segment),
        ``active_bytes`` (in use, or freed and waiting for another stream), ``blocks``, ``stream``,
        ``segment_type`` (small / large pool), ``pool_id``, ``is_expandable``."""
        return self._segments.copy(deep=False)

    @functools.cached_property
    def _segments(self) -> pd.DataFrame:
        from .analysis.snapshot import segments_table

        return segments_table(self._data)

    def active_memory(self) -> pd.DataFrame:
        """The history replayed as memory_viz replays it: one row per history entry, in order per
        device: ``device, entry`` (its position in that device's history), ``time_us`` (the wall
        clock torch stamped it with: µs since the epoch; NaN in files before torch 2.1),
        ``action`` (alloc, free_requested, free_completed, segment_alloc, segment_free,
        segment_map, segment_unmap, oom, snapshot), ``address``, ``size_bytes`` (an OOM's: what it
        asked for), ``active_bytes`` (the allocations alive after it: each counts from its
        ``alloc`` to its ``free_completed``, in the bytes it asked for), ``reserved_bytes`` (the
        segments held after it)."""
        return self._memory.copy(deep=False)

    @functools.cached_property
    def _replay(self) -> Any:
        from .analysis.snapshot import replay

        return replay(self._data)

    @functools.cached_property
    def _memory(self) -> pd.DataFrame:
        from .analysis.snapshot import device_label

        mem = self._replay.memory.copy(deep=False)
        mem["device"] = pd.Series(device_label(mem["device"].to_numpy()) if len(mem) else [], dtype=str)
        return mem

    def blocks(self, at: str | float = "end") -> pd.DataFrame:
        """The blocks alive ``at`` ``"end"`` (the snapshot's segments: every block in use or
        waiting for another stream, ``state``), ``"peak"`` (each device's peak of active memory)
        or a ``time_us`` of ``active_memory()`` (alive right after it), biggest first:
        ``device, address, requested_bytes, size_bytes`` (the block, rounded; -1 where the
        snapshot no longer holds it), ``state``, ``alloc_us`` / ``free_us`` (their history entries'
        times; NaN: before the history / not freed), ``cell, file, line, function`` (the first
        frame of its stack in your code: a notebook cell, your files; none: its innermost
        frame), ``frames`` (its stack: ``(filename, line, name)``, innermost first)."""
        from .analysis.snapshot import alive_after, blocks_at, peaks

        r, data = self._replay, self._data
        if isinstance(at, str):
            if at == "end":
                live = np.flatnonzero(data.blocks["state"].astype(str).to_numpy() != "inactive")
                return blocks_at(r, data, live, self._user, at_end=True)
            if at == "peak":
                which = [alive_after(r, p.device, p.entry) for p in peaks(r, data)]
                return blocks_at(r, data, np.concatenate(which) if which else np.zeros(0, np.int64), self._user,
                                 at_end=False)
            raise OptionError(f'blocks(at={at!r}): "end", "peak" or a time_us of active_memory()')
        try:
            t = float(at)
        except (TypeError, ValueError):
            raise OptionError(f'blocks(at={at!r}): "end", "peak" or a time_us of active_memory()') from None
        mem = r.memory
        which = []
        for d in sorted(r.initial):
            rows = np.flatnonzero((mem["device"].to_numpy() == d) & (mem["time_us"].to_numpy() <= t))
            entry = int(mem["entry"].to_numpy()[rows[-1]]) if len(rows) else -1
            which.append(alive_after(r, d, entry))
        return blocks_at(r, data, np.concatenate(which) if which else np.zeros(0, np.int64), self._user, at_end=False)

    @functools.cached_property
    def _labels(self) -> pd.Series:
        """Each allocation's line (the chart's layers): the user's line of its stack, else its
        innermost frame; allocated before the history without a stack: one label."""
        from .analysis.snapshot import BEFORE_HISTORY, user_lines

        a = self._replay.allocations
        labels = user_lines(self._data.stacks, a["stack"].to_numpy(), self._user)["label"].to_numpy().copy()
        labels[a["before"].to_numpy() & (a["stack"].to_numpy() < 0)] = BEFORE_HISTORY
        return pd.Series(labels, dtype=object)

    @functools.cached_property
    def _summary(self) -> Any:
        from .analysis.snapshot import oom_table, peaks

        return {"peaks": peaks(self._replay, self._data), "ooms": oom_table(self._replay, self._data)}

    # -- views ----------------------------------------------------------------------------------

    def memory_curve(self, *, window_us: tuple[float, float] | None = None) -> Any:
        """Active memory over time, stacked by the line of your code that allocated it, with the
        reserved memory, the peak and the OOMs marked: a plotly ``Figure`` that renders itself
        (its static drawing where plotly does not run). Bounded however long the history (each
        device's curve kept at ~2 points per pixel, its peaks kept); ``window_us=(start, end)``
        (µs since the first entry) draws that part exactly."""
        from .views.snapshot_chart import snapshot_figure

        return snapshot_figure(self, window_us=window_us)

    def report(self, **view: Any) -> Any:
        """The report: the summary, active memory over time, the blocks at the peak and at the
        end with their lines, the segments (reserved vs allocated), the OOMs."""
        from .views.snapshot import SnapshotReport

        return SnapshotReport(self, **view)

    def save(self, path: str | os.PathLike) -> str:
        """Write the snapshot as ``torch.cuda.memory._dump_snapshot`` writes it (a pickle of plain
        data: memory_viz and ``nbprof.load_snapshot`` open it): a ``--snapshot`` run's, to open
        elsewhere or keep."""
        import pickle

        from .collect.snapshot import snapshot_dict

        path = os.fspath(path)
        if not path.endswith((".pickle", ".pkl")):
            raise OptionError(f"{path}: a snapshot is written as .pickle (what memory_viz opens)")
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise OptionError(f"{path}: the folder {folder} does not exist")
        with open(path, "wb") as f:
            pickle.dump(snapshot_dict(self._data), f)
        return path

    def to_html(self, path: str | os.PathLike, title: str | None = None) -> str:
        """Write the report as one HTML file that opens offline (the chart zoomable)."""
        from .views.page import write_standalone_html

        return write_standalone_html(self, path, title)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return self.report()._repr_mimebundle_(include, exclude)

    def _ipython_display_(self) -> None:
        """In IPython: the report, then the chart live in a kernel that can run it (zoom draws the
        window exactly from the kernel), else nothing more (the report has the chart)."""
        from IPython.display import display

        from .views.live_timeline import live_available

        display(self.report())
        if live_available() and len(self._replay.memory):
            from .views.snapshot_chart import live_chart

            display(live_chart(self))

    def __repr__(self) -> str:
        return self.report().text()
