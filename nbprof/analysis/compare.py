"""Compare two tables of the same kind, row by row: key averages, kernels or ranges (torch) or
stats (cProfile).

Pure DataFrame -> DataFrame. One row per key present in either table::

    <keys>, status, <m>_before, <m>_after, <m>_change (for every metric m), speedup

- keys: torch ``name, kind`` (``name, input_shapes, kind`` grouped by shape); kernels
  (``kernels()``: HTA's trace diff, the TensorBoard plugin's diff view, kernel by kernel) ``name,
  kind`` with :data:`KERNEL_METRICS`; ranges (``ranges()``: ``record_function`` labels) ``path,
  label, depth`` with :data:`RANGE_METRICS`; cProfile ``function, filename, lineno``, matched as
  described in :func:`python_match_keys`;
- ``status``: "both", "added" (only after) or "removed" (only before); a missing side counts 0;
- ``<m>_change = after - before``; ``speedup = before / after`` of the main metric (inf when the
  row is gone, 0 when it is new, NaN when both are 0);
- rows sorted by the absolute change of the main metric, largest first (ties by key).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .key_averages import KEY_AVERAGE_COLUMNS

__all__ = [
    "compare_tables",
    "compare_torch",
    "compare_python",
    "python_match_keys",
    "compare_kernels",
    "compare_ranges",
    "TORCH_METRICS",
    "KERNEL_METRICS",
    "RANGE_METRICS",
    "PYTHON_METRICS",
]

# every number column of key_averages()
TORCH_METRICS = tuple(c for c in KEY_AVERAGE_COLUMNS if c not in ("name", "kind"))
PYTHON_METRICS = ("ncalls", "primitive_calls", "tottime_s", "cumtime_s")
# the number columns of kernels() and ranges() that are compared (shares are in the table, next to
# the times they are a share of)
KERNEL_METRICS = ("count", "device_total_us", "device_avg_us", "share", "bytes")
RANGE_METRICS = ("count", "total_us", "mean_us", "share_of_span", "device_us", "kernels")

# code compiled from a notebook cell: its file name changes from run to run
_CELL_FILE = re.compile(r"^<ipython-input-\d+-|[/\\]ipykernel_\d+[/\\]\d+\.py$|^<cell|^<string>$")


def compare_tables(
    before: pd.DataFrame, after: pd.DataFrame, keys: list[str], metrics: list[str], main: str
) -> pd.DataFrame:
    """Outer-join ``before`` and ``after`` on ``keys``; see the module doc for the columns."""
    if main not in metrics:
        raise ValueError(f"main metric {main!r} is not among the metrics")
    b = before[keys + metrics].copy()
    a = after[keys + metrics].copy()
    for frame in (a, b):
        for k in keys:
            frame[k] = frame[k].astype(object)
    merged = b.merge(a, on=keys, how="outer", suffixes=("_before", "_after"), indicator=True, sort=False)
    out = merged[keys].copy()
    status = merged["_merge"].astype(str).to_numpy()
    out["status"] = np.select([status == "left_only", status == "right_only"], ["removed", "added"], "both")
    for m in metrics:
        bv = merged[f"{m}_before"].fillna(0).to_numpy()
        av = merged[f"{m}_after"].fillna(0).to_numpy()
        integer = pd.api.types.is_integer_dtype(before[m]) and pd.api.types.is_integer_dtype(after[m])
        if integer:
            bv, av = bv.astype(np.int64), av.astype(np.int64)
        out[f"{m}_before"] = bv
        out[f"{m}_after"] = av
        out[f"{m}_change"] = av - bv
    bm = out[f"{main}_before"].to_numpy(dtype=np.float64)
    am = out[f"{main}_after"].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["speedup"] = np.where(am != 0, bm / am, np.where(bm != 0, np.inf, np.nan))
    # an integer change sorts as it is: as float64, changes past 2**53 apart by less than their spacing would tie
    change = out[f"{main}_change"].to_numpy()
    change = np.abs(change if change.dtype.kind == "i" else change.astype(np.float64))
    tie = out[keys[0]].astype(str).to_numpy()
    order = np.lexsort((tie, -change))
    return out.iloc[order].reset_index(drop=True)


def compare_torch(before: pd.DataFrame, after: pd.DataFrame, main: str, group_by: str = "op") -> pd.DataFrame:
    """Two key-averages tables (same ``group_by``)."""
    keys = ["name", "kind"]
    if group_by == "shape":
        keys = ["name", "input_shapes", "kind"]
    elif group_by == "stack":
        keys = ["name", "stack", "kind"]
    metrics = [m for m in TORCH_METRICS if m in before.columns and m in after.columns]
    return compare_tables(before, after, keys, metrics, main)


def compare_kernels(before: pd.DataFrame, after: pd.DataFrame, main: str = "device_total_us") -> pd.DataFrame:
    """Two ``kernels()`` tables, kernel (and memcpy / memset) name by name."""
    return compare_tables(before, after, ["name", "kind"], list(KERNEL_METRICS), main)


def compare_ranges(before: pd.DataFrame, after: pd.DataFrame, main: str = "total_us") -> pd.DataFrame:
    """Two ``ranges()`` tables, label path by label path (a label under its enclosing labels)."""
    table = compare_tables(before, after, ["path", "label", "depth"], list(RANGE_METRICS), main)
    table["depth"] = table["depth"].astype(np.int64)
    return table


def python_match_keys(stats: pd.DataFrame, code_names: dict[str, str] | None = None) -> pd.DataFrame:
    """How a cProfile row is matched across runs: ``file_key, line_key, function``.

    Functions in files match on (file, line, function), as pstats keys them. Code from notebook
    cells (``In [n]``, ipykernel's temporary files) gets a new file name every time a cell runs
    and new line numbers when it is edited, so it matches on the function's name among all cell
    code; several cell functions of one name are told apart by their order (cell, then line).
    """
    code_names = code_names or {}
    filename = stats["filename"].astype(str).to_numpy()
    uniq, inv = np.unique(filename, return_inverse=True)
    cell_u = np.array([(u in code_names) or bool(_CELL_FILE.search(u)) for u in uniq], dtype=bool)
    is_cell = cell_u[inv] if len(inv) else np.zeros(0, dtype=bool)
    out = pd.DataFrame(
        {
            "file_key": np.where(is_cell, "<cell>", filename).astype(object),
            "line_key": stats["lineno"].to_numpy().astype(np.int64),
            "function": stats["function"].astype(str).to_numpy().astype(object),
        }
    )
    if is_cell.any():
        order_n = np.array([_cell_number(code_names.get(f, f)) for f in filename[is_cell]], dtype=np.int64)
        cells = pd.DataFrame({"fn": out["function"].to_numpy()[is_cell], "n": order_n,
                              "line": out["line_key"].to_numpy()[is_cell]})
        cells["rank"] = cells.sort_values(["n", "line"], kind="stable").groupby("fn").cumcount()
        line_key = out["line_key"].to_numpy().copy()
        line_key[is_cell] = cells["rank"].to_numpy()
        out["line_key"] = line_key
    return out


def _cell_number(name: str) -> int:
    m = re.search(r"(\d+)", name)
    return int(m.group(1)) if m else 0


def compare_python(
    before: pd.DataFrame,
    after: pd.DataFrame,
    main: str = "tottime_s",
    before_names: dict[str, str] | None = None,
    after_names: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Two cProfile stats tables; columns ``function, filename, lineno`` (after's, else
    before's) then the comparison."""
    b = pd.concat([python_match_keys(before, before_names), before[list(PYTHON_METRICS)].reset_index(drop=True),
                   before[["filename", "lineno"]].reset_index(drop=True)], axis=1)
    a = pd.concat([python_match_keys(after, after_names), after[list(PYTHON_METRICS)].reset_index(drop=True),
                   after[["filename", "lineno"]].reset_index(drop=True)], axis=1)
    keys = ["function", "file_key", "line_key"]
    table = compare_tables(b, a, keys, list(PYTHON_METRICS), main)
    where = pd.concat([b[keys + ["filename", "lineno"]], a[keys + ["filename", "lineno"]]]).astype(
        {k: object for k in keys}).drop_duplicates(keys, keep="last")
    table = table.merge(where, on=keys, how="left", sort=False)
    table = table.drop(columns=["file_key", "line_key"])
    first = ["function", "filename", "lineno"]
    table["lineno"] = table["lineno"].astype(np.int64)
    return table[first + [c for c in table.columns if c not in first]]
