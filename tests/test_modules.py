"""p.modules() and ``--modules``: the nn.Module hierarchy.

Oracles: torch's own ``nn.Module:`` events of a live run (``prof.events()``: each event's
``cpu_parent`` chain gives its enclosing module, ``cpu_time_total`` / ``device_time_total`` its
times), added up per module path here, in the test; on the recorded H100 transformer trace, the
raw JSON with a plain loop (a module call's kernels are those whose launching runtime call, by
correlation id, ran on the call's thread within it).
"""

from __future__ import annotations

import gzip
import json
import warnings
from decimal import Decimal

import pytest

import nbprof

from .conftest import needs_torch, reports, run, trace_path

pytestmark = needs_torch

MODEL = """
import torch
from torch import nn

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(32, 32)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.lin(x))

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.blocks(x))

net = Net()
x = torch.randn(16, 32)
net(x)
"""


def torch_module_totals(prof) -> dict[str, dict]:
    """Per module path, from torch's own events: calls, cpu_time_total and device_time_total
    summed, and the self times (totals less the direct child modules' totals)."""
    mods = [e for e in prof.events() if e.name.startswith("nn.Module: ")]

    def enclosing(e):
        p = e.cpu_parent
        while p is not None and not p.name.startswith("nn.Module: "):
            p = p.cpu_parent
        return p

    def path(e) -> str:
        p = enclosing(e)
        own = e.name[len("nn.Module: "):]
        return own if p is None else f"{path(p)}.{own}"

    out: dict[str, dict] = {}
    for e in mods:
        row = out.setdefault(path(e), {"calls": 0, "cpu_total_us": 0.0, "device_total_us": 0.0, "child_cpu": 0.0,
                                       "child_device": 0.0})
        row["calls"] += 1
        row["cpu_total_us"] += e.cpu_time_total
        row["device_total_us"] += e.device_time_total
        p = enclosing(e)
        if p is not None:
            parent = out.setdefault(path(p), {"calls": 0, "cpu_total_us": 0.0, "device_total_us": 0.0,
                                              "child_cpu": 0.0, "child_device": 0.0})
            parent["child_cpu"] += e.cpu_time_total
            parent["child_device"] += e.device_time_total
    for row in out.values():
        row["self_cpu_us"] = row["cpu_total_us"] - row.pop("child_cpu")
        row["self_device_us"] = row["device_total_us"] - row.pop("child_device")
    return out


def test_modules_flag_in_a_real_shell_equals_torchs_module_events(shell, tmp_path):
    run(shell, MODEL)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result, captured = run(shell, "%%torchprof --modules -o mods\nfor _ in range(3):\n    y = net(x)")
    assert result.error_in_exec is None and result.error_before_exec is None
    # torch 2.15 deprecates with_modules (eager models' modules come from the Python tracer)
    assert not [w for w in caught if "with_modules" in str(w.message)]
    p = shell.user_ns["mods"]
    assert p.meta.with_modules and p.collected["modules"] and not p.collected["stack"]
    m = p.modules()
    expected = torch_module_totals(p.profiler)
    if not expected:  # torch 2.4's events() leaves the Python tracer's events out: torch's own trace file has them
        p.profiler.export_chrome_trace(str(tmp_path / "torch.json"))
        expected = raw_module_totals(tmp_path / "torch.json")
    assert m["module"].tolist() == ["Net_0", "Net_0.Sequential_0", "Net_0.Sequential_0.Block_0",
                                    "Net_0.Sequential_0.Block_0.Linear_0", "Net_0.Sequential_0.Block_0.ReLU_0",
                                    "Net_0.Sequential_0.Block_1", "Net_0.Sequential_0.Block_1.Linear_1",
                                    "Net_0.Sequential_0.Block_1.ReLU_1", "Net_0.Linear_2"]
    assert set(m["module"]) == set(expected)
    for _, row in m.iterrows():
        want = expected[row["module"]]
        assert row["calls"] == want["calls"] == 3
        for col in ("cpu_total_us", "self_cpu_us", "device_total_us", "self_device_us"):
            assert row[col] == pytest.approx(want[col], abs=0.01), (row["module"], col)
    head = m.set_index("module").loc["Net_0.Linear_2"]
    assert (head["name"], head["type"], head["parent"], head["depth"]) == ("Linear_2", "Linear", "Net_0", 1)
    # the report: "modules" among what was collected, and the Modules tab
    html = reports(captured)[0]["text/html"]
    assert "collected: CPU, modules" in html and ">Modules</label>" in html
    assert "Sequential_0" in html


def test_without_modules_there_is_no_module_tree_and_no_tab(shell):
    run(shell, MODEL)
    result, captured = run(shell, "%%torchprof -o plain\ny = net(x)")
    p = shell.user_ns["plain"]
    assert p.modules().empty and list(p.modules().columns) == [
        "module", "name", "type", "parent", "depth", "calls", "cpu_total_us", "self_cpu_us", "device_total_us",
        "self_device_us"]
    html = reports(captured)[0]["text/html"]
    assert ">Modules</label>" not in html


