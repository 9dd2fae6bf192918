"""Recorded H100 traces against torch's own key_averages of the same live profiles (and the traces
a GPU check run kept in tests/data/gpu, in the same format: tests/conftest.py's ``gpu_traces``).

The oracles were computed by torch from the live profiler that wrote each trace, so they are an
independent answer for every number we derive from the file.

torch double counts kernels in one case (DESIGN.md, docs/differences.md): a profiler overhead
event ("Activity Buffer Request", ...) takes the External id of the event open at its start, so
the kernels of that op are counted in the overhead event too, and again in every ancestor. We
count each kernel once. To still compare every row exactly, ``torch_view`` re-creates torch's
double count on top of our numbers, from our own event tree; it must then match the oracle to
0.01 µs everywhere. A second test checks the difference itself: exactly those rows differ.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nbprof import load_trace
from nbprof.events import time_ns

from .conftest import TORCH_FIELDS, TRACES, gpu_params, gpu_traces, oracle, oracle_path, trace_path

FIELDS = TORCH_FIELDS
DEVICE_KINDS = {"kernel", "memcpy", "memset"}


def _gpu_annotation_names(profile) -> set[str]:
    ev = profile.events
    return set(ev.loc[ev["kind"] == "gpu_annotation", "name"].astype(str))


def torch_double_count(profile) -> pd.Series:
    """Per event: the kernel time (µs) torch adds to it because of overhead events."""
    ev = profile.events
    extra = np.zeros(len(ev))
    kinds = ev["kind"].astype(str).to_numpy()
    parent = ev["parent"].to_numpy()
    ext = ev["external_id"].to_numpy()
    dur = ev["dur_us"].to_numpy()
    work = np.isin(kinds, list(DEVICE_KINDS))
    for i in np.flatnonzero(kinds == "overhead"):
        p = parent[i]
        if p < 0:
            continue
        # the overhead event's id is its enclosing event's External id: it gets that op's kernels
        added = dur[work & (ext == ext[p])].sum()
        if added == 0:
            continue
        extra[i] += added
        a = p
        while a >= 0:  # ... and every ancestor counts them again through it
            extra[a] += added
            a = parent[a]
    return pd.Series(extra, index=ev.index)


def torch_view(profile, group_by: str) -> pd.DataFrame:
    """Our key averages with torch's overhead double count put back (see the module doc)."""
    ev = profile.events
    extra = torch_double_count(profile)
    is_overhead = (ev["kind"] == "overhead").to_numpy()
    name = ev["name"].astype(str)
    keys = [name] if group_by == "op" else [name, ev["input_shapes"].astype(str)]
    live = ~ev["merged"].to_numpy()
    frame = pd.DataFrame({"extra_total": extra.where(live, 0.0), "extra_self": extra.where(is_overhead & live, 0.0)})
    add = frame.groupby([k.to_numpy() for k in keys]).sum()
    ours = profile.key_averages(group_by).copy()
    idx = [ours["name"]] if group_by == "op" else [ours["name"], ours["input_shapes"].astype(str)]
    tuples = list(zip(*[i.to_numpy() for i in idx])) if group_by != "op" else list(ours["name"])
    plus_total = np.array([add["extra_total"].get(t, 0.0) for t in tuples])
    plus_self = np.array([add["extra_self"].get(t, 0.0) for t in tuples])
    cpu_rows = ~ours["kind"].isin(list(DEVICE_KINDS)).to_numpy()
    ours["device_total_us"] = ours["device_total_us"] + np.where(cpu_rows, plus_total, 0.0)
    ours["self_device_us"] = ours["self_device_us"] + np.where(cpu_rows, plus_self, 0.0)
    return ours


# the H100 set, then what a GPU check kept (one skipped case saying so where it kept nothing)
CASES = [pytest.param(trace_path(n), id=n) for n in TRACES] + gpu_params(gpu_traces(), "GPU check traces")


