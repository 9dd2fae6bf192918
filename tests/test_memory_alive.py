"""What a cell leaves allocated, what each step keeps, and the line that holds it (issue 40):
``p.alive_at_end()``, ``p.memory_growth()``, ``lines().alive_at_end_bytes``, the findings
``memory_growth`` and ``memory_peak`` (by line), in a real IPython shell, against bytes counted by
hand and torch's own ``[memory]`` records in the raw trace it writes.

The model: ``Linear(32, 256) -> ReLU -> Linear(256, 10)`` on a batch of 64, float32. Without
``no_grad``, a forward pass allocates the first linear's output (64 x 256 x 4 = 65,536 B), ReLU's
output (65,536 B) and the second linear's output (64 x 10 x 4 = 2,560 B); the first is freed
once ReLU has read it. Kept in a list, the output holds its autograd graph, whose ReLU node saved
its result: each step keeps 65,536 + 2,560 = 68,096 B. Under ``no_grad`` nothing is saved: a kept
output is 2,560 B, a ``.item()`` nothing.
"""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from .conftest import needs_torch, run

pytestmark = needs_torch

B, D, H, O = 64, 32, 256, 10
HIDDEN_BYTES = B * H * 4  # 65,536: the first linear's output, and ReLU's
OUT_BYTES = B * O * 4  # 2,560
KEPT_PER_STEP = HIDDEN_BYTES + OUT_BYTES  # ReLU's saved result + the output the list keeps
ALLOCATED_PER_STEP = 2 * HIDDEN_BYTES + OUT_BYTES
STEPS = 5

SETUP = f"""\
import torch, nbprof
torch.manual_seed(0)
net_m = torch.nn.Sequential(torch.nn.Linear({D}, {H}), torch.nn.ReLU(), torch.nn.Linear({H}, {O}))
xb = torch.randn({B}, {D})
net_m(xb).sum().item()
"""
LEAK = f"""\
%%torchprof --lines --memory -q -o leak
outputs = []
for i in range({STEPS}):
    outputs.append(net_m(xb))
"""
FIXED = f"""\
%%torchprof --lines --memory -q -o fixed
total = 0.0
with torch.no_grad():
    for i in range({STEPS}):
        total += net_m(xb).sum().item()
"""
KEPT_NO_GRAD = f"""\
%%torchprof --lines --memory -q -o kept
outputs = []
with torch.no_grad():
    for i in range({STEPS}):
        outputs.append(net_m(xb))
"""
# the same leak, its steps marked for torch's schedule (no --lines: the finding names operators)
LEAK_STEPS = f"""\
%%torchprof --memory --schedule 0,0,{STEPS} -q -o leak_steps
outputs = []
for i in range({STEPS}):
    outputs.append(net_m(xb))
    nbprof.step()
"""


@pytest.fixture(scope="module")
def cells(ip):
    """Each cell run once in the shell: the profiles and the cells' numbers."""
    run(ip, SETUP)
    out = {}
    for name, cell in (("leak", LEAK), ("fixed", FIXED), ("kept", KEPT_NO_GRAD), ("leak_steps", LEAK_STEPS)):
        result, _ = run(ip, cell)
        assert result.error_in_exec is None and result.error_before_exec is None, name
        out[name] = (ip.user_ns[name], ip.execution_count - 1)
    return out


def _leak(cells):
    return cells["leak"][0]


def test_the_leaking_loop_leaves_exactly_the_saved_tensors_counted_by_hand(cells):
    alive = _leak(cells).alive_at_end()
    assert sorted(alive["bytes"].tolist()) == sorted([HIDDEN_BYTES, OUT_BYTES] * STEPS)
    assert int(alive["bytes"].sum()) == STEPS * KEPT_PER_STEP
    # biggest first, each with its allocation and no free
    assert alive["bytes"].is_monotonic_decreasing
    assert alive["alloc_us"].notna().all() and alive["free_us"].isna().all() and alive["lifetime_us"].isna().all()
    assert set(alive["top_op"]) == {"aten::relu", "aten::linear"}
    # every block on the cell's line that ran the model: line 4 (the magic line is 1)
    n = cells["leak"][1]
    assert set(alive["cell"]) == {f"In [{n}]"} and set(alive["line"]) == {4}
    assert set(alive["source"]) == {"    outputs.append(net_m(xb))"}


