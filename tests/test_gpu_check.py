"""The GPU check (scripts/gpu-check.sh) proven where no GPU is: its checks (tests/gpu_checks.py) hold
on the recorded H100 traces and fail on each wrong answer they guard against (the inputs changed
the way a bug would change nbprof's answer or torch's trace); the script's dry run and its run
without CUDA end to end (slow); a step that hangs killed at its timeout, its processes with it.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import nbprof

from . import gpu_checks as G
from .conftest import DATA, TRACES, needs_torch, oracle, trace_path

ROOT = Path(__file__).resolve().parent.parent
pytestmark = needs_torch


@pytest.fixture(scope="module")
def h100() -> dict[str, tuple]:
    return {name: (nbprof.load_trace(trace_path(name)), G.read_trace(trace_path(name))) for name in TRACES}


# ---------------------------------------------------------------------------- the raw JSON's facts


@pytest.mark.parametrize("name", TRACES)
def test_clock_facts_of_the_recorded_traces(h100, name):
    """What the module docstring of clock_skew measured: each device record starts 4 µs or more after
    its call, no launch lacks its kernel, no record is malformed: the bug does not show."""
    facts = G.clock_facts(h100[name][1])
    assert facts["launches"] >= 9 and facts["min_delay_us"] >= 4.0
    assert (facts["early"], facts["missing_kernels"], facts["zero_ts"], facts["negative_dur"], facts["far"]) == (0,) * 5
    assert G.bug_reasons(facts, facts) == []


def test_bug_reasons_each_kind(h100):
    doc = h100["cnn_train_cuda"][1]
    first = G.clock_facts(doc)
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    # below / at the shift that counts, against the first profile's least delay
    below = G.clock_facts(G.shifted_trace(doc, G.SHOWS_SHIFT_US - 0.01))
    at = G.clock_facts(G.shifted_trace(doc, G.SHOWS_SHIFT_US))
    assert G.bug_reasons(below, first) == []
    assert [r.split(" by")[0] for r in G.bug_reasons(at, first)] == ["the least launch-to-start delay grew"]
    # a record before its call (any amount), a launch without its kernel, a record at ts 0
    early = G.clock_facts(G.shifted_trace(doc, -(first["min_delay_us"] + 0.01)))
    assert early["early"] >= 1 and "before their launch call" in G.bug_reasons(early)[0]
    dropped = copy.deepcopy(doc)
    dropped["traceEvents"].remove(next(e for e in dropped["traceEvents"] if e is not None and e.get("cat") == "kernel"
                                       and e["args"]["correlation"] == kernels[0]["args"]["correlation"]))
    assert G.clock_facts(dropped)["missing_kernels"] == 1
    zero = copy.deepcopy(doc)
    next(e for e in zero["traceEvents"] if e.get("cat") == "kernel")["ts"] = 0
    assert G.clock_facts(zero)["zero_ts"] == 1 and G.bug_reasons(G.clock_facts(zero))


# ------------------------------------------------------------------------- the checks hold, and fail


@pytest.mark.parametrize("name", TRACES)
def test_key_averages_check(h100, name):
    p, _ = h100[name]
    assert G.check_key_averages(p, oracle(name))["rows_compared"] >= 15
    wrong = oracle(name)
    row = next(r for r in wrong["rows"] if r["count"] > 1 and not r["device_type"].endswith("CUDA"))
    row["self_cpu_time_total"] += 0.02  # nbprof's self time off by 20 ns
    with pytest.raises(G.CheckFailed, match="self_cpu_time_total"):
        G.check_key_averages(p, wrong)


def test_key_averages_not_applicable_where_torch_lists_frames(h100):
    p, _ = h100["transformer_infer_stack"]
    frame = str(p.events.loc[p.events["kind"] == "python", "name"].iloc[0])
    with_frames = oracle("transformer_infer_stack")
    with_frames["rows"].append(dict(with_frames["rows"][0], key=frame))  # what torch 2.13 reports
    with pytest.raises(G.NotApplicable, match="Python frames"):
        G.check_key_averages(p, with_frames)


def test_lines_device_sum_check(h100):
    p, doc = h100["transformer_infer_stack"]
    assert G.check_lines_device_sum(p, doc)["device_us"] == pytest.approx(G.device_work_us(doc))
    more = copy.deepcopy(doc)
    next(e for e in more["traceEvents"] if e.get("cat") == "kernel")["dur"] += 1.0  # a kernel nbprof lost 1 µs of
    with pytest.raises(G.CheckFailed, match="sums to"):
        G.check_lines_device_sum(p, more)


def test_item_and_sync_line_checks(tmp_path):
    p, doc, item, reads = G.synthetic_lines_profile(tmp_path)
    assert G.check_item_line(p, item, reads, reads)["scalar_reads_on_the_line"] == 4
    assert G.check_sync_line(p, item)["waits"] == 4
    summed = G.check_lines_device_sum(p, doc)
    # four steps' 500 µs kernel and 2 µs copy back, and the 40 µs kernel no operator launched, outside
    assert summed["device_us"] == pytest.approx(4 * 502.0 + 40) and summed["outside_code_device_us"] == pytest.approx(40)
    with pytest.raises(G.CheckFailed, match="torch counted 5"):
        G.check_item_line(p, item, reads, reads + 1)
    with pytest.raises(G.CheckFailed, match="scalar reads on the .item"):
        G.check_item_line(p, "y = x @ w", reads)  # the reads are not on the matmul's line
    with pytest.raises(G.CheckFailed, match="sync_line names"):
        G.check_sync_line(p, "y = x @ w")


def test_item_line_check_sees_an_operator_of_another_line(tmp_path):
    """A line table that put the matmul on the .item() line (an off-by-one join, say) fails."""
    import dataclasses

    p, _, item, reads = G.synthetic_lines_profile(tmp_path)
    data = copy.deepcopy(p.meta.line_data)
    mm = set(p.events.loc[p.events["name"] == "aten::mm", "external_id"].astype(int))
    data["ops"]["stack"] = [2 if e in mm else s for e, s in zip(data["ops"]["external_id"], data["ops"]["stack"])]
    wrong = type(p)(p.events, dataclasses.replace(p.meta, line_data=data))
    with pytest.raises(G.CheckFailed, match="aten::mm"):
        G.check_item_line(wrong, item, reads)


def test_memory_peak_check(h100):
    p, doc = h100["cnn_train_cuda"]
    numbers = G.check_memory_peak(p, doc)
    assert numbers["peak_bytes"] == max(e["args"]["Total Allocated"] for e in doc["traceEvents"]
                                        if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1)
    assert G.check_memory_peak(p, doc, numbers["peak_bytes"] + G.PEAK_TOLERANCE_BYTES)
    with pytest.raises(G.CheckFailed, match="max_memory_allocated"):
        G.check_memory_peak(p, doc, numbers["peak_bytes"] + G.PEAK_TOLERANCE_BYTES + 1)
    higher = copy.deepcopy(doc)
    rows = [e for e in higher["traceEvents"] if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
    max(rows, key=lambda e: e["args"]["Total Allocated"])["args"]["Total Allocated"] += 512
    with pytest.raises(G.CheckFailed, match="largest Total Allocated"):
        G.check_memory_peak(p, higher)


def _repeat(doc: dict, shifts_us: list[float], tmp_path: Path) -> tuple[list[dict], list[bool]]:
    docs, fired = [], []
    for i, by in enumerate(shifts_us):
        d = G.shifted_trace(doc, by) if by else doc
        path = tmp_path / f"cell{i}.json"
        path.write_text(json.dumps(d))
        docs.append(d)
        fired.append(G.fired(nbprof.load_trace(path)))
    return docs, fired


def test_repeat_verdict(h100, tmp_path):
    """Unchanged profiles: the bug does not show, the finding is quiet, they agree; profiles moved
    later by 2 ms: it shows and the finding fires there; a live answer that differs fails."""
    doc = h100["cnn_train_cuda"][1]
    docs, fired = _repeat(doc, [0, 0, 2000, 4000], tmp_path)
    out = G.check_repeat(docs, fired, [1, 2, 3, 4])
    assert [r["bug_shows"] for r in out["profiles"]] == [False, False, True, True] == fired
    assert out["verdict"].startswith("torch's repeat-profile bug showed in profile(s) [3, 4] of 4")
    with pytest.raises(G.CheckFailed, match="disagreed in profile"):
        G.check_repeat(docs, [False, False, False, True])  # a finding that missed profile 3
    with pytest.raises(G.CheckFailed, match="numbered"):
        G.check_repeat(docs, fired, [1, 2, 2, 3])
    assert G.check_kernel_times(docs)["profiles"][0]["worst_ratio"] == 1.0


def test_a_shift_the_finding_calls_too_small_is_a_disagreement(h100, tmp_path):
    """The bug moving the device clock 200 µs: it shows (over SHOWS_SHIFT_US), but clock_skew waits
    for 1000 µs (SHIFT_MIN_US): the check says so, with the numbers, instead of passing."""
    docs, fired = _repeat(h100["cnn_train_cuda"][1], [0, 200], tmp_path)
    assert fired == [False, False]
    with pytest.raises(G.CheckFailed, match=r"profile 2: bug shows \(the least launch-to-start delay grew by 200.0"):
        G.check_repeat(docs, fired)


def test_kernel_times_check_finds_a_slower_kernel(h100):
    doc = h100["cnn_train_cuda"][1]
    slow = copy.deepcopy(doc)
    durs = G.kernel_durations(doc)
    name = max((n for n, d in durs.items() if len(d) >= 3), key=lambda n: sorted(durs[n])[len(durs[n]) // 2])
    for e in slow["traceEvents"]:
        if e.get("cat") == "kernel" and e["name"] == name:
            e["dur"] *= 2.5
    with pytest.raises(G.CheckFailed, match="2.50x its time"):
        G.check_kernel_times([doc, slow])


def test_toggle_checks(h100):
    on, on_doc = h100["cnn_train_cuda"]
    off_path = sorted((DATA / "cluster_views" / "ranks").glob("*.json.gz"))[0]
    off = nbprof.load_trace(off_path)
    assert G.check_toggle(off, on, G.read_trace(off_path), on_doc)["on_device_records"] == G.device_records(on_doc)
    with pytest.raises(G.CheckFailed, match="CUDA off"):
        G.check_toggle(on, on)
    with pytest.raises(G.CheckFailed, match="CUDA on"):
        G.check_toggle(off, off)
    p, doc = h100["cnn_cuda_toggled"]
    convs = sorted(float(e["ts"]) for e in doc["traceEvents"] if e.get("name") == "aten::cudnn_convolution")
    windows = {"first": (convs[0], convs[3] + 1), "second": (convs[4], convs[7] + 1), "third": (convs[8], convs[11] + 1)}
    counts = G.check_in_cell_toggle(p, doc, windows, off="second")
    assert counts["second"] == {"runtime_calls": 0, "device_records": 0}
    with pytest.raises(G.CheckFailed, match="CUDA paused in 'first'"):
        G.check_in_cell_toggle(p, doc, windows, off="first")


def test_data_loading_check(tmp_path):
    p, doc = G.synthetic_data_loading_profile(tmp_path)
    assert G.check_data_loading(p, 8, 2, doc, pinned=True) == {"batches": 8, "workers": [0, 1], "waited_us": 1600.0,
                                                                 "pinned_copies": 8}
    with pytest.raises(G.CheckFailed, match="the loop took, it took 9"):
        G.check_data_loading(p, 9, 2, doc)
    with pytest.raises(G.CheckFailed, match=r"from workers \[0, 1\], the loader had 3"):
        G.check_data_loading(p, 8, 3, doc)
    (tmp_path / "pageable").mkdir()
    pageable, pageable_doc = G.synthetic_data_loading_profile(tmp_path / "pageable", pageable=True)
    with pytest.raises(G.CheckFailed, match="0 copies from pinned memory"):
        G.check_data_loading(pageable, 8, 2, pageable_doc, pinned=True)


def test_snapshot_check(tmp_path):
    from .snapshots import hand_snapshot, write

    snap = hand_snapshot()
    assert G.check_snapshot(write(snap, tmp_path / "s.pickle"))["segments"] == len(snap["segments"])
    snap["segments"][0]["allocated_size"] += 512  # torch's own number disagrees with its blocks
    with pytest.raises(G.CheckFailed, match="segment"):
        G.check_snapshot(write(snap, tmp_path / "wrong.pickle"))
    pending = G.pending_free_snapshot()
    assert G.check_snapshot(write(pending, tmp_path / "pending.pickle"))["allocated_bytes"] == (
        hand_snapshot()["segments"][0]["allocated_size"] + hand_snapshot()["segments"][1]["allocated_size"] - (1 << 20))


# ------------------------------------------------------------------------------ the script itself


def _script(*args: str, env: dict | None = None, timeout: float = 500) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("OUT", "GPU_CHECK_STARTED")}
    environ.update(PYTHON=sys.executable, **(env or {}))
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu-check.sh"), *args], cwd=ROOT, env=environ,
                          capture_output=True, text=True, timeout=timeout)


def _untouched() -> set[Path]:
    return set((DATA / "gpu").rglob("*")) if (DATA / "gpu").exists() else set()


@pytest.mark.slow
def test_the_dry_run_end_to_end(tmp_path):
    """``scripts/gpu-check.sh --dry-run``: every check passes on the recorded traces, the tests on
    recorded GPU data run on its recordings (none skipped), the results and the packed recordings
    are in the folder given, tests/data/gpu is left alone, its temporary work folder removed."""
    before = _untouched()
    (tmp_path / "tmp").mkdir()
    r = _script("--dry-run", env={"OUT": str(tmp_path), "TMPDIR": str(tmp_path / "tmp")})
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["mode"] == "dry-run" and results["finished"]
    status = {s["step"]: s["status"] for s in results["steps"]}
    assert set(status) == {"dry_lines", "dry_memory", "dry_repeat", "dry_toggle", "dry_snapshot", "dry_dataloader",
                           "recorded_tests"}
    assert all(v == "passed" for v in status.values()), status
    checks = [c for s in results["steps"] for c in s["checks"]]
    assert len(checks) >= 15 and all(c["ok"] is True for c in checks)
    repeat = next(s["repeat"] for s in results["steps"] if s["step"] == "dry_repeat")
    assert [p["bug_shows"] for p in repeat["profiles"]] == [False, False, True, True, True]
    pytest_out = next(s["pytest_output"] for s in results["steps"] if s["step"] == "recorded_tests")
    assert " passed" in pytest_out.splitlines()[-1] and "failed" not in pytest_out.splitlines()[-1]
    assert "SKIPPED" not in pytest_out
    with tarfile.open(tmp_path / "gpu-data.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"gpu/results.json", "gpu/RESULTS.md", "gpu/repeat/cell5.trace.json.gz", "gpu/synthetic_loop.nbprof.json.gz"} <= names
    assert "| dry_repeat | passed |" in (tmp_path / "RESULTS.md").read_text()
    assert _untouched() == before
    assert not list((tmp_path / "tmp").glob("nbprof-gpu-check-*")), "its work folder left behind"


def test_a_misspelt_step_ends_the_run_in_one_line(tmp_path):
    """A rerun naming a step the mode lacks runs nothing (and so cannot say all passed): exit 2, one
    line with the steps there are, nothing written."""
    r = _script("--dry-run", "--only", "dry_lines,lines_cnn", env={"OUT": str(tmp_path)}, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    said = [line for line in r.stdout.splitlines() if line.startswith("gpu-check: no step")]
    assert said == ["gpu-check: no step lines_cnn in this mode; its steps: dry_lines, dry_memory, dry_repeat, "
                    "dry_toggle, dry_snapshot, dry_dataloader, recorded_tests"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu-check.log"]


@pytest.mark.slow
def test_a_rerun_of_some_steps_keeps_the_full_runs_results_apart(tmp_path):
    """``--only``: those steps after the environment's (here the dry run's, which has none), its results
    named .only, so its archive unpacked over a full run's leaves that run's results.json."""
    r = _script("--dry-run", "--only", "dry_memory", env={"OUT": str(tmp_path)})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert not (tmp_path / "results.json").exists() and "| dry_memory | passed |" in (tmp_path / "RESULTS.only.md").read_text()
    assert [s["step"] for s in json.loads((tmp_path / "results.only.json").read_text())["steps"]] == ["dry_memory"]
    with tarfile.open(tmp_path / "gpu-data.tar.gz") as tar:
        names = set(tar.getnames())
    assert "gpu/results.only.json" in names and "gpu/results.json" not in names


@pytest.mark.slow
def test_without_cuda_the_cpu_parts_and_one_line(tmp_path):
    """``scripts/gpu-check.sh`` on a machine without CUDA: every step on the CPU passes (the CUDA
    checks said not applicable), one line says there is no CUDA, exit 0, tests/data/gpu untouched."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the script runs its CUDA checks")
    before = _untouched()
    r = _script(env={"OUT": str(tmp_path)})
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    said = [line for line in r.stdout.splitlines() if line.startswith("gpu-check: no CUDA")]
    assert said == ["gpu-check: no CUDA here (torch sees no CUDA device): the CPU parts ran and passed; "
                    "the CUDA checks need a GPU"]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["mode"] == "cpu" and results["environment"]["cuda"] is False
    status = {s["step"]: s["status"] for s in results["steps"]}
    assert status["env"] == status["lines_cnn"] == status["repeat"] == status["recorded_tests"] == "passed", status
    assert all(v == "passed" for v in status.values()), status
    na = [c["check"] for s in results["steps"] for c in s["checks"] if c["ok"] is None]
    assert "lines_device_time_sums_to_the_kernels" in na and "snapshot_against_memory_viz" in na
    assert _untouched() == before


