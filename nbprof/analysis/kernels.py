"""Device activity per kernel name: what ran on the GPU, how long, on which streams, launched by whom."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..events import KIND_CODE

__all__ = ["kernel_table", "KERNEL_COLUMNS"]

KERNEL_COLUMNS = (
    "name",
    "kind",
    "count",
    "device_total_us",
    "device_avg_us",
    "device_min_us",
    "device_max_us",
    "share",
    "bytes",
    "streams",
    "launched_by",
)

_WORK = [KIND_CODE[k] for k in ("kernel", "memcpy", "memset")]


def kernel_table(events: pd.DataFrame) -> pd.DataFrame:
    """One row per (kernel name, kind): counts and device time; ``share`` of all device time;
    ``launched_by``: the CPU op that launched it most often (by External id)."""
    kind = events["kind"].cat.codes.to_numpy()
    rows = np.flatnonzero(np.isin(kind, _WORK))
    if len(rows) == 0:
        return pd.DataFrame({c: [] for c in KERNEL_COLUMNS})
    sub = events.iloc[rows]
    parent = sub["parent"].to_numpy()
    names = events["name"].astype(str).to_numpy()
    launcher = np.where(parent >= 0, names[np.maximum(parent, 0)], "")
    frame = pd.DataFrame(
        {
            "name": sub["name"].astype(str).to_numpy(),
            "kind": sub["kind"].astype(str).to_numpy(),
            "dur": sub["dur_us"].to_numpy(),
            "bytes": sub["bytes"].to_numpy(),
            "stream": sub["stream"].to_numpy(),
            "device": sub["device"].astype(str).to_numpy(),
            "launcher": launcher,
        }
    )
    g = frame.groupby(["name", "kind"], sort=False)
    out = g["dur"].agg(count="size", device_total_us="sum", device_avg_us="mean", device_min_us="min",
                       device_max_us="max").reset_index()
    out["bytes"] = g["bytes"].sum().to_numpy().astype(np.int64)
    total = float(frame["dur"].sum())
    out["share"] = out["device_total_us"] / total if total > 0 else 0.0
    streams = frame.groupby(["name", "kind"], sort=False)[["device", "stream"]].apply(
        lambda d: ", ".join(f"{dev} s{s}" for dev, s in sorted(set(zip(d["device"], d["stream"]))))
    )
    out["streams"] = streams.to_numpy()
    named = frame[frame["launcher"] != ""]
    top = (
        named.groupby(["name", "kind", "launcher"], sort=False).size().reset_index(name="n")
        .sort_values("n", ascending=False, kind="stable").drop_duplicates(["name", "kind"])
    )
    out = out.merge(top[["name", "kind", "launcher"]], on=["name", "kind"], how="left")
    out["launched_by"] = out.pop("launcher").fillna("")
    return out.sort_values("device_total_us", ascending=False, kind="stable").reset_index(drop=True)[
        list(KERNEL_COLUMNS)
    ]
