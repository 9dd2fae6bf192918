"""Tables of no rows whose columns have the dtypes they have with rows.

A table's empty branch is where dtypes drift: an empty column is whatever the branch names, and a
float count or an object text column breaks code that works on the same table with rows (``.str``,
integer comparisons, ``concat`` with a table that has rows). So each table names its columns'
dtypes once, as a mapping, and its empty branch is built from that mapping
(tests/test_invariants.py checks every table against the dtypes its rows have).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

__all__ = ["TEXT", "LABEL", "empty_table"]

# Text columns: pandas 2 keeps Python strings as object, pandas 3 as its "str" dtype; pandas names
# the dtype a column of strings gets as `str` in both.
TEXT: Any = str
# A rank's label: the int or the string a trace gave it (or a file's name), as is.
LABEL: Any = object


def empty_table(dtypes: Mapping[str, Any], columns: Iterable[str] | None = None) -> pd.DataFrame:
    """A table of no rows: ``columns`` (all of ``dtypes``' by default, in its order), each of its
    dtype in ``dtypes``."""
    return pd.DataFrame({c: pd.Series(dtype=dtypes[c]) for c in (dtypes if columns is None else columns)})