def test_the_fixed_cell_leaves_nothing(cells):
    fixed = cells["fixed"][0]
    assert len(fixed.alive_at_end()) == 0
    growth = fixed.memory_growth()
    assert len(growth) == STEPS and (growth["added_never_freed_bytes"] == 0).all()
    assert (growth["allocated_bytes"] == ALLOCATED_PER_STEP + 4).all()  # + the sum's 4-byte scalar
    assert "memory_growth" not in set(fixed.findings["kind"])


def test_alive_blocks_are_torchs_own_memory_records(cells, tmp_path):
    """The raw trace torch writes for the same profile (``export_chrome_trace``), paired here by
    address in the file's order: what is allocated and never freed, and each free."""
    leak = _leak(cells)
    path = tmp_path / "raw.json"
    leak.profiler.export_chrome_trace(str(path))
    records = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("name") == "[memory]"]
    records.sort(key=lambda e: e["ts"])  # stable: the file's order at equal times
    open_blocks: dict[int, tuple[float, int]] = {}
    freed = []
    for e in records:
        addr, nbytes = e["args"]["Addr"], e["args"]["Bytes"]
        if nbytes > 0:
            open_blocks[addr] = (e["ts"], nbytes)
        elif addr in open_blocks:
            ts, size = open_blocks.pop(addr)
            assert size == -nbytes
            freed.append((addr, size, e["ts"]))
    alive = leak.alive_at_end()
    assert sorted(zip(alive["addr"], alive["bytes"])) == sorted((a, b) for a, (_, b) in open_blocks.items())
    origin_us = leak.meta.origin_ns / 1000.0
    for row in alive.itertuples():
        assert row.alloc_us == pytest.approx(open_blocks[row.addr][0] - origin_us, abs=0.002)
    pairs = leak.allocations()
    done = pairs[pairs["free_us"].notna()]
    assert sorted(zip(done["addr"], done["bytes"])) == sorted((a, b) for a, b, _ in freed)
    by_addr = defaultdict(list)
    for a, b, ts in freed:
        by_addr[a].append(ts - origin_us)
    for row in done.itertuples():
        assert min(abs(row.free_us - t) for t in by_addr[row.addr]) < 0.002


def test_grouped_by_line_and_by_operator(cells):
    leak = _leak(cells)
    by_line = leak.alive_at_end(by="line")
    assert list(by_line.columns) == ["device", "cell", "file", "line", "source", "blocks", "bytes"]
    assert len(by_line) == 1
    row = by_line.iloc[0]
    assert (row["line"], row["blocks"], row["bytes"]) == (4, 2 * STEPS, STEPS * KEPT_PER_STEP)
    by_op = leak.alive_at_end(by="op").set_index("top_op")
    assert list(by_op.columns) == ["device", "blocks", "bytes"]
    assert by_op.loc["aten::relu", "bytes"] == STEPS * HIDDEN_BYTES and by_op.loc["aten::relu", "blocks"] == STEPS
    assert by_op.loc["aten::linear", "bytes"] == STEPS * OUT_BYTES


def test_bad_grouping_and_no_lines_are_one_line_errors(cells):
    from nbprof.errors import OptionError

    with pytest.raises(OptionError, match="by must be one of line, op"):
        _leak(cells).alive_at_end(by="lines")
    steps = cells["leak_steps"][0]
    assert "line" not in steps.alive_at_end().columns  # no --lines: allocations()' columns only
    assert list(steps.alive_at_end().columns) == list(steps.allocations().columns)
    with pytest.raises(OptionError, match="--lines") as e:
        steps.alive_at_end(by="line")
    assert "\n" not in str(e.value)