def raw_module_totals(path) -> dict[str, dict]:
    """Per module path, from a trace file with plain loops: a call's path is the names of the
    module calls around it on its thread (outermost first); its device time the work whose
    launching runtime call (same correlation id) ran on that thread within the call."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:  # torch 2.4 can write a stray byte in a Python frame's name
        doc = json.loads(f.read().decode("utf-8", "replace"), parse_float=Decimal)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    runtime = {e["args"]["correlation"]: e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    calls = [e for e in events if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")]

    def around(c):
        return sorted((o for o in calls if o is not c and o["tid"] == c["tid"] and o["ts"] <= c["ts"]
                       and c["ts"] + c["dur"] <= o["ts"] + o["dur"]), key=lambda o: (o["ts"], -o["dur"]))

    out: dict[str, dict] = {}
    for c in calls:
        chain = around(c)
        path = ".".join([o["name"][len("nn.Module: "):] for o in chain] + [c["name"][len("nn.Module: "):]])
        s, end = c["ts"], c["ts"] + c["dur"]
        dev = sum((k["dur"] for k in device if (r := runtime.get(k["args"].get("correlation"))) is not None
                   and r["tid"] == c["tid"] and s <= r["ts"] < end), Decimal(0))
        children = [o for o in calls if (a := around(o)) and a[-1] is c]
        child_dev = Decimal(0)
        for o in children:
            child_dev += sum((k["dur"] for k in device if (r := runtime.get(k["args"].get("correlation"))) is not None
                              and r["tid"] == o["tid"] and o["ts"] <= r["ts"] < o["ts"] + o["dur"]), Decimal(0))
        row = out.setdefault(path, {"calls": 0, "cpu_total_us": Decimal(0), "self_cpu_us": Decimal(0),
                                    "device_total_us": Decimal(0), "self_device_us": Decimal(0)})
        row["calls"] += 1
        row["cpu_total_us"] += c["dur"]
        row["self_cpu_us"] += c["dur"] - sum((o["dur"] for o in children), Decimal(0))
        row["device_total_us"] += dev
        row["self_device_us"] += dev - child_dev
    return {k: {c: float(v) if c != "calls" else v for c, v in row.items()} for k, row in out.items()}


def test_h100_transformer_modules_equal_the_raw_json():
    """torch 2.11's trace of a 2-layer TransformerEncoder on an H100 (--stack): module times and the
    kernels launched inside each call, summed by plain loops over the file."""
    expected = raw_module_totals(trace_path("transformer_infer_stack"))
    m = nbprof.load_trace(trace_path("transformer_infer_stack")).modules().set_index("module")
    assert m.index.tolist() == ["TransformerEncoder_0", "TransformerEncoder_0.TransformerEncoderLayer_0",
                                "TransformerEncoder_0.TransformerEncoderLayer_1"]
    assert set(expected) == set(m.index)
    for path, want in expected.items():
        row = m.loc[path]
        assert row["calls"] == want["calls"] == 2
        for col in ("cpu_total_us", "self_cpu_us", "device_total_us", "self_device_us"):
            assert row[col] == pytest.approx(want[col], abs=1e-6), (path, col)
    top = m.loc["TransformerEncoder_0"]
    assert top["device_total_us"] > 0 and top["self_device_us"] == 0  # its kernels run in its layers


def test_modules_survive_the_trace_round_trip(shell, tmp_path):
    run(shell, MODEL)
    run(shell, "%%torchprof --modules -q -o mods2\ny = net(x)")
    p = shell.user_ns["mods2"]
    back = nbprof.load_trace(p.save(tmp_path / "m.json.gz"))
    a, b = p.modules(), back.modules()
    assert back.meta.with_modules and back.collected["modules"]
    assert a["module"].tolist() == b["module"].tolist() and a["calls"].tolist() == b["calls"].tolist()
    assert (a["cpu_total_us"] - b["cpu_total_us"]).abs().max() < 0.002


def test_tb_plugin_build_module_hierarchy(tmp_path):
    """The TensorBoard plugin's test_build_module_hierarchy (its trace, names without torch's
    instance numbers): two top modules, Conv2 and MyModule (3 calls), MyModule's child Linear."""
    def py(name, ts, dur, pid_, parent=None, module=None):
        args = {"Python id": pid_, "Python parent id": parent}
        if module is not None:
            args["Python module id"] = module
        return {"ph": "X", "cat": "python_function", "name": name, "pid": 1908, "tid": 1908, "ts": ts, "dur": dur,
                "args": args}

    def addmm(ts, dur, caller):
        return {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1908, "tid": 1908, "ts": ts, "dur": dur,
                "args": {"External id": 12182, "python_caller_id": caller}}

    events = [py("test_root", 1, 19367, 1)]
    for i, t in enumerate((2, 1000, 2000)):
        mine, lin = 2 + 2 * i, 3 + 2 * i
        events += [py("nn.Module: MyModule", t, 211, mine, 1, 0), py("nn.Module: Linear", t + (3 if i == 0 else 1), 62,
                                                                      lin, mine, 1),
                   addmm(t + (8 if i == 0 else 2), (31, 32, 33)[i], lin)]
    events.append(py("nn.Module: Conv2", 3000, 211, 8, 1, 100))
    path = tmp_path / "modules.json"
    path.write_text(json.dumps(events))
    m = nbprof.load_trace(path).modules()
    assert m["module"].tolist() == ["MyModule", "MyModule.Linear", "Conv2"]
    assert m["type"].tolist() == ["MyModule", "Linear", "Conv2"] and m["parent"].tolist() == ["", "MyModule", ""]
    assert m["calls"].tolist() == [3, 3, 1]
    assert m["cpu_total_us"].tolist() == [3 * 211, 3 * 62, 211]
    assert m["self_cpu_us"].tolist() == [3 * (211 - 62), 3 * 62, 211]