def _oracle_of(path) -> dict:
    import json

    return json.loads(oracle_path(path).read_text())


def _oracle_rows(o: dict, group_by: str, gpu_annotations: set[str]):
    rows = o["rows"] if group_by == "op" else o["rows_by_input_shape"]
    for r in rows:
        on_device = r["device_type"].endswith("CUDA")
        if on_device and r["key"] in gpu_annotations:
            continue  # torch's GPU-annotation rows: a known torch error, checked separately
        yield r, on_device


def _index(frame: pd.DataFrame, group_by: str) -> dict:
    out = {}
    for r in frame.to_dict("records"):
        key = (r["name"], r["kind"] in DEVICE_KINDS)
        if group_by == "shape":
            key += (str(r["input_shapes"]),)
        out[key] = r
    return out


@pytest.mark.parametrize("group_by", ["op", "shape"])
@pytest.mark.parametrize("path", CASES)
def test_every_oracle_row_matches(path, group_by):
    o = _oracle_of(path)
    if group_by == "shape" and "rows_by_input_shape" not in o:
        pytest.skip("recorded without input shapes")
    name = path.name
    profile = load_trace(path)
    _unless_torch_lists_frames(profile, o)
    ours = _index(torch_view(profile, group_by), group_by)
    gpu_annotations = _gpu_annotation_names(profile)
    compared = 0
    for r, on_device in _oracle_rows(o, group_by, gpu_annotations):
        key = (r["key"], on_device) + ((str(r["input_shapes"]),) if group_by == "shape" else ())
        assert key in ours, f"{name}: torch reports {key}, we do not"
        row = ours[key]
        for theirs, mine in FIELDS.items():
            tol = 0 if theirs == "count" or "memory" in theirs else 0.01
            assert abs(row[mine] - r[theirs]) <= tol, (name, key, theirs, row[mine], r[theirs])
        compared += 1
    assert compared >= (15 if path.parent == trace_path("x").parent else 5)  # a GPU check's small cells: fewer
    # and we report no row torch does not (GPU annotation rows aside, which we leave out)
    oracle_keys = {
        (r["key"], dev) + ((str(r["input_shapes"]),) if group_by == "shape" else ())
        for r, dev in _oracle_rows(o, group_by, gpu_annotations)
    }
    assert set(ours) == oracle_keys


@pytest.mark.parametrize("name", TRACES)
def test_we_count_each_kernel_once(name):
    """Where torch double counts (under overhead events), we differ by exactly that amount;
    everywhere else our device times are torch's."""
    profile = load_trace(trace_path(name))
    extra = torch_double_count(profile)
    ours = profile.key_averages("op")
    o = {(r["key"], r["device_type"].endswith("CUDA")): r for r in oracle(name)["rows"]}
    affected = set(profile.events.loc[extra.to_numpy() > 0, "name"].astype(str))
    assert affected, "these traces all have overhead events inside ops with kernels"
    for r in ours.to_dict("records"):
        theirs = o[(r["name"], r["kind"] in DEVICE_KINDS)]
        if r["name"] in affected:
            assert theirs["device_time_total"] - r["device_total_us"] > 0.5
        else:
            assert abs(theirs["device_time_total"] - r["device_total_us"]) <= 0.01
    # a kernel is counted once: the device time under the top-level events equals the kernel total
    ev = profile.events
    roots = ev[(ev["parent"] < 0) & ev["kind"].isin(["op", "annotation", "runtime", "overhead"]) & ~ev["merged"]]
    kernels = ev[ev["kind"].isin(list(DEVICE_KINDS))]
    attributed = kernels[kernels["parent"] >= 0]["dur_us"].sum()
    assert roots["device_total_us"].sum() == pytest.approx(attributed, abs=0.01)


