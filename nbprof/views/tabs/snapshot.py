"""The Memory snapshot tab (``%%torchprof --snapshot``, CUDA only): the snapshot's own report
(``views.snapshot``: active memory over time stacked by line, the blocks at the peak and at the
end, the segments, the OOMs) as tabs inside the tab. Left out of reports without a snapshot."""

from __future__ import annotations

from typing import Any

from .base import Tab

__all__ = ["SNAPSHOT"]


def render(report: Any) -> str:
    from ..snapshot import snapshot_panels
    from ..tabbar import subtabs_html

    return subtabs_html(snapshot_panels(report.profile.snapshot()))


SNAPSHOT = Tab("Memory snapshot", render, applies=lambda p: getattr(p.meta, "snapshot", None) is not None)
