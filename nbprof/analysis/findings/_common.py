"""What the finding kinds share: the row a check yields, the number formatting of messages and
evidence, and the per-profile context that several checks read (computed once per profile)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ...events import DEVICE_WORK_CODES, time_ns
from .._intervals import launch_points
from .._tables import TEXT, empty_table
from ..device_stats import process_codes, span_ns
from ..flame import pstats_location
from ..tree import lanes

# evidence: a dict per finding
FINDING_DTYPES = {"kind": TEXT, "severity": TEXT, "message": TEXT, "evidence": object}
FINDING_COLUMNS = tuple(FINDING_DTYPES)
SEVERITIES = ("high", "medium", "low")

SCALAR_READ_OPS = ("aten::_local_scalar_dense",)  # .item(), bool(tensor), float(tensor), .tolist()
# On Apple's MPS device torch records no device work, and these ops' own CPU time holds the wait
# for it: a scalar read waits for the device to reach it; a copy waits when it copies to the CPU
# (``.cpu()``, ``.to("cpu")``, ``.numpy()`` after one), which the trace does not tell from a copy on
# the device (its ops carry no device), so every copy counts as a possible wait there.
MPS_WAIT_OPS = frozenset({"aten::_local_scalar_dense", "aten::item", "aten::to", "aten::_to_copy", "aten::copy_",
                          "aten::_copy_from", "aten::_copy_from_and_resize"})


class Finding(NamedTuple):
    """One finding as a check yields it; the registry adds its kind. ``score`` orders findings of
    one severity: how much of the profile the finding covers (a share), larger first."""

    severity: str
    message: str
    evidence: dict[str, Any]
    score: float = 0.0


def pct(x: float) -> str:
    return f"{100 * x:.0f}%" if x >= 0.01 else f"{100 * x:.1f}%"


def to_python(v: Any) -> Any:
    """numpy scalars -> Python numbers (evidence stays JSON-friendly)."""
    if isinstance(v, np.generic):
        return v.item()
    return v


class TorchContext:
    """What several torch findings need, computed once."""

    def __init__(self, profile: Any) -> None:
        self.profile = profile
        self.events = profile.events
        self.meta = profile.meta
        ev = self.events
        self.kind = ev["kind"].cat.codes.to_numpy()
        self.names = ev["name"]
        self.start_ns = time_ns(ev["start_us"].to_numpy())
        self.dur_ns = time_ns(ev["dur_us"].to_numpy())
        self.end_ns = self.start_ns + self.dur_ns
        self.thread, self.process = lanes(ev)
        self.work = np.isin(self.kind, DEVICE_WORK_CODES)
        self.has_device = bool(self.work.any())
        # a live run on Apple's MPS device: its device work is in no event (meta.MpsRun)
        self.on_mps = getattr(self.meta, "mps", None) is not None and not self.has_device
        self.windows = profile._windows  # profiled_windows, cached on the profile
        self.rank, self.rank_labels = process_codes(ev)
        self.span_ns = float(span_ns(self.windows, len(self.rank_labels)).sum())
        self._launches: pd.DataFrame | None = None

    @property
    def launches(self) -> pd.DataFrame:
        if self._launches is None:
            self._launches = launch_points(self.events, self.process)
        return self._launches


class PythonContext:
    """What the cProfile findings need: the stats, the total time and each row's label."""

    def __init__(self, profile: Any) -> None:
        self.profile = profile
        self.stats = profile.stats
        self.total_s = float(profile.total_s)
        self.location = pstats_location(self.stats, profile.meta.code_names)


def sort_findings(rows: list[tuple[str, Finding]]) -> list[tuple[str, Finding]]:
    """(kind, finding) pairs in the findings' order: by severity, then by score (larger first);
    equal ones keep the order they were found in."""
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(rows, key=lambda r: (order[r[1].severity], -float(r[1].score)))


def findings_frame(rows: list[tuple[str, Finding]]) -> pd.DataFrame:
    """(kind, finding) pairs -> the findings DataFrame, in :func:`sort_findings`' order."""
    if not rows:
        return empty_table(FINDING_DTYPES)
    return pd.DataFrame([(kind, f.severity, f.message.strip(), f.evidence) for kind, f in sort_findings(rows)],
                        columns=list(FINDING_COLUMNS))