def test_the_line_table_has_what_each_line_left_alive(cells):
    lines = _leak(cells).lines()
    row = lines[lines["source"] == "    outputs.append(net_m(xb))"].iloc[0]
    assert row["alive_at_end_bytes"] == STEPS * KEPT_PER_STEP
    assert row["alloc_bytes"] == STEPS * ALLOCATED_PER_STEP
    assert lines["alive_at_end_bytes"].sum() == _leak(cells).alive_at_end()["bytes"].sum()
    assert (cells["fixed"][0].lines()["alive_at_end_bytes"] == 0).all()


def test_growth_per_step_is_the_hand_count_on_every_step(cells):
    growth = _leak(cells).memory_growth()
    n = cells["leak"][1]
    assert growth.attrs["steps"] == f"the loop at In [{n}] line 3"
    assert growth["step"].tolist() == list(range(STEPS)) and set(growth["device"]) == {"cpu"}
    assert (growth["added_never_freed_bytes"] == KEPT_PER_STEP).all()
    assert (growth["never_freed_blocks"] == 2).all()
    assert (growth["allocated_bytes"] == ALLOCATED_PER_STEP).all()
    assert (growth["added_bytes"] == KEPT_PER_STEP).all()
    # held at each step's end: what the steps before kept, on top of what the profile began with
    held = growth["held_bytes"].to_numpy()
    assert (np.diff(held) == KEPT_PER_STEP).all()
    assert (growth["end_us"] > growth["start_us"]).all() and (growth["start_us"].to_numpy()[1:] ==
                                                                growth["end_us"].to_numpy()[:-1]).all()


def test_profiler_steps_make_the_steps_too(cells):
    growth = cells["leak_steps"][0].memory_growth()
    assert growth.attrs["steps"] == "ProfilerStep#N ranges"
    assert growth["step"].tolist() == list(range(STEPS))
    assert (growth["added_never_freed_bytes"] == KEPT_PER_STEP).all()
    assert (growth["allocated_bytes"] == ALLOCATED_PER_STEP).all()


def test_the_finding_names_the_line_its_bytes_and_the_cause(cells):
    f = _leak(cells).findings
    [row] = f[f["kind"] == "memory_growth"].itertuples()
    n = cells["leak"][1]
    ev = row.evidence
    assert ev["where"] == f"In [{n}] line 4" and ev["line"] == 4
    assert ev["bytes_per_step"] == KEPT_PER_STEP and ev["kept_bytes_per_step"] == KEPT_PER_STEP
    assert ev["kept_bytes"] == STEPS * KEPT_PER_STEP and ev["steps"] == STEPS
    assert ev["cause"] == "no_grad" and not ev["backward_ran"] and ev["graph_ops_per_step"] == 2
    assert f"In [{n}] line 4 `outputs.append(net_m(xb))`: 66.50 KiB a step" in row.message
    assert "evaluation loop without torch.no_grad()" in row.message


def test_kept_outputs_under_no_grad_are_no_finding(cells):
    """Under no_grad only the outputs stay (2,560 B a step, below the finding's 4 KiB a step)."""
    kept = cells["kept"][0]
    growth = kept.memory_growth()
    assert (growth["added_never_freed_bytes"] == OUT_BYTES).all()
    assert (growth["allocated_bytes"] == ALLOCATED_PER_STEP).all()
    assert "memory_growth" not in set(kept.findings["kind"])


def test_without_lines_the_finding_names_the_operator(cells):
    f = cells["leak_steps"][0].findings
    [row] = f[f["kind"] == "memory_growth"].itertuples()
    assert row.evidence["op"] == "aten::relu" and row.evidence["bytes_per_step"] == HIDDEN_BYTES
    assert "Most of it was allocated under aten::relu: 64.00 KiB a step" in row.message
    assert row.evidence["cause"] == "no_grad"


