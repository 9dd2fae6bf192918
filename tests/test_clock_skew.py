"""The clock_skew finding (issue 42): a CUDA trace whose device clock contradicts its host clock
is flagged, with how many records, by how much, which CUDA profile of its process it was and what
to do; a trace whose clocks agree is not.

Every answer here comes from the raw JSON, read with plain loops and exact decimals (``Oracle``):
which device records a runtime call launched (their correlation ids), when each started after its
call, which of them started on an idle device. The recorded H100 traces are changed only in their
device records' times (shifted later or earlier by an amount worked out from the oracle, so the
finding's number lands just below, at or just above each threshold), and the unchanged traces, every
other trace in tests/data, the hostile traces and the folders stay quiet (random event trees:
tests/test_invariants.py's ``check_clocks_agree``).
The thresholds are written here as numbers (tests/test_boundaries.py lists them too).
"""

from __future__ import annotations

import copy
import gzip
import json
from decimal import Decimal
from pathlib import Path

import pytest
import nbprof
from nbprof.analysis.findings import clock_skew

from .conftest import DATA, TRACES, needs_torch, run, trace_path
from .hostile import hostile_folder, hostile_trace, write_trace
from .synthetic import Trace, collectives_folder, training_loop

EARLY_MIN_US = Decimal(100)
IDLE_MIN_US = Decimal(50)
SHIFT_MIN_US = Decimal(1000)
SHIFT_MIN_LAUNCHES = 3
CONSTANT_SPREAD_SHARE = Decimal("0.10")
NS = Decimal("0.001")  # µs

WORK_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
DEVICE_CATS = WORK_CATS | {"gpu_user_annotation"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}


def test_thresholds_are_these():
    assert clock_skew.IMPOSSIBLE_MIN_RECORDS == 1
    assert (Decimal(str(clock_skew.EARLY_MIN_US)), Decimal(str(clock_skew.IDLE_MIN_US)),
            Decimal(str(clock_skew.SHIFT_MIN_US))) == (EARLY_MIN_US, IDLE_MIN_US, SHIFT_MIN_US)
    assert clock_skew.SHIFT_MIN_LAUNCHES == SHIFT_MIN_LAUNCHES
    assert Decimal(str(clock_skew.CONSTANT_SPREAD_SHARE)) == CONSTANT_SPREAD_SHARE


# ----------------------------------------------------------------------- the raw JSON's answers


