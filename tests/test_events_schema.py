"""The events schema (``nbprof.events.COLUMNS``) against what the reader, the table and the writer
do: every column read from its trace field for the rows of its kinds only, its default elsewhere,
written back and read again unchanged; the module docstring lists exactly the schema's columns."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof import events as E
from nbprof.collect.chrome_trace import empty_trace, parse_trace_bytes, read_trace_file
from nbprof.model import TorchProfile

from .conftest import TRACES, frames_equal, trace_path


def check_schema_dtypes(events: pd.DataFrame) -> None:
    assert tuple(events.columns[: len(E.COLUMNS)]) == E.EVENT_COLUMNS
    for c in E.COLUMNS:
        if c.categorical:
            assert isinstance(events[c.name].dtype, pd.CategoricalDtype), c.name
            if c.categories is not None:
                assert tuple(events[c.name].cat.categories) == c.categories, c.name
        else:
            assert events[c.name].dtype == np.dtype(c.dtype), c.name


# ------------------------------------------------------------------------------ the table


@pytest.mark.parametrize("name", TRACES)
def test_read_tables_have_the_schema_columns_and_dtypes(name):
    check_schema_dtypes(read_trace_file(trace_path(name)).events)


def test_columns_left_out_hold_their_defaults():
    ev = E.make_events_frame(name=np.array(["a", "b"], dtype=object), kind=np.array([E.KIND_CODE["kernel"]] * 2),
                             device=np.array([0, -1]))
    check_schema_dtypes(ev)
    assert ev["device"].astype(str).tolist() == ["cuda:0", "cpu"]
    for c in E.COLUMNS:
        if c.name in ("name", "kind", "device"):
            continue
        values = ev[c.name].astype(str).to_numpy() if c.categorical else ev[c.name].to_numpy()
        if c.categorical:
            assert (values == c.default).all(), c.name
        else:
            assert c.is_default(values).all(), c.name
    check_schema_dtypes(E.make_events_frame())
    check_schema_dtypes(empty_trace().events)
    assert len(empty_trace().events) == 0


def test_unknown_columns_are_a_one_line_error():
    with pytest.raises(ValueError, match="not columns of the events table: gird$"):
        E.make_events_frame(gird=np.array(["[1, 1, 1]"]))


@pytest.mark.parametrize("name", TRACES)
def test_recorded_traces_hold_each_column_only_on_the_kinds_that_have_it(name):
    """The schema's ``kinds`` against torch's own files: no other kind has a value there."""
    ev = read_trace_file(trace_path(name)).events
    kind = ev["kind"].astype(str).to_numpy()
    for c in E.COLUMNS:
        if c.kinds == E.KINDS:
            continue
        other = ~np.isin(kind, c.kinds)
        if c.categorical:
            assert (ev[c.name].astype(str).to_numpy()[other] == c.default).all(), c.name
        else:
            assert c.is_default(ev[c.name].to_numpy()[other]).all(), c.name


# ---------------------------------------------------------------- reader and writer, per column


def _value(c: E.EventColumn, i: int):
    """A value for column ``c`` in the trace (as JSON) and in the table."""
    if c.json_list:
        return [i, 2, 1], f"[{i}, 2, 1]"
    if c.categorical:  # a string arg ("Collective name")
        return f"text {i}", f"text {i}"
    if np.dtype(c.dtype).kind == "f":
        return i + 0.25, i + 0.25
    return 1000 + i, 1000 + i


def _every_kind_trace() -> tuple[bytes, list[dict]]:
    """One event of every kind, each carrying every one-arg column (its own kinds' or not), and
    what the table should say for each (row, column)."""
    events, expected = [], []
    for i, kind in enumerate(E.KINDS):
        args: dict = {}
        want: dict = {}
        for j, c in enumerate(E.ARG_COLUMNS):
            raw, value = _value(c, 10 * i + j)
            args[c.arg] = raw
            want[c.name] = value if kind in c.kinds else c.default
        e = {"ph": "X", "cat": E.TRACE_CATEGORY[kind], "name": f"event {i}", "pid": 1, "tid": 1,
             "ts": 100.0 + i, "dur": 0.5, "args": args}
        if kind in E.DEVICE_KINDS:  # as torch files them: process = device, thread = stream
            args.update({"device": 0, "stream": 7})
            e.update(pid=0, tid=7)
        if kind in E.MEMORY_KINDS:
            e.update(ph="i", s="t", name="[OutOfMemory]" if kind == "oom" else "[memory]")
            del e["dur"]
            args.update({"Bytes": 64, "Device Type": 1, "Device Id": 0})
        events.append(e)
        expected.append(want)
    # a Python function without a caller: torch writes its parent id as null
    events.append({"ph": "X", "cat": "python_function", "name": "<module>", "pid": 1, "tid": 1, "ts": 200.0,
                   "dur": 1.0, "args": {"Python id": 7, "Python parent id": None}})
    expected.append({c.name: (7 if c.name == "python_id" else c.default) for c in E.ARG_COLUMNS})
    doc = {"schemaVersion": 1, "with_flops": 1, "traceEvents": events}
    return json.dumps(doc).encode(), expected


def test_every_arg_column_is_read_for_its_kinds_and_written_back(tmp_path):
    raw, expected = _every_kind_trace()
    trace = parse_trace_bytes(raw, source="every kind")
    ev = trace.events
    assert ev["kind"].astype(str).tolist() == list(E.KINDS) + ["python"]
    for c in E.ARG_COLUMNS:
        got = ev[c.name].astype(str).tolist() if c.categorical else ev[c.name].tolist()
        want = [row[c.name] for row in expected]
        if c.categorical:
            assert got == want, c.name
        else:
            np.testing.assert_array_equal(np.array(got, dtype=c.dtype), np.array(want, dtype=c.dtype), err_msg=c.name)
    # written by nbprof's exporter, read again: every column the same, row for row
    path = TorchProfile.from_trace(trace).save(tmp_path / "every_kind.json")
    again = read_trace_file(path)
    frames_equal(again.events, ev)
    # and the args the writer wrote are the trace's own names
    written = json.loads(open(path).read())["traceEvents"]
    kernel = next(e for e in written if e.get("cat") == "kernel")
    for c in E.ARG_COLUMNS:
        assert (c.arg in kernel["args"]) == ("kernel" in c.kinds), c.name
    parent = [e["args"]["Python parent id"] for e in written if e.get("cat") == "python_function"]
    assert parent[-1] is None


@pytest.mark.parametrize("name", TRACES)
def test_every_column_round_trips_exactly(tmp_path, name):
    original = nbprof.load_trace(trace_path(name))
    again = nbprof.load_trace(original.save(tmp_path / "copy.json.gz"))
    frames_equal(again.events[list(E.EVENT_COLUMNS)], original.events[list(E.EVENT_COLUMNS)])


def test_merged_traces_move_every_trace_local_id():
    one = read_trace_file(trace_path("cnn_train_cuda"))
    merged = E.concat_traces([one, read_trace_file(trace_path("cnn_train_cuda"))], label_column="rank")
    n = len(one.events)
    check_schema_dtypes(merged.events)
    ids = [c.name for c in E.COLUMNS if c.trace_local_id]
    assert set(ids) == {"correlation", "external_id", "python_id", "python_parent_id"}
    for name in ids:
        first = one.events[name].to_numpy()
        second = merged.events[name].to_numpy()[n:]
        np.testing.assert_array_equal(second, np.where(first > 0, first + (1 << 40), first), err_msg=name)
    for c in E.COLUMNS:
        if c.name not in ids and c.name != "start_us":
            assert merged.events[c.name].iloc[n:].astype(str).tolist() == one.events[c.name].astype(str).tolist()


# ------------------------------------------------------------------------------------- docs


def test_module_docstring_lists_exactly_the_schema_columns():
    doc = E.__doc__
    listed = re.findall(r"^    (\w+) +(category|int32|int64|float64) ", doc, flags=re.M)
    assert [name for name, _ in listed] == list(E.EVENT_COLUMNS)
    flat = " ".join(doc.split())
    for c in E.COLUMNS:
        assert dict(listed)[c.name] == c.dtype
        assert " ".join(c.doc.split()) in flat, c.name
        assert " ".join(f"From {c.source}".split()) in flat, c.name
        for field in re.findall(r'"[^"]*"', c.source):  # a trace field's name is never cut across lines
            assert field in doc, (c.name, field)
    assert all(len(line) <= 100 for line in doc.splitlines())


def test_events_imports_no_collector():
    """``events`` is below the collectors: importing it imports no other module of nbprof than
    the package itself does."""
    code = ("import sys; import nbprof; before = set(sys.modules); import nbprof.events; "
            "print(sorted(m for m in set(sys.modules) - before if m.startswith('nbprof')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['nbprof.events', 'nbprof.meta']"  # meta: the typed TraceMeta, base layer


# ------------------------------------------------------------------------- per-category helpers


def test_per_category_helpers_equal_the_per_row_answer():
    column = pd.Series(pd.Categorical(["b", "ProfilerStep#3", None, "b", "autograd::engine x"]))
    per_row = [None if v is None or v != v else str(v) for v in column.astype(object)]
    assert E.values_at(column).tolist() == [v or "" for v in per_row]
    rows = np.array([4, 2, 0])
    assert E.values_at(column, rows).tolist() == [(per_row[i] or "") for i in rows]
    mask = E.category_mask(column, lambda v: v.startswith("autograd::engine"))
    assert mask.tolist() == [v is not None and v.startswith("autograd::engine") for v in per_row]
    lengths = E.category_map(column, len, dtype=np.int64, missing=-1, rows=rows)
    assert lengths.tolist() == [len(per_row[i]) if per_row[i] is not None else -1 for i in rows]
    codes, labels = E.key_names(column)
    assert [labels[k] for k in codes] == ["b", "ProfilerStep*", "", "b", "autograd::engine x"]


def test_kind_groups_are_kinds():
    for group in ("DEVICE_KINDS", "DEVICE_WORK_KINDS", "COPY_KINDS", "TREE_KINDS", "MEMORY_KINDS", "CORRELATED_KINDS"):
        kinds = getattr(E, group)
        assert set(kinds) <= set(E.KINDS), group
        codes = getattr(E, group.replace("_KINDS", "_CODES"), None)
        if codes is not None:
            assert [E.KINDS[k] for k in codes] == list(kinds), group
    assert set(E.DEVICE_WORK_KINDS) < set(E.DEVICE_KINDS)
    assert set(E.TRACE_CATEGORY) == set(E.KINDS)


@pytest.mark.parametrize("rows", [None, [0, 3, 6], [2, 5], []])
def test_category_codes_equal_pandas_factorize_of_the_rows_strings(rows):
    """Codes among the labels that occur, in sorted order, as ``pd.factorize(strings, sort=True)``
    numbers them; a missing value and a category "" are one label ""; unused categories are not
    labels."""
    column = pd.Series(pd.Categorical(["cuda:1", "cpu", None, "cuda:0", "cpu", "", "cuda:1"],
                                      categories=["zzz unused", "cuda:1", "cpu", "", "cuda:0"]))
    strings = np.array(["" if v is None or v != v else str(v) for v in column.astype(object)], dtype=object)
    picked = strings if rows is None else strings[np.asarray(rows, dtype=np.int64)]
    expected_codes, expected_labels = pd.factorize(picked, sort=True)
    codes, labels = E.category_codes(column, None if rows is None else np.asarray(rows, dtype=np.int64))
    assert codes.tolist() == expected_codes.tolist()
    assert labels.tolist() == list(expected_labels)