def test_the_peak_by_line(cells):
    """The peak comes in the last step, once ReLU has allocated and before the first linear's
    output is freed: four steps' kept blocks and two hidden-sized ones, all from line 4."""
    f = _leak(cells).findings
    [row] = f[f["kind"] == "memory_peak"].itertuples()
    peak = (STEPS - 1) * KEPT_PER_STEP + 2 * HIDDEN_BYTES
    # torch's CPU total counts what earlier profiles in this process left allocated: above it
    assert row.evidence["peak_allocated_bytes"] - row.evidence["allocated_before_profile_bytes"] == peak
    [line] = row.evidence["top_lines"]
    assert (line["line"], line["bytes"]) == (4, peak)
    assert "By the line of your code that allocated it: In [" in row.message
    # no lines: no top_lines
    f2 = cells["leak_steps"][0].findings
    assert "top_lines" not in f2[f2["kind"] == "memory_peak"].iloc[0]["evidence"]


def test_save_and_load_keep_the_loops_steps(cells, tmp_path):
    import nbprof

    leak = _leak(cells)
    loaded = nbprof.load_trace(leak.save(tmp_path / "leak.json.gz"))
    pd.testing.assert_frame_equal(loaded.memory_growth(), leak.memory_growth())
    assert loaded.memory_growth().attrs == leak.memory_growth().attrs
    pd.testing.assert_frame_equal(loaded.alive_at_end(), leak.alive_at_end())


def test_the_report_shows_what_stays(cells):
    html = _leak(cells).report().html(include_library=False)
    assert "Left allocated at the end: 10 blocks allocated during the profile (332.50 KiB on cpu)" in html
    assert "Memory per step (the loop at In [" in html and "Kept for good" in html
    from .test_mutants_views3 import dt_tables

    [steps] = [t for t in dt_tables(html) if t["headers"][:1] == ["Step"]]
    assert steps["headers"] == ["Step", "Device", "Held at its end", "Added", "Allocated", "Kept for good",
                                "Blocks kept", "Ended at"]
    # with --lines, what is left is also told by the line that allocated it, and each block's line
    from .test_mutants_snapshot import dt_tables as with_captions

    tables = with_captions(html)
    [by_line] = [t for t in tables if t["caption"].startswith("by the line of your code that allocated them")]
    assert by_line["headers"] == ["Line", "Source", "Device", "Blocks", "Size"]
    [blocks] = [t for t in tables if t["caption"].startswith("blocks allocated during the profile and never freed")]
    assert blocks["headers"] == ["Size", "Device", "Allocated in", "Under", "At", "Line"]
    assert "Left alive" in html  # the Source tab's column
    fixed = cells["fixed"][0].report().html(include_library=False)
    assert "Left allocated at the end: nothing allocated during the profile" in fixed
    assert "Left alive" not in fixed  # a column of zeros is not shown


def test_a_training_loop_that_keeps_its_validation_loss(shell):
    """Backward runs each step (freeing what the training forward saved), but the validation loss,
    kept in a list, holds its own graph: ReLU's saved result, the output (saved by square) and the
    loss itself, 65,536 + 2,560 + 4 B a step."""
    run(shell, SETUP + "net_m(xb).square().mean().backward()\nnet_m.zero_grad()\n")
    result, _ = run(shell, """\
%%torchprof --lines --memory -q -o train
val_losses = []
for i in range(5):
    net_m.zero_grad()
    net_m(xb).square().mean().backward()
    val = net_m(xb).square().mean()
    val_losses.append(val)
""")
    assert result.error_in_exec is None
    p = shell.user_ns["train"]
    n = shell.execution_count - 1
    growth = p.memory_growth()
    assert (growth["added_never_freed_bytes"].to_numpy()[:-1] == KEPT_PER_STEP + 4).all()
    f = p.findings
    [row] = f[f["kind"] == "memory_growth"].itertuples()
    ev = row.evidence
    assert ev["where"] == f"In [{n}] line 6" and ev["bytes_per_step"] == KEPT_PER_STEP + 4
    assert ev["cause"] == "kept_graph" and ev["backward_ran"] and ev["graph_ops_per_step"] == 3
    assert "`.item()` (a number) or `.detach()`" in row.message