def read_raw(path: Path) -> dict:
    """A trace with exact decimal times (``ts`` of 4.5e12 µs hold ns exactly only so)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        return json.loads(f.read(), parse_float=Decimal)


def write_raw(doc: dict, path: Path) -> Path:
    path.write_text(json.dumps(doc, default=float))  # a decimal as the float nearest it: ns survive
    return path


class Oracle:
    """A trace's launches, from its JSON: each device record whose correlation id a runtime call
    has, with both starts (µs, exact), and whether its device was idle before it (every earlier
    record of the device ended at least ``IDLE_MIN_US`` before it; not the device's first)."""

    def __init__(self, doc: dict) -> None:
        events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        calls = {e["args"]["correlation"]: Decimal(e["ts"]) for e in events
                 if e.get("cat") in RUNTIME_CATS and e.get("args", {}).get("correlation", 0) > 0}
        work = sorted((e for e in events if e.get("cat") in WORK_CATS), key=lambda e: Decimal(e["ts"]))
        self.delays: list[Decimal] = []  # start - call start, every launch
        self.idle_delays: list[Decimal] = []  # the same, launches onto an idle device
        latest_end: dict = {}
        for e in work:
            device = e["args"].get("device", e["pid"])
            start, end = Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(e["dur"])
            idle = device in latest_end and start - latest_end[device] >= IDLE_MIN_US
            latest_end[device] = max(latest_end.get(device, end), end)
            call = calls.get(e["args"].get("correlation"))
            if call is not None:
                self.delays.append(start - call)
                if idle:
                    self.idle_delays.append(start - call)


def shifted(doc: dict, by_us: Decimal) -> dict:
    """The trace with every device record (and its flow arrow's end) moved by ``by_us``."""
    doc = copy.deepcopy(doc)
    for e in doc["traceEvents"]:
        if e.get("cat") in DEVICE_CATS or (e.get("ph") == "f" and e.get("cat") == "ac2g"):
            e["ts"] = Decimal(e["ts"]) + by_us
    return doc


def skew_of(profile) -> list[tuple[str, str, dict]]:
    """The profile's clock_skew findings, as ``p.findings`` has them."""
    f = profile.findings
    rows = f[f["kind"] == "clock_skew"]
    return list(zip(rows["severity"], rows["message"], rows["evidence"]))


def skew(profile) -> list[tuple[str, str, dict]]:
    """The same from the check alone (the other kinds are not computed: faster)."""
    from nbprof.analysis.findings._common import TorchContext

    if len(profile.events) == 0:
        return []
    return [(f.severity, f.message, f.evidence) for f in clock_skew.find(TorchContext(profile))]


@pytest.fixture(scope="module")
def recorded() -> dict[str, dict]:
    return {name: read_raw(trace_path(name)) for name in TRACES}


# --------------------------------------------------------------------------- quiet where it must be


def _corpus() -> list[Path]:
    files = sorted(p for p in DATA.rglob("*.json*") if ".trace." in p.name or p.parent.name in ("wild", "ddp_gloo")
                   or p.parent.name in ("ranks", "partial") or p.name == "trace.json.gz")
    # a GPU check's later profiles of one process (gpu/repeat, gpu/toggle) are where torch's bug may
    # show: tests/test_gpu_recorded.py holds them to the bug as their JSON shows it
    later = {"repeat", "toggle"}
    return [p for p in files if not p.name.endswith(".oracle.json") and p.name != "README.md"
            and not (p.parent.name in later and p.parent.parent.name == "gpu")]


def test_the_corpus_is_what_it_says():
    names = {p.name for p in _corpus()}
    assert {f"{n}.trace.json.gz" for n in TRACES} <= names
    assert {"amd_mi250_rocm6.json.gz", "meta_format_control.json.gz", "mtia_inference_rank_0.json.gz",
            "nccl_data.json.gz", "resnet50_num_workers_0.pt.trace.json.gz", "hta_cases.trace.json.gz",
            "TestProfiler.test_external_id.json"} <= names
    assert len(names) >= 20


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: str(p.relative_to(DATA)))
def test_quiet_on_every_recorded_trace(path):
    """Every trace in tests/data (the H100 set, the TensorBoard plugin's and HTA's, cut to a
    first part of their time, the CPU ranks): no clock_skew finding, and no note."""
    p = nbprof.load_trace(path)
    assert skew(p) == []
    assert p.meta.left_out_work == {} and p.meta.cuda_profile is None


@pytest.mark.slow  # a worker pool each; their rank files are in the fast test above
@pytest.mark.parametrize("folder", ["ddp_gloo", "cluster_views/ranks", "cluster_views/partial"])
def test_quiet_on_the_folders(folder):
    c = nbprof.load_trace(DATA / folder)
    assert "clock_skew" not in set(c.findings["kind"])


@pytest.mark.slow
def test_a_folder_names_the_rank_whose_clock_is_off(recorded, tmp_path):
    """Two ranks of the recorded CNN, rank 1's device records 3 ms late: the folder's finding is
    rank 1's, and its report's first note says so."""
    for rank, by in ((0, Decimal(0)), (1, SHIFT_MIN_US * 3)):
        doc = shifted(recorded["cnn_train_cuda"], by)
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
        write_raw(doc, tmp_path / f"rank{rank}.json")
    c = nbprof.load_trace(tmp_path, progress=False)
    rows = c.findings[c.findings["kind"] == "clock_skew"]
    assert len(rows) == 1 and rows.iloc[0]["evidence"]["ranks"] == [1]
    assert rows.iloc[0]["message"].startswith("Rank 1: The device clock contradicts the host's")
    assert c.report().notes[0].startswith("the device clock contradicts the host's")


