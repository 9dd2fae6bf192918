"""Seed 53's survivors, part a: a zoomed folder timeline's kernels name their launching op, a
Lightning profiler shown in IPython still writes its summary file, the snapshot chart's layers
on a tie in the order their lines first allocated.

Oracles: the raw JSON of each rank's file (a kernel's External id -> the cpu_op that carries it),
a real IPython shell and a real Lightning fit (the file Lightning's own ``describe`` writes, the
hooks' counts of Lightning's ``SimpleProfiler``), snapshots built by hand (tests/snapshots.py) with
their allocation order counted by hand.
"""

from __future__ import annotations

import html as htmllib
import importlib.util

import pytest

import nbprof

from .conftest import reports, run
from .snapshots import KiB, MiB, SEG_A, block, entry, segment, stack
from .test_cluster_timeline import DEVICE, h100
from .test_mutants_snapshot import LINE, load, read_chart
from .test_mutants_untested2 import folder_live_timeline


# ------------------------------------------------- a zoomed folder timeline: "launched by" its op


def test_a_zoomed_folder_timelines_kernel_names_its_op_that_ended_before_the_window(tmp_path):
    """Zoomed onto a kernel that ran after its launching op had ended (the op outside the
    window, not drawn there), the kernel's hover still says "launched by" that op: the cpu_op of
    the raw file that carries the kernel's External id. Each rank of the H100 folder, its three
    kernels drawn alone with the longest wait after their op."""
    folder = h100(tmp_path)
    raw, view, data, state, ys, r = folder_live_timeline(folder)
    checked = 0
    for rank in sorted(raw.docs):
        ops = {e["args"]["External id"]: e for e in raw.events(rank, {"cpu_op"}) if "External id" in e.get("args", {})}
        late = [(raw.start(k) - raw.end(ops[k["args"]["External id"]]), i)
                for i, k in enumerate(raw.events(rank, DEVICE))
                if k["args"].get("External id") in ops and raw.end(ops[k["args"]["External id"]]) < raw.start(k)]
        drawn_single = 0
        for _, i in sorted(late, reverse=True):
            k = raw.events(rank, DEVICE)[i]
            op = ops[k["args"]["External id"]]
            ks, ke = raw.start(k), raw.end(k)
            w = state.window(ks, ke, 1000)
            rects = w.rects
            on_rank = (rects["lane"].map(w.lanes.set_index("lane")["rank"]) == rank).to_numpy()
            at_k = on_rank & (rects["name"] == k["name"]).to_numpy() & ((rects["x0_us"] - ks).abs() < 1e-3).to_numpy()
            mine = rects[at_k & (rects["event"] >= 0).to_numpy()]
            if not len(mine):  # drawn merged with a kernel it overlaps (rank 1's slowed gemms)
                continue
            # the op is not in the window: what names it is the kernel's link to it
            assert not (on_rank & (rects["name"] == op["name"]).to_numpy()
                        & ((rects["x0_us"] - raw.start(op)).abs() < 1e-3).to_numpy()).any()
            lines = mine["hover"].iat[0].split("<br>")
            assert f"launched by {htmllib.escape(op['name'], quote=False)}" in lines, lines
            drawn_single += 1
            if drawn_single == 3:
                break
        checked += drawn_single
    assert checked == 6


# ---------------------------------------------- Lightning: shown in IPython, and written to its file

needs_lightning = pytest.mark.skipif(not importlib.util.find_spec("pytorch_lightning"),
                                     reason="needs pytorch-lightning (the test extra)")


@needs_lightning
def test_a_lightning_profiler_shown_in_ipython_still_writes_its_file(shell, tmp_path):
    """In IPython with ``filename`` given: the report is shown, and Lightning's summary file
    (dirpath / "fit-fit.txt", as Lightning's own ``_prepare_filename`` names it) holds the report's
    text, then the hooks' table with each hook's calls as Lightning's SimpleProfiler counts them.
    Without ``filename``, nothing is left for Lightning to write (the report was shown)."""
    from .lightning_fit import fit, lightning

    package = "pytorch_lightning"
    simple = lightning(package).profilers.SimpleProfiler()
    fit(package, simple, steps=2)
    batches = len(simple.recorded_durations["run_training_batch"])
    shell.user_ns.update(fit=fit, package=package, nbprof=nbprof, where=str(tmp_path))
    result, captured = run(shell, "prof = nbprof.lightning.Profiler(dirpath=where, filename='fit')\n"
                                  "trainer = fit(package, prof, steps=2)")
    assert result.success, result.error_in_exec
    assert len(reports(captured)) == 1  # shown
    [written] = list(tmp_path.glob("*.txt"))
    assert written.name == "fit-fit.txt"
    text = written.read_text()
    # the shown report's text (which ops make its top 20 depends on the machine's timings), then the hooks
    assert text.startswith(shell.user_ns["prof"].result.report().text().splitlines()[0] + "\n")
    assert "aten::" in text
    lines = text.splitlines()
    hooks = lines[next(i for i, line in enumerate(lines) if line.startswith("Range ")):]
    batch = next(line for line in hooks if line.strip().startswith("run_training_batch"))
    assert int(batch.split()[1]) == batches == 2
    # no file: shown is enough, Lightning logs nothing
    result, captured = run(shell, "quiet_file = nbprof.lightning.Profiler()\nfit(package, quiet_file, steps=2)")
    assert result.success and len(reports(captured)) == 1 and shell.user_ns["quiet_file"].summary() == ""


# ------------------------------------------------------ the snapshot chart's layers on a tie


def test_tied_lines_are_layered_in_the_order_they_first_allocated(tmp_path):
    """Three lines of the cell each allocate 4 KiB and hold it to the end, line 9 first, then
    line 10, then line 8 (t = 101, 102, 103): tied at the peak and at their most, so the chart
    stacks them in the order they allocated, bottom up, the legend likewise -- not by name
    (":10" < ":8" < ":9")."""
    from nbprof.views.snapshot_chart import drawn_devices, snapshot_spec, snapshot_svg

    blocks, trace, a = [], [], SEG_A
    for t, line in enumerate((9, 10, 8), start=101):
        st = stack(line)
        trace.append(entry("alloc", a, 4 * KiB, t, st))
        blocks.append(block(a, 4 * KiB, 4 * KiB, "active_allocated", st))
        a += 4 * KiB
    blocks.append(block(a, 2 * MiB - 12 * KiB, 2 * MiB - 12 * KiB, "inactive"))
    p = load({"segments": [segment(SEG_A, 2 * MiB, blocks)], "device_traces": [trace]}, tmp_path)
    order = [f"{LINE}{n}" for n in (9, 10, 8)]
    (panel,) = read_chart(snapshot_svg(drawn_devices(p)))["panels"]
    assert [name for name, _, _ in panel["layers"]] == order
    assert [text for _, text in panel["legend"]] == [f"{n} · 4.00 KiB" for n in order]
    spec = snapshot_spec(drawn_devices(p))
    assert [t["name"] for t in spec["data"] if t["name"] in order] == order
