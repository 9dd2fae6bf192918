"""p.overview(): the TensorBoard plugin's step-time breakdown.

Oracles: the plugin's own unit tests (pytorch/kineto ``tb_plugin/test/test_profiler.py``: the
``steps_costs`` each test expects, its traces in tests/data/wild or written here as the plugin
writes them), and a plain sweep over the raw JSON of recorded traces (the H100 CNN trace, the
plugin's resnet50 sample with six steps and a slow DataLoader) that classifies every instant by
the plugin's rule, in exact nanoseconds read as decimals, without nbprof's code.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof.analysis.overview import CATEGORIES, overview_advice

from .test_tb_plugin import NLL, kernel, load, load_events, memcpy, op, runtime

DATA = Path(__file__).parent / "data"

# the plugin's ProfileRole order, as overview columns
ROLES = ("kernel_us", "memcpy_us", "memset_us", "runtime_us", "dataloader_us", "cpu_exec_us", "other_us")


def costs(p, step) -> dict:
    o = p.overview()
    row = o[o["step"] == step].iloc[0]
    return {c: float(row[c]) for c in ("duration_us", *ROLES)}


def expect(duration, kernel=0, memcpy=0, memset=0, runtime=0, dataloader=0, cpu_exec=0, other=0) -> dict:
    return {"duration_us": duration, "kernel_us": kernel, "memcpy_us": memcpy, "memset_us": memset,
            "runtime_us": runtime, "dataloader_us": dataloader, "cpu_exec_us": cpu_exec, "other_us": other}


def test_columns_and_categories_in_priority_order():
    assert CATEGORIES == ROLES
    o = load("test_all_categories").overview()
    assert list(o.columns) == ["step", "start_us", "duration_us", *ROLES]
    assert o["step"].tolist() == [1, "all"]


def test_all_categories():
    # the plugin: Kernel 15, Memcpy 10, Memset 5, Runtime 30, DataLoader 180, CpuOp 35, Other 125
    assert costs(load("test_all_categories"), 1) == expect(400, 15, 10, 5, 30, 180, 35, 125)


def test_runtime_called_by_profilerstep(tmp_path):
    events = [op("ProfilerStep#1", 100, 300, 2), runtime("cudaLaunchKernel", 130, 20, 335, 2),
              {**kernel("void gemmSN_TN_kernel_64addr", 220, 8, 335, 2)}]
    assert costs(load_events(tmp_path, events), 1) == expect(300, kernel=8, runtime=20, other=300 - 8 - 20)


def test_no_profilerstep(tmp_path):
    """No steps: the whole profile is one step (the plugin's rule), the "all" row only."""
    events = [op("aten::to", 100, 60, 3, tid="123"), op("aten::nll_loss_backward", 300, 70, 4),
              kernel(NLL, 320, 100, 40348, 4), runtime("cudaLaunchKernel", 310, 20, 40348, 4)]
    p = load_events(tmp_path, events)
    assert p.overview()["step"].tolist() == ["all"]
    assert costs(p, "all") == expect((320 + 100) - 100, kernel=100, runtime=320 - 310, cpu_exec=60 + (310 - 300),
                                     other=300 - (100 + 60))


def test_multiple_profilersteps_no_overlap(tmp_path):
    events = [op("ProfilerStep#1", 100, 200, 1, tid="123"), op("aten::to", 200, 60, 2, tid="123"),
              op("ProfilerStep#2", 350, 150, 3, tid="123"), op("aten::mm", 360, 50, 4, tid="123"),
              memcpy(280, 40, 334, 2), runtime("cudaMemcpyAsync", 250, 5, 334, 2, tid="123"),
              kernel(NLL, 410, 200, 40348, 4), runtime("cudaLaunchKernel", 400, 5, 40348, 4, tid="123")]
    p = load_events(tmp_path, events)
    # the step's span runs to the end of the device work it launched ("device side takes effect")
    assert costs(p, 1) == expect(320 - 100, memcpy=40, runtime=5, cpu_exec=60 - 5, other=200 - 60 - 20)
    assert costs(p, 2) == expect(610 - 350, kernel=200, runtime=5, cpu_exec=50 - 5, other=360 - 350)
    # the plugin's average step is the "all" row over the number of steps
    assert costs(p, "all")["duration_us"] / 2 == ((320 - 100) + (610 - 350)) / 2


def test_multiple_profilersteps_with_overlap(tmp_path):
    """A kernel of an earlier step runs into step 1: step 1 starts when it ended; step 1's memcpy
    runs into step 2: step 2 starts when step 1's device work ended."""
    events = [op("ProfilerStep#1", 100, 200, 1, tid="123"), op("aten::to", 200, 60, 2, tid="123"),
              op("ProfilerStep#2", 350, 150, 3, tid="123"), op("aten::mm", 360, 50, 4, tid="123"),
              kernel(NLL, 150, 90, 123, 123), memcpy(280, 100, 334, 2),
              runtime("cudaMemcpyAsync", 250, 5, 334, 2, tid="123"), kernel(NLL, 410, 200, 40348, 4),
              runtime("cudaLaunchKernel", 400, 5, 40348, 4, tid="123")]
    p = load_events(tmp_path, events)
    assert costs(p, 1) == expect((280 + 100) - (150 + 90), memcpy=100, runtime=5,
                                 cpu_exec=(200 + 60) - (150 + 90) - 5, other=280 - (200 + 60))
    assert costs(p, 2) == expect(610 - (280 + 100), kernel=200, runtime=5, cpu_exec=(280 + 100) - 360 + (410 - 405),
                                 other=0)
    o = p.overview()
    assert o["start_us"].tolist()[:2] == [(150 + 90) - 100, (280 + 100) - 100]  # µs since the first event (100)


def test_last_steps_no_kernel(tmp_path):
    """The plugin's step 1: (150 + 180) - (90 + 20). It drops steps 2 and 3 (no kernel launched);
    nbprof keeps them, as steps() does: step 2 from where step 1's kernel ended to its range's end."""
    events = [op("ProfilerStep#1", 100, 200, 1, tid="123"), op("aten::to", 120, 10, 2, tid="123"),
              op("ProfilerStep#2", 300, 100, 3, tid="123"), op("ProfilerStep#3", 400, 50, 4, tid="123"),
              kernel(NLL, 90, 20, 123, 123), runtime("cudaMemcpyAsync", 125, 5, 334, 2, tid="123"),
              kernel(NLL, 150, 180, 334, 2)]
    p = load_events(tmp_path, events)
    assert costs(p, 1)["duration_us"] == (150 + 180) - (90 + 20)
    assert p.overview()["step"].tolist() == [1, 2, 3, "all"]
    assert costs(p, 2)["duration_us"] == 400 - (150 + 180) and costs(p, 3)["duration_us"] == 50


def test_pure_cpu(tmp_path):
    events = [op("ProfilerStep#1", 100, 200, 1, tid="123"), op("aten::to", 120, 10, 2, tid="123"),
              op("ProfilerStep#2", 300, 100, 3, tid="123"), op("aten::mm", 350, 40, 4, tid="123")]
    p = load_events(tmp_path, events)
    assert costs(p, 1) == expect(200, cpu_exec=10, other=200 - 10)
    assert costs(p, 2) == expect(100, cpu_exec=40, other=100 - 40)
    assert costs(p, "all") == expect(300, cpu_exec=50, other=250)


# ---------------------------------------------------------------- the raw JSON, swept by hand

_ROLE_OF_CAT = {"kernel": 0, "memcpy": 1, "gpu_memcpy": 1, "memset": 2, "gpu_memset": 2, "runtime": 3,
                "cuda_runtime": 3, "cuda_driver": 3}
_CPU_CATS = {"operator", "cpu_op", "user_annotation", "python_function"}


def _ns(x) -> int:
    return int(Decimal(x) * 1000)


def raw_overview(path: Path) -> list[dict]:
    """The plugin's breakdown from the raw trace: plain loops, exact ns from the JSON's decimals."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        trace = json.loads(f.read(), parse_float=Decimal)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    roles: list[list[tuple[int, int]]] = [[] for _ in range(6)]
    steps, cpu_spans, runtimes, device = [], [], {}, {}
    for e in events:
        if e.get("ph") != "X":
            continue
        cat, name = e.get("cat", "").lower(), e["name"]
        s = _ns(e["ts"])
        span = (s, s + _ns(e.get("dur", 0)))
        if cat in _ROLE_OF_CAT:
            roles[_ROLE_OF_CAT[cat]].append(span)
            corr = e.get("args", {}).get("correlation")
            if cat.startswith("cuda") or cat == "runtime":
                runtimes[corr] = span
            else:
                device.setdefault(corr, []).append(span)
        elif cat in _CPU_CATS:
            if name.startswith("ProfilerStep#"):
                steps.append(span)
            elif (name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__")) or \
                    name.startswith("enumerate(DataPipe)#"):
                roles[4].append(span)
            else:
                roles[5].append(span)
            cpu_spans.append(span)
    steps.sort()
    if not steps:
        steps = [(min(s for s, _ in cpu_spans), max(e for _, e in cpu_spans))]
    # each step stretched over the device work launched by the runtime calls inside it
    matched, dev = set(), [None] * len(steps)
    for corr, (rs, re_) in runtimes.items():
        for i, (s, e) in enumerate(steps):
            if s <= rs and re_ <= e and corr in device:
                for d in device[corr]:
                    matched.add((corr, d))
                    lo, hi = dev[i] or (d[0], d[1])
                    dev[i] = (min(lo, d[0]), max(hi, d[1]))
    if matched:
        prev = steps[0][0]
        if dev[0] is not None:
            for corr, spans in device.items():
                for d in spans:
                    if (corr, d) not in matched and d[1] < dev[0][0]:
                        prev = max(prev, d[1])
        out = []
        for i, (s, e) in enumerate(steps):
            start = max(prev, s)
            end = max(e, dev[i][1]) if dev[i] else e
            end = max(end, start)
            out.append((start, end))
            prev = end
        steps = out
    # sweep: at each boundary, the first role with an event running
    bounds = []
    for r, spans in enumerate(roles):
        for s, e in spans:
            if e > s:
                bounds += [(s, r, 1), (e, r, -1)]
    bounds.sort()
    running = [0] * 6
    pieces = []  # (start, end, role) of time covered by some role
    for (t, r, d), nxt in zip(bounds, bounds[1:] + [(None, 0, 0)]):
        running[r] += d
        if nxt[0] is not None and nxt[0] > t:
            top = next((k for k in range(6) if running[k] > 0), None)
            if top is not None:
                pieces.append((t, nxt[0], top))
    rows = []
    for s, e in steps:
        c = [0] * 7
        for ps, pe, r in pieces:
            c[r] += max(0, min(pe, e) - max(ps, s))
        c[6] = (e - s) - sum(c[:6])
        rows.append({"duration_ns": e - s, **{ROLES[k]: c[k] for k in range(7)}})
    return rows


@pytest.mark.parametrize("path", [DATA / "cnn_train_cuda.trace.json.gz", DATA / "two_streams.trace.json.gz",
                                  DATA / "wild" / "resnet50_num_workers_0.pt.trace.json.gz"],
                         ids=["h100_cnn", "h100_two_streams", "tb_resnet50_cut"])
def test_equals_a_sweep_over_the_raw_json(path):
    """Recorded traces without steps: the whole trace is the one step."""
    check_against_raw_json(path)


def check_against_raw_json(path: Path) -> None:
    expected = raw_overview(path)
    o = nbprof.load_trace(path).overview()
    steps = o[o["step"] != "all"] if len(expected) > 1 else o
    assert len(steps) == len(expected)
    for (_, row), want in zip(steps.iterrows(), expected):
        assert round(row["duration_us"] * 1000) == want["duration_ns"]
        for c in ROLES:
            assert round(row[c] * 1000) == want[c], (row["step"], c)
    # every step, and the "all" row, adds up to its duration
    assert np.allclose(o[list(ROLES)].sum(axis=1), o["duration_us"], rtol=0, atol=1e-6)
    if len(expected) > 1:
        all_row = o[o["step"] == "all"].iloc[0]
        assert all_row["duration_us"] == pytest.approx(sum(w["duration_ns"] for w in expected) / 1000)


def test_resnet50_data_loading_advice():
    """The plugin's sample was recorded to show a slow DataLoader (num_workers=0): most of the time
    of its first part is data loading, and the advice says num_workers / pin_memory."""
    p = nbprof.load_trace(DATA / "wild" / "resnet50_num_workers_0.pt.trace.json.gz")
    all_row = p.overview().set_index("step").loc["all"]
    share = all_row["dataloader_us"] / all_row["duration_us"]
    assert share > 0.5
    advice = overview_advice(all_row, has_device=True)
    assert len(advice) == 2 and "num_workers" in advice[0] and "pin_memory" in advice[0]
    assert f"{100 * share:.1f}%" in advice[0]
    busy = (all_row["kernel_us"] + all_row["memcpy_us"] + all_row["memset_us"]) / all_row["duration_us"]
    assert advice[1] == (f"The GPU is busy {100 * busy:.1f}% of the step time: it waits for the next batch from "
                         "the DataLoader most of the time.")


def test_advice_only_where_a_rule_applies():
    row = pd.Series({"duration_us": 100.0, "kernel_us": 80.0, "memcpy_us": 0.0, "memset_us": 0.0, "runtime_us": 5.0,
                     "dataloader_us": 5.0, "cpu_exec_us": 5.0, "other_us": 5.0})
    assert overview_advice(row, has_device=True) == []  # 5 % loading is not above 5 %; GPU busy 80 %
    idle = row.copy()
    idle[["kernel_us", "cpu_exec_us"]] = [20.0, 65.0]
    (advice,) = overview_advice(idle, has_device=True)
    assert advice.startswith("The GPU is busy 20.0% of the step time: the CPU is the bound")
    assert overview_advice(idle, has_device=False) == []  # a CPU-only profile has no GPU to keep busy
    idle[["cpu_exec_us", "other_us"]] = [5.0, 65.0]
    assert overview_advice(idle, has_device=True)[0].endswith("try a bigger batch (it can change how the model "
                                                               "converges).")


def test_empty_profile():
    from nbprof.collect.chrome_trace import empty_trace
    from nbprof.model import TorchProfile

    o = TorchProfile.from_trace(empty_trace()).overview()
    assert o.empty and list(o.columns) == ["step", "start_us", "duration_us", *ROLES]


def test_live_steps_with_a_slow_data_loader(tmp_path):
    """A CPU training loop under torch's own schedule, a DataLoader whose batches take ~2 ms: the
    trace torch writes, swept by hand, against nbprof's overview of the same file; and the advice."""
    torch = pytest.importorskip("torch")
    import time

    class Slow(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 64

        def __getitem__(self, i: int):
            time.sleep(0.0005)
            return torch.randn(16), torch.randn(4)

    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(Slow(), batch_size=4, num_workers=0)
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=3, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule) as prof:
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
            if i == 4:
                break
    path = tmp_path / "live.json"
    prof.export_chrome_trace(str(path))
    p = nbprof.load_trace(path)
    o = p.overview()
    assert o["step"].tolist()[:-1] == p.steps()["step"].tolist() and len(o) == 4
    # no device work: each step is its ProfilerStep range
    assert np.allclose(o["duration_us"][:3], p.steps()["dur_us"], rtol=0, atol=1e-6)
    check_against_raw_json(path)
    all_row = o.set_index("step").loc["all"]
    assert all_row["dataloader_us"] / all_row["duration_us"] > 0.3  # 4 sleeps of 0.5 ms a batch
    (advice,) = overview_advice(all_row, has_device=False)
    assert "num_workers" in advice and "pin_memory" not in advice


def test_report_shows_the_breakdown_above_the_tabs_when_steps_exist(tmp_path):
    events = [op("ProfilerStep#1", 100, 200, 1, tid="123"), op("aten::to", 200, 60, 2, tid="123"),
              op("ProfilerStep#2", 350, 150, 3, tid="123"), op("aten::mm", 360, 50, 4, tid="123"),
              memcpy(280, 40, 334, 2), runtime("cudaMemcpyAsync", 250, 5, 334, 2, tid="123"),
              kernel(NLL, 410, 200, 40348, 4), runtime("cudaLaunchKernel", 400, 5, 40348, 4, tid="123")]
    p = load_events(tmp_path, events)
    html = p.report().html(include_library=False)
    block = html[html.index("Step time breakdown"):html.index('class="nbprof-tabs"')]
    assert "step 1" in block and "step 2" in block
    # a bar's parts are the step's categories, with their times in the tooltips
    assert 'title="step 2: Kernel 200.0 µs (76.9%)"' in block
    assert "all 2 steps, 480.0 µs: Kernel 41.7% · Memcpy 8.3% · Runtime 2.1% · CPU Exec 20.8% · Other 27.1%" in block
    # the GPU is busy 18 % of step 1, 77 % of step 2: 50 % of both, not below half, so no advice
    assert "The GPU is busy" not in block
    text = p.report().text()
    assert "step time (2 steps, 480.0 µs): Kernel 41.7% · Memcpy 8.3%" in text
    # without steps: no breakdown in the report
    no_steps = load_events(tmp_path, [e for e in events if not e["name"].startswith("ProfilerStep")])
    assert "Step time breakdown" not in no_steps.report().html(include_library=False)
    assert "step time (" not in no_steps.report().text()


def test_h100_cnn_train_steps_equal_a_sweep_over_the_raw_json(tmp_path):
    """The recorded H100 CNN training loop with its ``train_step`` ranges named as torch names the
    steps of a schedule (``ProfilerStep#N``): three steps, each stretched over the kernels it
    launched, against the sweep over the same file."""
    with gzip.open(DATA / "cnn_train_cuda.trace.json.gz", "rt") as f:
        doc = json.load(f)
    n = 0
    for e in doc["traceEvents"]:
        if e.get("cat") == "user_annotation" and e["name"] == "train_step":
            n += 1
            e["name"] = f"ProfilerStep#{n}"
    path = tmp_path / "cnn_steps.json"
    path.write_text(json.dumps(doc))
    p = nbprof.load_trace(path)
    o = p.overview()
    assert o["step"].tolist() == [1, 2, 3, "all"]
    check_against_raw_json(path)
    # the device work a step launched runs past its range: the step ends with it
    steps = p.steps()
    ends = (o["start_us"] + o["duration_us"])[:3].to_numpy()
    assert (ends >= (steps["start_us"] + steps["dur_us"]).to_numpy()).all()
    assert o["kernel_us"][:3].gt(0).all()