@pytest.mark.slow
def test_quiet_on_hand_made_and_hostile_folders(tmp_path):
    for folder in (collectives_folder(tmp_path / "ranks"), hostile_folder(tmp_path / "hostile", lambda field: field)):
        c = nbprof.load_trace(folder, progress=False)
        assert "clock_skew" not in set(c.findings["kind"])


def test_quiet_on_hand_made_and_hostile_traces(tmp_path):
    for loop in (training_loop(4, copy_us=50, item_sync_us=20), training_loop(3, kernel_us=50, gap_us=200)):
        assert skew(loop.load(tmp_path)) == []
    p = nbprof.load_trace(write_trace(tmp_path / "hostile.json", hostile_trace(lambda field: f"<b>{field}</b>")))
    assert skew(p) == [] and len(p.events[p.events["kind"] == "kernel"]) == 2


# ---------------------------------------------------- the recorded H100 traces, device times shifted


@pytest.mark.parametrize("name", TRACES)
def test_recorded_launches_are_what_the_module_docstring_says(recorded, name):
    """The measurements behind the thresholds, on the traces in tests/data: every device record
    starts after its launch call (at least 4 µs), and a launch onto an idle GPU starts within
    20 µs of its call at the least, at least three times a trace."""
    o = Oracle(recorded[name])
    assert min(o.delays) >= 4
    assert len(o.idle_delays) >= SHIFT_MIN_LAUNCHES and min(o.idle_delays) <= 20