@pytest.mark.slow
def test_a_step_that_hangs_is_killed_at_its_timeout(tmp_path):
    """A step whose process hangs (and started a process of its own, as a DataLoader does) is killed
    at its timeout with everything it started; the run records it and goes on."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    pid_file = tmp_path / "child.pid"
    os.environ["GPU_CHECK_SELFTEST_PID"] = str(pid_file)
    try:
        rec = gpu_check._run_child(gpu_check.STEPS["selftest_hang"], "cpu", tmp_path / "data", tmp_path, timeout=8)
    finally:
        del os.environ["GPU_CHECK_SELFTEST_PID"]
    assert rec["status"] == "timeout" and "timeout of 8 s" in rec["error"]
    assert rec["checks"][0]["check"] == "before_the_hang" and rec["checks"][0]["ok"] is True  # what it did is kept
    child = int(pid_file.read_text())
    assert not _running(child)


def _running(pid: int, wait_s: float = 5.0) -> bool:
    """Whether the process runs (a zombie waiting for its reaper does not), after up to ``wait_s``."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        if state in ("Z", "X") or time.monotonic() > deadline:
            return state not in ("Z", "X")
        time.sleep(0.1)


# ------------------------------------------------------------------- what the docs say it is run with


def test_the_run_call_in_the_docs_fits_the_scripts_own_bounds():
    """docs/gpu-check.md's ``run`` call (carry, command, timeout_s) and the script's own bounds nest:
    the steps' budget inside the script's timeout, inside the call's, inside the tool's 600 s; the
    steps it names are the driver's."""
    import re

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    page = (ROOT / "docs" / "gpu-check.md").read_text(encoding="utf-8")
    script = (ROOT / "scripts" / "gpu-check.sh").read_text(encoding="utf-8")
    call_timeout = int(re.search(r"timeout_s: (\d+)", page).group(1))
    assert 'carry:     [".whl"]' in page and "command:   bash scripts/gpu-check.sh" in page
    assert f"carry [\".whl\"], timeout_s {call_timeout}, command: bash scripts/gpu-check.sh" in script
    whole = int(re.search(r'GPU_CHECK_TIMEOUT:-(\d+)', script).group(1))
    assert gpu_check.BUDGET_S + 30 <= whole and whole + 30 <= call_timeout <= 600
    # the rerun of what failed: its steps' budget inside its bound, inside its call; both calls and a
    # machine's start (two minutes, say) inside the 15 minutes of device time a session has
    rerun = re.search(r"command:   GPU_CHECK_TIMEOUT=(\d+) bash scripts/gpu-check.sh --only STEP,STEP --budget-s (\d+)\n"
                      r"timeout_s: (\d+)", page)
    assert rerun, "the rerun's call"
    rerun_whole, rerun_budget, rerun_timeout = map(int, rerun.groups())
    assert rerun_budget + 20 <= rerun_whole and rerun_whole + 30 <= rerun_timeout
    assert 120 + call_timeout + rerun_timeout <= 15 * 60
    named = set(re.findall(r"^\| `([a-z_]+)`(?:, `([a-z_]+)`)? \|", page, flags=re.M))
    assert {n for pair in named for n in pair if n} == {s.name for s in gpu_check.LIVE}


def test_the_tree_that_travels_fits_the_device_tool():
    """The tracked files, and the wheels where they were fetched, stay well inside the 64 MiB the
    device tool carries (what a GPU run commits to tests/data/gpu counts here afterwards)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    tracked = sum((ROOT / f).stat().st_size for f in listed.stdout.split("\0") if f and (ROOT / f).is_file())
    wheels = sum(p.stat().st_size for p in (ROOT / ".whl").glob("*.whl")) if (ROOT / ".whl").is_dir() else 0
    assert tracked < 32 << 20, f"tracked files: {tracked / 2**20:.1f} MiB"
    assert tracked + wheels < 56 << 20, f"tracked {tracked / 2**20:.1f} MiB + wheels {wheels / 2**20:.1f} MiB"