def test_epochs_around_batches_step_by_batch(shell):
    run(shell, SETUP)
    result, _ = run(shell, """\
%%torchprof --lines --memory -q -o ep
kept = []
for epoch in range(2):
    for i in range(3):
        kept.append(net_m(xb))
""")
    assert result.error_in_exec is None
    growth = shell.user_ns["ep"].memory_growth()
    assert growth.attrs["steps"] == f"the loop at In [{shell.execution_count - 1}] line 4"
    assert growth["step"].tolist() == list(range(6))
    assert (growth["added_never_freed_bytes"] == KEPT_PER_STEP).all()


def test_a_loop_in_a_function_from_another_cell(shell):
    run(shell, SETUP)
    run(shell, "def evaluate(model, n):\n    outs = []\n    for i in range(n):\n        outs.append(model(xb))\n"
               "    return outs\n")
    f_cell = shell.execution_count - 1
    result, _ = run(shell, "%%torchprof --lines --memory -q -o fn\nres = evaluate(net_m, 5)\n")
    assert result.error_in_exec is None
    p = shell.user_ns["fn"]
    growth = p.memory_growth()
    assert growth.attrs["steps"] == f"the loop at In [{f_cell}] line 3"
    assert (growth["added_never_freed_bytes"] == KEPT_PER_STEP).all()
    [ev] = p.findings[p.findings["kind"] == "memory_growth"]["evidence"]
    assert ev["where"] == f"In [{f_cell}] line 4" and ev["cause"] == "no_grad"


def test_a_block_no_operator_allocated_is_on_the_outside_row(shell):
    """A storage made directly (``torch.UntypedStorage``: the allocator called without an operator)
    has no operator, so no line (the trace's memory event has no op around it); ``torch.ones``'
    block is line 3's."""
    run(shell, SETUP)
    result, _ = run(shell, "%%torchprof --lines --memory -q -o th\nkeep = torch.UntypedStorage(4000)\n"
                           "mine = torch.ones(500)\n")
    assert result.error_in_exec is None
    p = shell.user_ns["th"]
    alive = p.alive_at_end().set_index("bytes")
    assert alive.loc[4000, "op"] == "" and alive.loc[4000, "file"] is None and alive.loc[4000, "source"] == ""
    assert pd.isna(alive.loc[4000, "line"]) and alive.loc[2000, "line"] == 3
    lines = p.lines()
    assert lines.iloc[-1]["function"] == "(outside your code)" and lines.iloc[-1]["alive_at_end_bytes"] == 4000
    assert lines.loc[lines["line"] == 3, "alive_at_end_bytes"].tolist() == [2000]
    by_line = p.alive_at_end(by="line").set_index("bytes")
    assert by_line.loc[4000, "file"] is None and by_line.loc[2000, "line"] == 3


