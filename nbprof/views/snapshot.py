"""The report of a CUDA memory snapshot (``SnapshotProfile.report()``; ``nbprof view
snapshot.pickle``): the summary line, notes, and the snapshot's panels (``views.tabs.snapshot``:
Over time, At the peak, At the end, Segments, OOMs) as the report's tabs."""

from __future__ import annotations

from typing import Any, Callable

from ..format import esc, fmt_count
from .snapshot_chart import describe
from .table import render_text
from .tabs.snapshot import BLOCK_COLUMNS, blocks_frame, snapshot_panels, start_us

__all__ = ["SnapshotReport"]


class SnapshotReport:
    """The report of a :class:`~nbprof.snapshot.SnapshotProfile`."""

    def __init__(self, profile: Any, limit: int | None = None) -> None:
        self.profile = profile
        self.notes: list[str] = list(profile.meta.notes)
        self.limit = limit
        self.uid = 0

    def text(self) -> str:
        p = self.profile
        lines = [describe(p)]
        blocks = p.blocks("peak")
        if len(blocks):
            frame = blocks_frame(blocks, start_us(p)).head(self.limit or 10)
            lines.append("alive at the peak, biggest first:")
            lines.append(render_text(frame, BLOCK_COLUMNS[:4]))
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def html(self, include_library: bool | None = None, panels: dict[str, str] | None = None) -> str:
        from .report import _notes_html, _report_html
        from .tabs.base import Tab

        p = self.profile
        head = [f'<div class="nbprof-summary"><b>CUDA memory snapshot</b> · {esc(describe(p).split(": ", 1)[1])}</div>',
                f'<div class="nbprof-sub">{esc(_source_line(p))}</div>', _notes_html(self.notes)]
        bodies = snapshot_panels(p)
        tabs = [Tab(title, _drawn_already(body)) for title, body in bodies]
        return _report_html(self, tabs, head, include_library, panels)

    @property
    def empty_message(self) -> str | None:
        return None

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": self.text(), "text/html": self.html()}

    def __repr__(self) -> str:
        return self.text()


def _drawn_already(body: str) -> Callable[[Any], str]:
    """A tab's ``render`` that gives the panel drawn before."""
    return lambda report: body


def _source_line(p: Any) -> str:
    src = p.meta.source
    where = "recorded around the run (--snapshot)" if src == "--snapshot" else f"from {src}"
    settings = p.meta.allocator_settings.get("PYTORCH_CUDA_ALLOC_CONF")
    extra = f" · PYTORCH_CUDA_ALLOC_CONF={settings}" if settings else ""
    return where + extra + f" · {fmt_count(len(p._data.stacks))} distinct stacks"