@pytest.mark.parametrize("name", TRACES)
def test_a_later_device_clock_is_found_at_the_threshold(recorded, tmp_path, name):
    """Device records moved later by so much that the smallest wait of a launch onto an idle GPU
    is SHIFT_MIN_US less 1 ns (quiet), exactly SHIFT_MIN_US, and 1 ns more: a constant shift,
    said with its size, the launches counted, and the device work's end after the host's."""
    o = Oracle(recorded[name])
    at = SHIFT_MIN_US - min(o.idle_delays)
    assert skew(nbprof.load_trace(write_raw(shifted(recorded[name], at - NS), tmp_path / "below.json"))) == []
    for label, by in (("at", at), ("above", at + NS)):
        p = nbprof.load_trace(write_raw(shifted(recorded[name], by), tmp_path / f"{label}.json"))
        [(severity, message, evidence)] = skew(p)
        assert severity == "high"
        assert evidence["shift_us"] == pytest.approx(float(min(o.idle_delays) + by), abs=1e-6)
        assert evidence["idle_launches"] == len(o.idle_delays)
        assert evidence["constant"] is True  # each trace's idle waits are within a few µs of each other
        ordered = sorted(o.idle_delays)
        assert evidence["median_wait_us"] == pytest.approx(float((ordered[(len(ordered) - 1) // 2]
                                                                  + ordered[len(ordered) // 2]) / 2 + by), abs=1e-6)
        assert "shifted later by about" in message and "as one constant" in message
        assert "early" not in evidence and "missing_kernels" not in evidence
        assert evidence["cuda_profile"] is None  # torch's file: not known
        assert "if this was not the first of its process, that is the likely cause" in message
    # in the profile's findings first of all, whatever else fires; the report's first note
    assert p.findings["kind"].iloc[0] == "clock_skew" and skew_of(p) == skew(p)
    report = p.report()
    assert report.notes[0] == ("the device clock contradicts the host's (see the clock_skew finding): device times "
                               "are not to be trusted")
    assert f"note: {report.notes[0]}" in report.text() and "device clock contradicts" in report.html()


@pytest.mark.parametrize("name", TRACES)
def test_an_earlier_device_clock_is_found_at_the_threshold(recorded, tmp_path, name):
    """Device records moved earlier until the one with the shortest launch-to-start delay starts
    EARLY_MIN_US before its call, less 1 ns (quiet), exactly, and 1 ns more."""
    o = Oracle(recorded[name])
    at = EARLY_MIN_US + min(o.delays)
    assert skew(nbprof.load_trace(write_raw(shifted(recorded[name], -(at - NS)), tmp_path / "b.json"))) == []
    for label, by in (("at", at), ("above", at + NS)):
        p = nbprof.load_trace(write_raw(shifted(recorded[name], -by), tmp_path / f"{label}.json"))
        [(severity, message, evidence)] = skew(p)
        lead = [by - d for d in o.delays]
        assert severity == "high"
        assert evidence["early"] == sum(1 for x in lead if x >= EARLY_MIN_US) >= 1
        assert evidence["early_max_us"] == pytest.approx(float(max(lead)), abs=1e-6)
        assert "before the call that launched" in message


def _drop(doc: dict, correlations: set[int]) -> dict:
    doc = dict(doc)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not (e.get("cat") in WORK_CATS
                                                                  and e.get("args", {}).get("correlation") in correlations)]
    return doc


def _kernel_launches(doc: dict) -> list[int]:
    """The correlation ids of the kernel launches whose kernel is there, in time order."""
    kernels = {e["args"]["correlation"] for e in doc["traceEvents"] if e.get("cat") == "kernel"}
    calls = sorted((Decimal(e["ts"]), e["args"]["correlation"]) for e in doc["traceEvents"]
                   if e.get("cat") in RUNTIME_CATS and "LaunchKernel" in e["name"]
                   and e.get("args", {}).get("correlation") in kernels)
    return [c for _, c in calls]


@pytest.mark.parametrize("name", TRACES)
def test_kernel_launches_without_their_kernel(recorded, tmp_path, name):
    """#192021: torch drops the kernel records it places outside the profile, and their launches
    point nowhere. None (the unchanged trace) quiet; one or two from the start "medium"; the
    last launch's kernel gone: quiet (a trace cut short looks so)."""
    doc = recorded[name]
    launches = _kernel_launches(doc)
    unchanged = nbprof.load_trace(write_raw(doc, tmp_path / "none.json"))
    assert skew(unchanged) == []
    for n in (1, 2):
        p = nbprof.load_trace(write_raw(_drop(doc, set(launches[:n])), tmp_path / f"{n}.json"))
        [(severity, message, evidence)] = skew(p)
        assert severity == "medium"
        assert evidence["missing_kernels"] == n and evidence["missing_kernels_at_end"] == 0
        assert ("1 kernel launch has no kernel" if n == 1 else "2 kernel launches have no kernel") in message
    p = nbprof.load_trace(write_raw(_drop(doc, {launches[-1]}), tmp_path / "last.json"))
    assert skew(p) == []


def test_no_note_where_the_clocks_agree(tmp_path):
    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    assert "clock_skew" not in set(p.findings["kind"])
    assert not any("clock" in n for n in p.report().notes)


@pytest.mark.parametrize("how, reason", [("zero_ts", "a timestamp of 0"), ("negative_dur", "a negative duration"),
                                         ("far", "a time more than a day from the rest")])
def test_device_records_the_reader_left_out(recorded, tmp_path, how, reason):
    """#188481 (a ts of 0), a negative duration, #192021's record ~1e14 ns off: the reader leaves
    such a record out and counts it; the finding says so, and the count survives save/load."""
    doc = copy.deepcopy(recorded["cnn_train_cuda"])
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    if how == "zero_ts":
        kernel["ts"] = 0
    elif how == "negative_dur":
        kernel["dur"] = Decimal("-1.5")
    else:
        kernel["ts"] = Decimal(kernel["ts"]) - Decimal("1e11")
    p = nbprof.load_trace(write_raw(doc, tmp_path / "t.json"))
    assert p.meta.left_out_work == {how: 1}
    [(severity, message, evidence)] = skew(p)
    assert severity == "high" and evidence["left_out"] == {how: 1}
    assert f"1 device record for {reason}" in message
    p.save(tmp_path / "saved.json")
    again = nbprof.load_trace(tmp_path / "saved.json")
    assert again.meta.left_out_work == {how: 1}
    assert skew(again) == skew(p)


def test_a_saved_shifted_profile_says_the_same(recorded, tmp_path):
    by = SHIFT_MIN_US * 3
    p = nbprof.load_trace(write_raw(shifted(recorded["cnn_train_cuda"], by), tmp_path / "t.json"))
    p.save(tmp_path / "saved.json.gz")
    assert skew(nbprof.load_trace(tmp_path / "saved.json.gz")) == skew(p) != []


# ------------------------------------------------------------------ which CUDA profile of its process


@pytest.mark.parametrize("number, said", [(1, "the first CUDA profile nbprof read in this process"),
                                          (2, "This is the 2nd CUDA profile nbprof read in this process"),
                                          (3, "This is the 3rd CUDA profile nbprof read in this process"),
                                          (11, "This is the 11th CUDA profile nbprof read in this process"),
                                          (22, "This is the 22nd CUDA profile")])
def test_the_profile_says_which_cuda_profile_of_its_process_it_was(recorded, tmp_path, number, said):
    """nbprof writes the number into the traces it saves (``nbprofCudaProfile``); a later one
    than the first is torch's bug, and the note says the first is the one to trust."""
    doc = shifted(recorded["two_streams"], SHIFT_MIN_US * 2)
    doc["nbprofCudaProfile"] = number
    p = nbprof.load_trace(write_raw(doc, tmp_path / "t.json"))
    assert p.meta.cuda_profile == number
    [(_, message, evidence)] = skew_of(p)
    assert said in message and evidence["cuda_profile"] == number
    note = p.report().notes[0]
    if number > 1:
        assert "the first one is the one to trust" in message
        assert f"{said.split('This is ')[-1].split(' nbprof')[0]} nbprof read in this process" in note
        assert "only a process's first is right" in note and "restart the kernel" in note
    else:
        assert "only if the code profiled CUDA before" in message and "process's first is right" not in note
    p.save(tmp_path / "saved.json")
    assert nbprof.load_trace(tmp_path / "saved.json").meta.cuda_profile == number


@pytest.mark.parametrize("value", ["2", 0, -1, 1.5, True, [2], 1 << 40])
def test_a_cuda_profile_number_that_cannot_be_is_a_note(recorded, tmp_path, value):
    doc = dict(recorded["two_streams"], nbprofCudaProfile=value)
    p = nbprof.load_trace(write_raw(doc, tmp_path / "t.json"))
    assert p.meta.cuda_profile is None
    assert any(n.startswith("nbprofCudaProfile ") and n.endswith("is not a count of profiles: not used")
               for n in p.meta.notes)


@pytest.mark.parametrize("value", [{"zero_ts": -1}, {"other": 1}, [1], "zero_ts", {"far": 1.0}])
def test_left_out_counts_that_cannot_be_are_a_note(recorded, tmp_path, value):
    doc = dict(recorded["two_streams"], nbprofLeftOutWork=value)
    p = nbprof.load_trace(write_raw(doc, tmp_path / "t.json"))
    assert p.meta.left_out_work == {} and skew(p) == []
    assert any(n.startswith("nbprofLeftOutWork ") for n in p.meta.notes)


def test_a_schedules_cycles_are_numbered_each(recorded, tmp_path):
    """Each cycle of a schedule is a torch session of its own (torch's bug counts them): a merged
    profile says which ones it holds, and what the reader left out of each, added up."""
    from nbprof.events import concat_traces
    from nbprof.model import TorchProfile
    from nbprof.collect.chrome_trace import read_trace_file

    parts = []
    for number in (2, 3):
        doc = shifted(recorded["two_streams"], SHIFT_MIN_US * 2)
        doc["nbprofCudaProfile"] = number
        doc["nbprofLeftOutWork"] = {"zero_ts": number}  # as nbprof writes a trace it left records out of
        parts.append(read_trace_file(write_raw(doc, tmp_path / f"{number}.json")))
    p = TorchProfile.from_trace(concat_traces(parts, label_column="cycle"))
    [(_, message, evidence)] = skew(p)
    assert evidence["cuda_profile"] == [2, 3] and "This is CUDA profiles 2 to 3 nbprof read" in message
    assert evidence["left_out"] == {"zero_ts": 5} and "5 device records for a timestamp of 0" in message


# ------------------------------------------------------------------ hand-made traces, each threshold


def _idle_loop(delays: list[float], gap_us: float = 500.0, kernel_us: float = 100.0) -> Trace:
    """A first launch (its device's first record: never in the sample), then one launch per delay:
    each kernel starts ``gap_us`` after the one before ended, its call ``delay`` before it."""
    t = Trace()
    gpu = 1000.0
    ext = t.op("aten::mm", 0, 20)
    t.launch("gemm", ext, 5, 5, gpu, kernel_us)
    for d in delays:
        gpu += kernel_us + gap_us
        ext = t.op("aten::mm", gpu - d - 5, 20)
        t.launch("gemm", ext, gpu - d, 5, gpu, kernel_us)
    t.op("aten::relu", gpu + kernel_us + 10, 5)  # the host's last event after the device's
    return t


@pytest.mark.parametrize("delay, fires", [(999.999, False), (1000.0, True), (1000.001, True)])
def test_shift_min_us(tmp_path, delay, fires):
    found = skew(_idle_loop([delay] * 3).load(tmp_path))
    assert bool(found) == fires
    if fires:
        assert found[0][2]["shift_us"] == pytest.approx(delay, abs=1e-9)


@pytest.mark.parametrize("gap, fires", [(49.999, False), (50.0, True), (50.001, True)])
def test_idle_min_us(tmp_path, gap, fires):
    """Work queued behind other work (its device busy until less than IDLE_MIN_US before it
    started) waits for the device, not for a clock: left out of the sample."""
    found = skew(_idle_loop([2000.0] * 3, gap_us=gap).load(tmp_path))
    assert bool(found) == fires
    if fires:
        assert found[0][2]["idle_launches"] == 3


@pytest.mark.parametrize("launches, fires", [(2, False), (3, True), (4, True)])
def test_shift_min_launches(tmp_path, launches, fires):
    found = skew(_idle_loop([2000.0] * launches).load(tmp_path))
    assert bool(found) == fires
    if fires:
        assert found[0][2]["idle_launches"] == launches


def test_a_devices_first_record_is_not_in_the_sample(tmp_path):
    """What ran on a device before the profile started is not in it, so its first record may
    have waited behind that: never counted as a launch onto an idle device. Device 0 runs three
    launches 2 ms late, device 1 one launch that started 10 µs after its call (its first)."""
    t = _idle_loop([2000.0] * 3)
    ext = t.op("aten::add", 100_000, 20)
    t.launch("add_kernel", ext, 100_005, 5, 100_015, 10, device=1)
    [(_, _, evidence)] = skew(t.load(tmp_path))
    assert evidence["idle_launches"] == 3 and evidence["shift_us"] == pytest.approx(2000.0, abs=1e-9)


@pytest.mark.parametrize("middle, constant", [(1099.999, True), (1100.0, True), (1100.001, False)])
def test_constant_spread_share(tmp_path, middle, constant):
    """Waits of 1000, ``middle`` and 3000 µs: one constant shift when the median is within 10 %
    of the smallest, else a timeline late by varying amounts (it fires either way)."""
    [(severity, message, evidence)] = skew(_idle_loop([1000.0, middle, 3000.0]).load(tmp_path))
    assert severity == "high" and evidence["constant"] is constant
    assert evidence["median_wait_us"] == pytest.approx(middle, abs=1e-9)
    if constant:
        assert "shifted later by about 1.00 ms, as one constant" in message
    else:
        assert "runs 1.00 ms to 3.00 ms late, not by one constant (median 1.10 ms)" in message


@pytest.mark.parametrize("lead, fires", [(99.999, False), (100.0, True), (100.001, True)])
def test_early_min_us(tmp_path, lead, fires):
    t = Trace()
    ext = t.op("aten::mm", 500, 50)
    t.launch("gemm", ext, 510, 5, 510 - lead, 20)
    ext = t.op("aten::add", 600, 50)
    t.launch("add_kernel", ext, 610, 5, 620, 20)
    found = skew(t.load(tmp_path))
    assert bool(found) == fires
    if fires:
        [(severity, message, evidence)] = found
        assert severity == "high" and evidence["early"] == 1
        assert evidence["early_max_us"] == pytest.approx(lead, abs=1e-9)
        assert f"1 device record starts before the call that launched it, by up to {lead:.1f} µs" in message


@pytest.mark.parametrize("missing", [0, 1, 2])
def test_impossible_min_records(tmp_path, missing):
    """Launches 1..``missing`` of four lose their kernel (none: quiet); a fifth's kernel is there."""
    t = Trace()
    for i in range(5):
        ext = t.op("aten::mm", 100 * i, 50)
        t.launch("gemm", ext, 100 * i + 10, 5, 100 * i + 20, 20)
    gone = {e["args"]["correlation"] for e in t.events if e["cat"] == "kernel"}
    gone = set(sorted(gone)[:missing])
    t.events = [e for e in t.events if not (e["cat"] == "kernel" and e["args"]["correlation"] in gone)]
    found = skew(t.load(tmp_path))
    assert bool(found) == (missing >= 1)
    if missing:
        assert found[0][0] == "medium" and found[0][2]["missing_kernels"] == missing


def test_launches_at_the_end_without_kernels_are_said_with_a_shift(tmp_path):
    """Under a shift torch drops the kernels it places after the profile: launches at the end
    without their kernel are counted then (alone they are quiet: test_kernel_launches_...)."""
    t = _idle_loop([2000.0] * 3)
    ext = t.op("aten::add", 90_000, 20)
    t.runtime("cudaLaunchKernel", 90_005, 5, ext=ext, corr=999)
    [(_, message, evidence)] = skew(t.load(tmp_path))
    assert evidence["missing_kernels"] == 0 and evidence["missing_kernels_at_end"] == 1
    assert "1 kernel launch has no kernel" in message


def test_launch_calls_are_the_ones_that_launch_one_kernel():
    launches = ["cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                "cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernelMultiDevice", "hipLaunchKernel",
                "hipExtLaunchKernel", "hipModuleLaunchKernel", "hipExtModuleLaunchKernel"]
    others = ["cudaMemcpyAsync", "cudaMemsetAsync", "cudaGraphLaunch", "cudaLaunchHostFunc", "cudaStreamSynchronize",
              "cudaEventRecord", "hipMemcpyWithStream"]
    assert all(clock_skew.KERNEL_LAUNCH.search(n) for n in launches)
    assert not any(clock_skew.KERNEL_LAUNCH.search(n) for n in others)


# ----------------------------------------------------------------------------- the live count


@needs_torch
def test_a_cpu_profile_is_no_cuda_profile(shell):
    from nbprof.collect import torch_live

    before = torch_live.cuda_profiles_read()
    run(shell, "%%torchprof -q -o cpu_p\nimport torch\ntorch.ones(3).sum()")
    p = shell.user_ns["cpu_p"]
    assert p.meta.cuda_profile is None and torch_live.traced_cuda(p.profiler.profiler) is False
    assert torch_live.cuda_profiles_read() == before


@needs_torch
def test_each_cuda_session_read_is_counted_once(monkeypatch):
    """No GPU here: torch's CPU build traces no CUDA, so ``traced_cuda`` says yes for this test
    (what a CUDA build's profiler with ProfilerActivity.CUDA says); the count, the number on each
    profile and on a profile read again are nbprof's own, on real torch profilers.
    tests/test_gpu.py checks the same on a GPU."""
    import torch
    from nbprof.collect import torch_live

    monkeypatch.setattr(torch_live, "traced_cuda", lambda profiler: True)
    numbers = []
    profilers = []
    for _ in range(2):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            torch.ones(4).sum()
        profilers.append(prof)
        numbers.append(nbprof.from_profiler(prof).meta.cuda_profile)
    assert numbers[1] == numbers[0] + 1 == torch_live.cuda_profiles_read()
    assert nbprof.from_profiler(profilers[0]).meta.cuda_profile == numbers[0]  # read again: the same one
    assert torch_live.cuda_profiles_read() == numbers[1]