def test_a_folder_of_ranks_has_each_ranks_blocks_and_steps():
    """A folder's tables are its ranks' own (each rank's file read alone), a ``rank`` column added
    and times moved onto the folder's common clock; its Memory tab shows them for each rank."""
    from pathlib import Path

    import nbprof

    folder = Path(__file__).parent / "data" / "cluster_views" / "ranks"
    c = nbprof.load_trace(folder, workers=0, progress=False)
    alive, growth = c.alive_at_end(), c.memory_growth()
    assert growth.attrs["steps"] == "ProfilerStep#N ranges"
    origin = min(c.rank(r).meta.origin_ns for r in c.rank_labels)
    for r in c.rank_labels:
        own = c.rank(r)
        shift = (own.meta.origin_ns - origin) / 1000.0
        mine = alive[alive["rank"] == r].drop(columns="rank").reset_index(drop=True)
        expected = own.alive_at_end()
        assert len(mine) == len(expected) > 0
        assert sorted(zip(mine["addr"], mine["bytes"])) == sorted(zip(expected["addr"], expected["bytes"]))
        assert sorted(mine["alloc_us"]) == pytest.approx(sorted(expected["alloc_us"] + shift))
        steps = growth[growth["rank"] == r].drop(columns="rank").reset_index(drop=True)
        own_growth = own.memory_growth()
        assert steps["added_never_freed_bytes"].tolist() == own_growth["added_never_freed_bytes"].tolist()
        assert steps["start_us"].tolist() == pytest.approx((own_growth["start_us"] + shift).tolist())
    by_op = c.alive_at_end(by="op")
    assert list(by_op.columns) == ["rank", "device", "top_op", "blocks", "bytes"]
    assert by_op["bytes"].sum() == alive["bytes"].sum()
    html = c.report().html(include_library=False)
    assert html.count("Left allocated at the end:") == len(c.rank_labels)


def test_a_saved_loop_that_is_not_as_nbprof_writes_it_is_left_out(cells, tmp_path):
    """A trace's loops are data: a loop with a string for a time, ends missing or a line 0 is left
    out (the profile keeps its lines and the other loops), never an error."""
    import nbprof

    leak = _leak(cells)
    path = leak.save(tmp_path / "leak.json")
    doc = json.loads(open(path).read())
    [good] = doc["nbprofLines"]["line_data"]["loops"]
    bad = [dict(good, start_ns=["0"] + good["start_ns"][1:]), dict(good, end_ns=good["end_ns"][:-1]),
           dict(good, line=0), {"file": 1}, "loop"]
    doc["nbprofLines"]["line_data"]["loops"] = bad + [good]
    (tmp_path / "crafted.json").write_text(json.dumps(doc))
    loaded = nbprof.load_trace(tmp_path / "crafted.json")
    assert loaded.meta.line_data["loops"] == [good]
    pd.testing.assert_frame_equal(loaded.memory_growth(), leak.memory_growth())
    doc["nbprofLines"]["line_data"]["loops"] = bad
    (tmp_path / "none.json").write_text(json.dumps(doc))
    loaded = nbprof.load_trace(tmp_path / "none.json")
    assert len(loaded.memory_growth()) == 0 and len(loaded.lines()) == len(leak.lines())


@pytest.mark.slow
def test_alive_and_growth_cost_grows_linearly_with_the_memory_records():
    """benchmarks/bench_alive.py at 20 k and 200 k memory records (1,000 steps a million), in one
    run, the medians of three fresh profiles each: ten times the records may cost up to 30 times
    the time (linear is 10: work that grows with records times records, or blocks times steps
    at scale, is far more); and at 200 k what ``alive_at_end()`` and ``memory_growth()`` add to
    the pairing of blocks with their frees (``allocations()``, which the Memory tab already made)
    may be up to 1.5 times the pairing (measured: 0.6 times it, 0.2 s a million records here)."""
    import sys
    from pathlib import Path

    from nbprof.model import TorchProfile

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    try:
        from bench_alive import build_events, measure
    finally:
        sys.path.pop(0)
    from .guards import within

    small, _ = build_events(20_000, 20)
    large, kept = build_events(200_000, 200)

    def both() -> dict:
        m_small, m_large = measure(small, 3), measure(large, 3)
        return {"large / small": m_large["all"] / m_small["all"],
                "added / pairing": (m_large["alive_at_end"] + m_large["memory_growth"]) / m_large["allocations"]}

    within("alive and growth", both, lambda m: [k for k, bound in (("large / small", 30), ("added / pairing", 1.5))
                                                if m[k] >= bound])
    p = TorchProfile(large)
    assert len(p.alive_at_end()) == kept and len(p.memory_growth()) == 200