def test_gpu_annotation_is_not_a_self_time_row():
    """torch lists the "forward" GPU annotation with self CUDA time 437% of the total; we report
    the annotation's CPU row, whose device time is the kernels launched inside it."""
    profile = load_trace(trace_path("cnn_train_cuda"))
    o = [r for r in oracle("cnn_train_cuda")["rows"] if r["key"] == "forward" and r["device_type"].endswith("CUDA")]
    assert o and o[0]["self_device_time_total"] > 4 * profile.summary.self_device_us  # torch's 437 %
    ours = profile.key_averages().set_index("name")
    assert ours.loc["forward", "kind"] == "annotation"
    assert ours.loc["forward", "self_device_us"] == 0
    assert 0 < ours.loc["forward", "device_total_us"] < profile.summary.self_device_us


def _unless_torch_lists_frames(profile, o: dict) -> None:
    """torch 2.13 lists with_stack's Python frames as rows and parents (docs/differences.md, section
    3): a GPU check run on such a torch keeps traces whose oracle cannot be ours."""
    from .gpu_checks import python_frame_rows

    frames = python_frame_rows(profile, (r["key"] for r in o["rows"]))
    if frames:
        pytest.skip(f"torch {o.get('torch')} lists Python frames as rows ({len(frames)}; docs/differences.md)")


@pytest.mark.parametrize("path", CASES)
def test_self_totals_match_torch(path):
    profile = load_trace(path)
    _unless_torch_lists_frames(profile, _oracle_of(path))
    assert profile.summary.self_cpu_us == pytest.approx(_oracle_of(path)["self_cpu_time_total"], abs=0.01)


def test_same_name_children_are_merged_like_torch():
    """aten::div inside aten::div is one call in torch's table (its _remove_dup_nodes)."""
    profile = load_trace(trace_path("cnn_train_cuda"))
    ev = profile.events
    div = ev[ev["name"] == "aten::div"]
    assert len(div) == 6 and div["merged"].sum() == 3
    row = profile.key_averages().set_index("name").loc["aten::div"]
    assert row["count"] == 3


def test_times_are_exact_nanoseconds():
    """ts values like 4484342768307.534 are not exact in float64; we recover the integer ns.

    The independent answer: the file's own decimals, parsed exactly with Decimal."""
    import gzip
    import json
    from decimal import Decimal

    with gzip.open(trace_path("cnn_train_cuda")) as f:
        raw = json.load(f, parse_float=Decimal)
    kernels = sorted(
        (int(e["ts"] * 1000), int(e["dur"] * 1000)) for e in raw["traceEvents"] if e.get("cat") == "kernel"
    )
    profile = load_trace(trace_path("cnn_train_cuda"))
    ev = profile.events[profile.events["kind"] == "kernel"]
    origin = profile.meta.origin_ns
    ours = sorted(zip((time_ns(ev["start_us"].to_numpy()) + origin).tolist(), time_ns(ev["dur_us"].to_numpy()).tolist()))
    assert ours == kernels


def test_cuda_collection_paused_for_the_middle_pass():
    """cnn_cuda_toggled: three forward/backward passes, CUDA collection off for the second
    (toggle_collection_dynamic, what nbprof.cuda_collection(False) calls). The CPU ops of all
    three passes are there; the kernels of the second are not, and its ops show no device time."""
    profile = load_trace(trace_path("cnn_cuda_toggled"))
    ev = profile.events
    conv = ev[(ev["name"] == "aten::cudnn_convolution") & ~ev["merged"]].sort_values("start_us")
    assert len(conv) == 12  # 4 conv blocks x 3 passes, all on the CPU side
    with_kernels = (conv["device_total_us"] > 0).to_numpy()
    assert with_kernels.tolist() == [True] * 4 + [False] * 4 + [True] * 4
    # and no kernel at all while the second pass ran
    second = conv.iloc[4:8]
    lo, hi = second["start_us"].min(), (second["start_us"] + second["dur_us"]).max()
    launches = ev[(ev["kind"] == "runtime") & ev["name"].astype(str).str.startswith("cudaLaunch")]
    assert not ((launches["start_us"] >= lo) & (launches["start_us"] <= hi)).any()
