"""``nbprof.analysis.ranks.name_times`` when nothing is left to sum (issue 38, seed 73): a profile
without kernels (or without any op besides its ProfilerStep markers) gives a table of no rows whose
text columns are still text, so code that reads ``.str`` on them works as it does with rows."""

from __future__ import annotations

from pandas.api.types import is_string_dtype

from nbprof.analysis.ranks import name_times
from tests.synthetic import Trace

COLUMNS = ["name", "kind", "rank", "count", "time_us"]


def _rows(nt) -> list[tuple]:
    return list(zip(nt["name"], nt["kind"], nt["rank"].tolist(), nt["count"].tolist(), nt["time_us"].tolist()))


def test_a_cpu_only_profiles_kernel_name_times_are_empty_with_text_name_and_kind_columns(tmp_path):
    t = Trace()
    t.op("aten::mm", 0, 20)
    events = t.load(tmp_path).events
    kernels = name_times(events, device_work=True)
    assert list(kernels.columns) == COLUMNS and len(kernels) == 0
    assert is_string_dtype(kernels["name"]) and is_string_dtype(kernels["kind"])
    assert kernels["name"].str.startswith("nccl").tolist() == []
    # the same profile's ops: the one op, its 20 µs of self CPU time (no child), on rank code 0
    assert _rows(name_times(events, device_work=False)) == [("aten::mm", "op", 0, 1, 20.0)]


def test_a_profile_of_only_step_markers_has_no_op_name_times_and_its_name_column_is_text(tmp_path):
    t = Trace()
    t.annotation("ProfilerStep#0", 0, 100)
    t.annotation("ProfilerStep#1", 100, 100)
    ops = name_times(t.load(tmp_path).events, device_work=False)
    assert list(ops.columns) == COLUMNS and len(ops) == 0
    assert is_string_dtype(ops["name"]) and is_string_dtype(ops["kind"])
    assert ops["name"].str.contains("mm").tolist() == []