@needs_torch
def test_the_peak_names_each_line_that_holds_it(shell):
    """Two lines hold the CPU peak (4 MiB and 2 MiB tensors, both alive at the end): the finding
    names both, biggest first, each with its code and its bytes, one after the other."""
    import re

    run(shell, "import torch")
    result, _ = run(shell, "%%torchprof -q --memory --lines -o two\na = torch.ones(1024, 1024)\n"
                           "b = torch.ones(512, 1024)")
    assert result.error_in_exec is None, result.error_in_exec
    f = shell.user_ns.pop("two").findings
    msg = f[f["kind"] == "memory_peak"].iloc[0]["message"]
    assert re.search(r"By the line of your code that allocated it: In \[\d+\] line 2 `a = torch.ones\(1024, 1024\)` "
                     r"\(4.00 MiB\), In \[\d+\] line 3 `b = torch.ones\(512, 1024\)` \(2.00 MiB\)\.", msg), msg


def test_each_step_keeps_its_own_frees_whatever_the_clocks_say(shell, monkeypatch):
    """A loop's steps come from the line recorder's ``time.time_ns()``, its memory events from
    torch's clock: they disagree by a few tenths of a microsecond, changing from profile to profile
    (``collect.lines``' doc). The last thing an iteration of ``y = x @ x; z = y.relu()`` does is
    free the previous ``z`` (its assignment), 0.05-0.35 µs before the loop's header runs again.
    Counted by hand (64 x 64 float32: 16,384 B each): every step after the first allocates ``y``
    and ``z`` and frees the previous two, so it holds what the one before held (``added_bytes``
    0). Each of three fresh profiles is read again with the recorder's clock moved 0.4 µs either
    way: each step holds its own two allocations and two frees (compared exactly, moved 0.4 µs
    earlier, each step's last free fell in the next step)."""
    import dataclasses

    import nbprof.analysis.lines as lines_mod
    from nbprof.model import TorchProfile

    raws = []
    finish = lines_mod.finish_line_data
    monkeypatch.setattr(lines_mod, "finish_line_data", lambda raw: raws.append(raw) or finish(raw))
    run(shell, "import torch\nxg = torch.randn(64, 64)")
    for k in range(3):
        result, _ = run(shell, f"%%torchprof --lines --memory -q -o gr{k}\nfor i in range(8):\n"
                               "    yg = xg @ xg\n    zg = yg.relu()\n")
        assert result.error_in_exec is None
    assert len(raws) == 3
    block = 64 * 64 * 4
    for k, raw in enumerate(raws):
        p = shell.user_ns[f"gr{k}"]
        mem = p.events[p.events["kind"] == "memory"].sort_values("start_us", kind="stable")
        for shift_ns in (0, -400, 400):
            moved = dict(raw, tracer=dict(raw["tracer"], time=raw["tracer"]["time"] + shift_ns))
            growth = TorchProfile(p.events, dataclasses.replace(p.meta, line_data=finish(moved))).memory_growth()
            assert growth["step"].tolist() == list(range(8)), (k, shift_ns)
            assert (growth["allocated_bytes"] == 2 * block).all(), (k, shift_ns, growth["allocated_bytes"].tolist())
            assert (growth["added_bytes"].to_numpy()[1:] == 0).all(), (k, shift_ns, growth["added_bytes"].tolist())
            # and each step's own events, in torch's order: y's new block, the old y freed, z's, the old z
            for row in growth.itertuples():
                inside = mem[(mem["start_us"] >= row.start_us) & (mem["start_us"] < row.end_us)]
                expected = [block, block] if k == 0 and row.step == 0 else [block, -block, block, -block]
                assert inside["bytes"].tolist() == expected, (k, shift_ns, row.step, inside["bytes"].tolist())
