"""Reading and writing chrome traces: bad files, round trips, exports."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof.errors import TraceError

from .conftest import TRACES, needs_torch, run, trace_path


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", "empty"),
        (b"hello, not json", "not a chrome trace"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1.0, "dur"', "truncated"),
        (b'{"foo": 1}', "not a chrome trace"),
        (b'{"traceEvents": "nope"}', "not a chrome trace"),
    ],
)
def test_bad_files_are_one_line_errors_naming_the_file(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=message) as info:
        nbprof.load_trace(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_truncated_gzip_and_missing_files(tmp_path):
    good = trace_path("two_streams").read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(good[: len(good) // 2])
    with pytest.raises(TraceError, match="cut.json.gz"):
        nbprof.load_trace(cut)
    with pytest.raises(TraceError, match="no such file"):
        nbprof.load_trace(tmp_path / "missing.json")
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    with pytest.raises(TraceError, match="no trace files"):
        nbprof.load_trace(empty_dir)


def test_json_array_format(tmp_path):
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 1, "ts": 10.0, "dur": 10.0},
        {"ph": "X", "cat": "cpu_op", "name": "inner", "pid": 1, "tid": 1, "ts": 12.0, "dur": 3.5},
    ]
    path = tmp_path / "array.json"
    path.write_text(json.dumps(events))
    rows = nbprof.load_trace(path).key_averages().set_index("name")
    assert rows.loc["outer", "self_cpu_us"] == pytest.approx(6.5)
    assert rows.loc["inner", "cpu_total_us"] == pytest.approx(3.5)


def test_load_trace_needs_no_torch():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import nbprof\n"
        f"p = nbprof.load_trace({str(trace_path('two_streams'))!r})\n"
        "print(len(p.key_averages()), 'torch' in sys.modules and sys.modules['torch'] is not None)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["16", "False"]


@pytest.mark.parametrize("name", TRACES)
@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_save_and_load_round_trip(tmp_path, name, suffix):
    original = nbprof.load_trace(trace_path(name))
    path = original.save(tmp_path / f"copy{suffix}")
    again = nbprof.load_trace(path)
    cols = ["name", "kind", "device", "thread", "stream", "start_us", "dur_us", "external_id", "correlation",
            "input_shapes", "bytes", "parent"]
    a = original.events[cols].astype({c: str for c in ("name", "kind", "device", "input_shapes")})
    b = again.events[cols].astype({c: str for c in ("name", "kind", "device", "input_shapes")})
    key = ["start_us", "name", "kind", "thread", "stream", "dur_us"]
    a = a.sort_values(key, kind="stable").reset_index(drop=True)
    b = b.sort_values(key, kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(a.drop(columns="parent"), b.drop(columns="parent"))
    for group_by in ("op", "shape"):
        pd.testing.assert_frame_equal(original.key_averages(group_by), again.key_averages(group_by))


def test_folder_of_rank_traces(tmp_path):
    for rank, name in enumerate(["two_streams", "two_streams"]):
        with gzip.open(trace_path(name)) as f:
            doc = json.load(f)
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
        with open(tmp_path / f"worker{rank}.pt.trace.json", "w") as f:
            json.dump(doc, f)
    merged = nbprof.load_trace(tmp_path)
    single = nbprof.load_trace(trace_path("two_streams"))
    assert sorted(merged.events["rank"].unique()) == [0, 1]
    m = merged.key_averages().set_index("name")
    s = single.key_averages().set_index("name")
    assert (m["count"] == 2 * s["count"]).all()
    assert np.allclose(m["self_cpu_us"], 2 * s["self_cpu_us"])


@needs_torch
def test_export_and_tensorboard_flags_write_loadable_traces(shell, tmp_path):
    out = tmp_path / "cell.json.gz"
    tb = tmp_path / "tb"
    result, captured = run(
        shell,
        f"%%torchprof -q -o exported --flops --shapes --export {out} --tensorboard {tb}\n"
        "import torch\na = torch.randn(32, 32)\nb = torch.mm(a, a).relu()",
    )
    assert result.error_in_exec is None
    live = shell.user_ns["exported"]
    loaded = nbprof.load_trace(out)
    pd.testing.assert_frame_equal(live.key_averages("shape"), loaded.key_averages("shape"))
    assert loaded.key_averages().set_index("name").loc["aten::mm", "flops"] == 2 * 32**3
    [tb_file] = list(tb.iterdir())
    assert tb_file.name.endswith(".pt.trace.json")
    pd.testing.assert_frame_equal(live.key_averages(), nbprof.load_trace(tb_file).key_averages())
