"""The checks of the GPU check (``scripts/gpu-check.sh``, driver ``scripts/gpu_check.py``): each a
function that takes what a run recorded (a profile, torch's own chrome trace of it, a snapshot
pickle) and raises :class:`CheckFailed` with the numbers when a CUDA path does not hold, or returns
those numbers when it does.

They are test code, not nbprof's: each compares nbprof's answer with an independent one, either
torch's own (its ``key_averages()``, ``torch.cuda.max_memory_allocated()``, ``_memory_viz``) or the
raw JSON of torch's ``export_chrome_trace`` read here with plain loops. The same functions run in
three places: live on a GPU (the check's steps), on the recorded H100 traces in tests/data (its
``--dry-run``, so they are proven before a GPU sees them) and on what a GPU run kept under
tests/data/gpu (tests/test_gpu_recorded.py).

The repeat-profile bug (pytorch/pytorch#175790, #192021) is said to *show* in a trace by
:func:`bug_reasons`, defined apart from nbprof's ``clock_skew`` finding (whose thresholds are
larger): a device record that starts before the call that launched it (by any amount: no clock
allows it), a kernel launch without its kernel before the last one that has its kernel, a device
record with a timestamp of 0, a negative duration or a time a day away from the host's, or, against
the process's first CUDA profile of the same code, the least launch-to-start delay grown by
``SHOWS_SHIFT_US`` or more (the H100 traces' least delays are 4-17 µs: no GPU needs 100 µs more
to start work on an idle queue in one run of the same code than in another).
"""

from __future__ import annotations

import gzip
import json
import pickle
import re
import statistics
from pathlib import Path
from typing import Any, Iterable

WORK_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME_CATS = ("cuda_runtime", "cuda_driver")
KERNEL_LAUNCH = re.compile(r"[Ll]aunch(?:Cooperative)?Kernel")
DEVICE_KINDS = ("kernel", "memcpy", "memset")  # nbprof's kinds of the same records
SCALAR_READ = "aten::_local_scalar_dense"  # what .item() runs (its copy and wait happen inside)
OUTSIDE = "(outside your code)"  # lines()' row of what ran outside the user's code

SHOWS_SHIFT_US = 100.0  # the least launch-to-start delay grown so much over the first profile's: the bug
FAR_US = 86_400e6  # a device record a day away from the host's events
KERNEL_TIME_RATIO = 2.0  # a kernel's median duration against the first profile's: within 1/2x to 2x
KERNEL_MIN_RECORDS = 3  # kernels compared across profiles: recorded at least this often in each ...
KERNEL_MIN_US = 2.0  # ... and taking at least this long (a median) in the first
PEAK_TOLERANCE_BYTES = 512  # the CUDA caching allocator rounds every block to 512 bytes
SUM_REL = 1e-3  # per-line device time against the device records' total
SUM_ABS_US = 0.05


class CheckFailed(AssertionError):
    """A check did not hold: its message says what, with the numbers."""


class NotApplicable(Exception):
    """What a check compares is not there to compare (said with why: a torch that differs on
    purpose, docs/differences.md)."""


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def holds(condition: bool, message: str, found: dict[str, Any] | None = None) -> dict[str, Any]:
    """A check of one condition: ``expect`` it, then what was found (for the results)."""
    expect(condition, message)
    return dict(found or {})


# ------------------------------------------------------------------------- the raw JSON's answers


def read_trace(path: str | Path) -> dict:
    """A chrome trace (.json or .json.gz) as plain JSON."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        return json.load(f)


def _complete(doc: dict) -> list[dict]:
    return [e for e in doc.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"]


def device_work_us(doc: dict) -> float:
    """The device records' total time (kernels, copies, memsets), µs."""
    return sum(float(e.get("dur", 0)) for e in _complete(doc) if e.get("cat") in WORK_CATS)


def device_records(doc: dict) -> int:
    return sum(1 for e in _complete(doc) if e.get("cat") in WORK_CATS)


def memory_events(doc: dict, device: int = 0) -> list[dict]:
    """The ``[memory]`` records of one CUDA device (``Device Type`` 1), in time order."""
    rows = [e for e in doc.get("traceEvents", []) if isinstance(e, dict) and e.get("name") == "[memory]"
            and e.get("args", {}).get("Device Type") == 1 and e.get("args", {}).get("Device Id") == device]
    return sorted(rows, key=lambda e: float(e["ts"]))


def memory_peak_bytes(doc: dict, device: int = 0) -> int | None:
    """The largest ``Total Allocated`` a CUDA memory record of the device carries (None: none)."""
    totals = [int(e["args"]["Total Allocated"]) for e in memory_events(doc, device)]
    return max(totals) if totals else None


def annotation_windows(doc: dict, names: Iterable[str]) -> dict[str, tuple[float, float]]:
    """``record_function`` ranges (``user_annotation``) by name: (start, end) µs of the first of each."""
    wanted, out = set(names), {}
    for e in sorted(_complete(doc), key=lambda e: float(e["ts"])):
        if e.get("cat") == "user_annotation" and e.get("name") in wanted and e["name"] not in out:
            out[e["name"]] = (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
    return out


def clock_facts(doc: dict) -> dict[str, Any]:
    """What the trace's clocks say, from its JSON: every device record matched to the runtime call
    that launched it (correlation id), the least delay from call to start, the records that start
    before their call, the kernel launches without a kernel (before the last launch whose kernel is
    there), and the records with a timestamp of 0, a negative duration or a time a day away."""
    events = _complete(doc)
    calls: dict[int, tuple[float, str]] = {}
    host_ts: list[float] = []
    for e in events:
        if e.get("cat") in RUNTIME_CATS:
            corr = (e.get("args") or {}).get("correlation", 0)
            if isinstance(corr, int) and corr > 0:
                calls[corr] = (float(e["ts"]), str(e.get("name", "")))
        if e.get("cat") not in WORK_CATS and e.get("cat") != "gpu_user_annotation" and float(e.get("ts", 0)) > 0:
            host_ts.append(float(e["ts"]))
    host_mid = statistics.median(host_ts) if host_ts else None
    delays: list[float] = []
    found: set[int] = set()
    zero = negative = far = 0
    for e in events:
        if e.get("cat") not in WORK_CATS:
            continue
        ts, dur = float(e.get("ts", 0)), float(e.get("dur", 0))
        corr = (e.get("args") or {}).get("correlation")
        if isinstance(corr, int):
            found.add(corr)
        if ts == 0:
            zero += 1
            continue
        if dur < 0:
            negative += 1
        if host_mid is not None and abs(ts - host_mid) > FAR_US:
            far += 1
            continue
        if corr in calls:
            delays.append(ts - calls[corr][0])
    launches = sorted((ts, corr) for corr, (ts, name) in calls.items() if KERNEL_LAUNCH.search(name))
    with_kernel = [ts for ts, corr in launches if corr in found]
    last = max(with_kernel) if with_kernel else None
    missing = sum(1 for ts, corr in launches if corr not in found and last is not None and ts < last)
    early = [d for d in delays if d < 0]
    return {"launches": len(delays), "min_delay_us": min(delays) if delays else None,
            "median_delay_us": statistics.median(delays) if delays else None,
            "early": len(early), "early_max_us": -min(early) if early else 0.0,
            "missing_kernels": missing, "zero_ts": zero, "negative_dur": negative, "far": far}


def bug_reasons(facts: dict[str, Any], first: dict[str, Any] | None = None) -> list[str]:
    """Why the repeat-profile bug shows in a trace with these :func:`clock_facts` (``first``: the
    facts of the process's first CUDA profile of the same code); [] where it does not."""
    out = []
    if facts["early"]:
        out.append(f"{facts['early']} device records start before their launch call (by up to "
                   f"{facts['early_max_us']:.1f} µs)")
    if facts["missing_kernels"]:
        out.append(f"{facts['missing_kernels']} kernel launches have no kernel")
    for key, what in (("zero_ts", "a timestamp of 0"), ("negative_dur", "a negative duration"),
                      ("far", "a time a day away from the host's")):
        if facts[key]:
            out.append(f"{facts[key]} device records with {what}")
    if first is not None and facts["min_delay_us"] is not None and first["min_delay_us"] is not None:
        grown = facts["min_delay_us"] - first["min_delay_us"]
        if grown >= SHOWS_SHIFT_US:
            out.append(f"the least launch-to-start delay grew by {grown:.1f} µs over the first profile's "
                       f"({first['min_delay_us']:.1f} -> {facts['min_delay_us']:.1f} µs)")
    return out


def kernel_durations(doc: dict) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for e in _complete(doc):
        if e.get("cat") == "kernel":
            out.setdefault(str(e["name"]), []).append(float(e.get("dur", 0)))
    return out


def shifted_trace(doc: dict, by_us: float) -> dict:
    """The trace with every device record (and its flow arrow's end) moved by ``by_us``: what the
    repeat-profile bug does to a trace, made from a right one (the dry run's later profiles)."""
    out = json.loads(json.dumps(doc))
    for e in out.get("traceEvents", []):
        if e.get("cat") in WORK_CATS + ("gpu_user_annotation",) or (e.get("ph") == "f" and e.get("cat") == "ac2g"):
            e["ts"] = float(e["ts"]) + by_us
    return out


# ------------------------------------------------------------------------------------- the checks


def python_frame_rows(p: Any, keys: Iterable[str]) -> set[str]:
    """Which of torch's key_averages keys are Python frames of ``with_stack`` (torch 2.13 lists them
    as rows and makes them parents in its operator tree: docs/differences.md, section 3)."""
    events = p.events
    frames = set(events.loc[events["kind"] == "python", "name"].astype(str))
    return set(keys) & frames


def check_key_averages(p: Any, oracle: dict) -> dict[str, Any]:
    """nbprof's key averages against torch's ``key_averages()`` of the same live profile (an
    oracle.json's ``rows``), every field torch reports, as tests/test_trace_oracles.py compares them
    (torch's double count under profiler-overhead events put back on our side first). Not
    applicable where torch listed Python frames as rows (torch 2.13 with ``--stack`` / ``--lines``:
    its operator tree then holds them, and nbprof's numbers are those without them)."""
    from .conftest import TORCH_FIELDS
    from .test_trace_oracles import DEVICE_KINDS as KINDS, torch_view

    frames = python_frame_rows(p, (r["key"] for r in oracle["rows"]))
    if frames:
        raise NotApplicable(f"torch {oracle.get('torch', '')} lists {len(frames)} Python frames as rows, e.g. "
                            f"{sorted(frames)[0]!r} (docs/differences.md, section 3)")
    events = p.events
    gpu_annotations = set(events.loc[events["kind"] == "gpu_annotation", "name"].astype(str))
    ours = {(r["name"], r["kind"] in KINDS): r for r in torch_view(p, "op").to_dict("records")}
    compared, worst = 0, 0.0
    for r in oracle["rows"]:
        on_device = str(r["device_type"]).endswith("CUDA")
        if on_device and r["key"] in gpu_annotations:
            continue  # torch's GPU-annotation rows (docs/differences.md)
        key = (r["key"], on_device)
        expect(key in ours, f"torch reports {key}, nbprof does not")
        for theirs, mine in TORCH_FIELDS.items():
            tol = 0 if theirs == "count" or "memory" in theirs else 0.01
            diff = abs(float(ours[key][mine]) - float(r[theirs]))
            expect(diff <= tol, f"{key} {theirs}: nbprof {ours[key][mine]}, torch {r[theirs]}")
            if tol:
                worst = max(worst, diff)
        compared += 1
    expect(compared >= 10, f"only {compared} rows of torch's to compare")
    return {"rows_compared": compared, "largest_time_difference_us": worst}


def check_lines_device_sum(p: Any, doc: dict) -> dict[str, Any]:
    """``p.lines()``'s self device time sums to the device records' total in torch's trace, some
    line of the user's code holds device time, and what is left outside the code is under 5 %."""
    lines = p.lines()
    total = device_work_us(doc)
    summed = float(lines["self_device_us"].sum())
    expect(total > 0, "the trace has no device records")
    expect(abs(summed - total) <= max(SUM_ABS_US, SUM_REL * total),
           f"per-line self device time sums to {summed:.3f} µs, the device records to {total:.3f} µs")
    outside = (lines["function"].astype(str) == OUTSIDE).to_numpy()
    outside_us = float(lines.loc[outside, "self_device_us"].sum())
    expect(float(lines["device_total_us"].max()) > 0, "no line has device time")
    expect(outside_us <= 0.05 * total, f"{outside_us:.1f} µs of {total:.1f} µs device time outside the user's code")
    return {"device_us": total, "lines_self_device_us": summed, "outside_code_device_us": outside_us,
            "lines": int(len(lines))}


def line_index(p: Any, source: str) -> int:
    """The row of ``p.lines()`` whose source is this line of the cell."""
    lines = p.lines()
    at = [i for i, s in enumerate(lines["source"].astype(str)) if s == source]
    expect(len(at) == 1, f"{len(at)} rows of lines() read {source!r}")
    return int(at[0])


def check_item_line(p: Any, item_source: str, calls: int, reads: int | None = None) -> dict[str, Any]:
    """The ``.item()`` line of a loop that ran it ``calls`` times: that many scalar reads on it, and
    no other operator (``aten::item`` around each); on a device it also holds the copy back (device
    time). ``reads``: torch's count of scalar reads in the whole profile (its ``key_averages()``;
    the model's own code may read scalars too), which nbprof's events must have."""
    import numpy as np

    line = line_index(p, item_source)
    at = p._event_lines()
    events = p.events
    names = events["name"].astype(str).to_numpy()
    is_op = (events["kind"] == "op").to_numpy()
    scalar = names == SCALAR_READ
    if reads is not None:
        expect(int(scalar.sum()) == reads, f"{int(scalar.sum())} {SCALAR_READ} events, torch counted {reads}")
    on_line = at == line
    here = int((scalar & on_line).sum())
    expect(here == calls, f"{here} scalar reads on the .item() line {item_source.strip()!r}, the loop ran it {calls} times")
    parent = events["parent"].to_numpy()
    outermost = on_line & is_op & ((parent < 0) | ~on_line[np.maximum(parent, 0)])  # the line's own calls
    others = sorted(set(names[outermost]) - {"aten::item"})
    expect(not others, f"other operators called on the .item() line: {others[:5]}")
    device_us = float(p.lines().iloc[line]["self_device_us"])
    if p.summary.has_device:
        expect(device_us > 0, f"the .item() line {item_source.strip()!r} holds no device time (its copy back)")
    return {"scalar_reads_on_the_line": here, "scalar_reads": int(scalar.sum()), "line": int(p.lines().iloc[line]["line"]),
            "line_self_device_us": device_us}


def check_sync_line(p: Any, item_source: str) -> dict[str, Any]:
    """The ``sync_line`` finding fires, naming the ``.item()`` line."""
    f = p.findings
    rows = f[f["kind"] == "sync_line"]
    expect(len(rows) == 1, f"{len(rows)} sync_line findings; the findings: {sorted(set(f['kind']))}")
    ev = rows.iloc[0]["evidence"]
    expect(str(ev["source"]).strip() == item_source.strip(),
           f"sync_line names {ev['source']!r}, not the .item() line {item_source.strip()!r}")
    return {"line": int(ev["line"]), "waits": int(ev["waits"]), "waited_us": float(ev["waited_us"]),
            "share_of_span": float(ev["share_of_span"]), "severity": str(rows.iloc[0]["severity"])}


def check_memory_peak(p: Any, doc: dict, max_allocated: int | None = None, device: int = 0) -> dict[str, Any]:
    """``--memory``: the CUDA curve has a point per memory record of the device in torch's trace, and
    its peak (the summary's) is the largest ``Total Allocated`` there and, live,
    ``torch.cuda.max_memory_allocated()`` (peak stats reset before the cell) within the allocator's
    rounding."""
    dev = f"cuda:{device}"
    raw = memory_events(doc, device)
    expect(len(raw) > 0, f"torch's trace has no memory records of {dev}")
    curve = p._memory_curve
    points = int((curve["device"].astype(str) == dev).sum())
    expect(points == len(raw), f"the {dev} curve has {points} points, torch's trace {len(raw)} memory records")
    peak = p.summary.peak_allocated_bytes.get(dev)
    raw_peak = memory_peak_bytes(doc, device)
    expect(peak == raw_peak, f"nbprof's {dev} peak {peak} B, the trace's largest Total Allocated {raw_peak} B")
    out = {"points": points, "peak_bytes": peak, "trace_peak_bytes": raw_peak}
    if max_allocated is not None:
        expect(abs(int(peak) - int(max_allocated)) <= PEAK_TOLERANCE_BYTES,
               f"nbprof's {dev} peak {peak} B, torch.cuda.max_memory_allocated() {max_allocated} B")
        out["max_memory_allocated"] = int(max_allocated)
    return out


def check_kernel_times(docs: list[dict]) -> dict[str, Any]:
    """Each later profile's per-kernel median durations against the first profile's (the same
    code): within ``1/KERNEL_TIME_RATIO`` to ``KERNEL_TIME_RATIO`` for every kernel recorded at
    least ``KERNEL_MIN_RECORDS`` times in both and taking ``KERNEL_MIN_US`` or more in the first."""
    first = {k: v for k, v in kernel_durations(docs[0]).items() if len(v) >= KERNEL_MIN_RECORDS}
    per_profile = []
    for i, doc in enumerate(docs[1:], start=2):
        ratios = {}
        for name, durs in kernel_durations(doc).items():
            if name in first and len(durs) >= KERNEL_MIN_RECORDS and statistics.median(first[name]) >= KERNEL_MIN_US:
                ratios[name] = statistics.median(durs) / statistics.median(first[name])
        expect(len(ratios) > 0, f"profile {i}: no kernel to compare with the first profile's")
        worst = max(ratios, key=lambda n: max(ratios[n], 1 / ratios[n]))
        per_profile.append({"profile": i, "kernels": len(ratios), "worst_kernel": worst[:80],
                            "worst_ratio": round(ratios[worst], 4)})
        expect(1 / KERNEL_TIME_RATIO <= ratios[worst] <= KERNEL_TIME_RATIO,
               f"profile {i}: {worst[:80]} takes {ratios[worst]:.2f}x its time in the first profile")
    return {"profiles": per_profile}


def check_repeat(docs: list[dict], fired: list[bool], cuda_profiles: list[int | None] | None = None) -> dict[str, Any]:
    """N profiles of the same code in one process: per profile, whether torch's bug shows
    (:func:`bug_reasons`, against the first) and whether the ``clock_skew`` finding fired; the
    verdict holds where they agree for every profile. ``cuda_profiles``: nbprof's count of each
    (``p.meta.cuda_profile``), which must go up by one a profile."""
    facts = [clock_facts(d) for d in docs]
    rows, disagree = [], []
    for i, (f, did_fire) in enumerate(zip(facts, fired), start=1):
        reasons = bug_reasons(f, facts[0] if i > 1 else None)
        rows.append({"profile": i, "cuda_profile": cuda_profiles[i - 1] if cuda_profiles else None,
                     "min_delay_us": f["min_delay_us"], "median_delay_us": f["median_delay_us"],
                     "launches": f["launches"], "early": f["early"], "missing_kernels": f["missing_kernels"],
                     "bad_records": f["zero_ts"] + f["negative_dur"] + f["far"],
                     "bug_shows": bool(reasons), "reasons": reasons, "clock_skew_fired": bool(did_fire)})
        if bool(reasons) != bool(did_fire):
            disagree.append(i)
    showed = [r["profile"] for r in rows if r["bug_shows"]]
    verdict = (f"torch's repeat-profile bug showed in profile(s) {showed} of {len(rows)}" if showed
               else f"torch's repeat-profile bug did not show in {len(rows)} profiles of one process")
    verdict += ("; clock_skew fired exactly there" if not disagree
                else f"; clock_skew disagreed in profile(s) {disagree}")
    out = {"verdict": verdict, "profiles": rows}
    if cuda_profiles:
        first = cuda_profiles[0]
        expect(isinstance(first, int) and list(cuda_profiles) == list(range(first, first + len(cuda_profiles))),
               f"nbprof numbered the CUDA profiles {cuda_profiles}")
    expect(not disagree, verdict + ": " + "; ".join(
        f"profile {r['profile']}: bug {'shows (' + ', '.join(r['reasons']) + ')' if r['bug_shows'] else 'does not show'}, "
        f"clock_skew {'fired' if r['clock_skew_fired'] else 'quiet'}" for r in rows if r["profile"] in disagree))
    return out


def fired(p: Any, kind: str = "clock_skew") -> bool:
    return bool((p.findings["kind"] == kind).any())


def device_kinds_count(p: Any) -> int:
    return int(p.events["kind"].isin(DEVICE_KINDS).sum())


def check_toggle(off: Any, on: Any, off_doc: dict | None = None, on_doc: dict | None = None) -> dict[str, Any]:
    """CUDA collection off (the panel's toggle or ``--no-cuda``): no device record, no device time,
    and the profile says it did not record CUDA; on again: device records, as many as torch's trace."""
    n_off, n_on = device_kinds_count(off), device_kinds_count(on)
    expect(n_off == 0 and not off.collected["cuda"], f"CUDA off: {n_off} device records, collected {off.collected}")
    expect(float(off.key_averages()["self_device_us"].sum()) == 0, "CUDA off: device time in key_averages()")
    expect(n_on > 0 and on.collected["cuda"], f"CUDA on: {n_on} device records, collected {on.collected}")
    out = {"off_device_records": n_off, "on_device_records": n_on}
    for what, doc, n in (("off", off_doc, n_off), ("on", on_doc, n_on)):
        if doc is not None:
            expect(device_records(doc) == n, f"CUDA {what}: nbprof has {n} device records, torch's trace {device_records(doc)}")
    return out


def check_in_cell_toggle(p: Any, doc: dict, windows: dict[str, tuple[float, float]], off: str = "off") -> dict[str, Any]:
    """``nbprof.cuda_collection(False)`` ... ``(True)`` inside a cell: torch's trace has no runtime
    call and no device record launched in the paused window, and both in every other window; nbprof
    has every device record torch's trace has."""
    events = _complete(doc)
    calls = {(e.get("args") or {}).get("correlation"): float(e["ts"]) for e in events if e.get("cat") in RUNTIME_CATS}
    launched_at = [calls.get((e.get("args") or {}).get("correlation")) for e in events if e.get("cat") in WORK_CATS]
    counts = {}
    for name, (lo, hi) in windows.items():
        runtime = sum(1 for e in events if e.get("cat") in RUNTIME_CATS and lo <= float(e["ts"]) <= hi)
        work = sum(1 for t in launched_at if t is not None and lo <= t <= hi)
        counts[name] = {"runtime_calls": runtime, "device_records": work}
        if name == off:
            expect(runtime == 0 and work == 0, f"CUDA paused in {name!r}: {runtime} runtime calls, {work} device records")
        else:
            expect(runtime > 0 and work > 0, f"CUDA recorded in {name!r}: {runtime} runtime calls, {work} device records")
    expect(device_kinds_count(p) == device_records(doc),
           f"nbprof has {device_kinds_count(p)} device records, torch's trace {device_records(doc)}")
    return counts


def memory_viz_totals(snapshot: dict, device: int) -> tuple[int, list[int]]:
    from .test_snapshot import memory_viz_totals as totals

    return totals(snapshot, device)


def check_snapshot(path: str | Path) -> dict[str, Any]:
    """A snapshot pickle (torch's ``_dump_snapshot`` format) read by ``nbprof.load_snapshot``
    against torch's ``_memory_viz``: each segment's allocated bytes are ``calc_active`` and torch's
    ``allocated_size``; the replayed history's active bytes after each alloc / free are memory_viz's
    Active Memory Timeline (its loop, tests/test_snapshot.py)."""
    import nbprof
    from torch.cuda import _memory_viz as mv

    with open(path, "rb") as f:
        raw = pickle.load(f)  # a file this check or torch wrote: trusted, the oracle's way to read it
    snap = nbprof.load_snapshot(path)
    seg = snap.segments().set_index("address")
    for s in raw["segments"]:
        active = mv.calc_active(s)
        expect(int(seg.loc[s["address"], "allocated_bytes"]) == active == s["allocated_size"],
               f"segment {s['address']:#x}: nbprof {seg.loc[s['address'], 'allocated_bytes']}, memory_viz {active}, "
               f"torch {s['allocated_size']}")
        expect(int(seg.loc[s["address"], "active_bytes"]) == s["active_size"],
               f"segment {s['address']:#x}: nbprof's active bytes {seg.loc[s['address'], 'active_bytes']}, torch's "
               f"{s['active_size']}")
    m = snap.active_memory()
    entries = 0
    for d, trace in enumerate(raw.get("device_traces", [])):
        if not trace:
            continue
        _, after = memory_viz_totals(raw, d)
        rows = m[(m["device"] == f"cuda:{d}") & m["action"].isin(["alloc", "free_completed"])]
        expect(rows["active_bytes"].tolist() == after,
               f"cuda:{d}: the replay's active bytes differ from memory_viz's at "
               f"{next((i for i, (a, b) in enumerate(zip(rows['active_bytes'], after)) if a != b), min(len(rows), len(after)))}")
        entries += len(trace)
    expect(len(raw["segments"]) > 0 and entries > 0, "the snapshot has no segments or no history")
    return {"segments": len(raw["segments"]), "history_entries": entries,
            "allocated_bytes": int(sum(s["allocated_size"] for s in raw["segments"]))}


def check_data_loading(p: Any, batches: int, workers: int, doc: dict | None = None, pinned: bool = False) -> dict[str, Any]:
    """A DataLoader with workers under ``%%torchprof``: ``p.data_loading()`` has each batch the loop
    took once, from the workers it had, each waited for (``wait_us`` >= 0); with ``pin_memory`` on a
    device, torch's trace has a host-to-device copy from pinned memory per batch at least."""
    table = p.data_loading()
    taken = table[table["wait_us"].notna()]
    expect(len(taken) == batches, f"data_loading() has {len(taken)} batches the loop took, it took {batches}")
    got_workers = sorted(set(int(w) for w in taken["worker"]))
    expect(got_workers == list(range(workers)), f"batches from workers {got_workers}, the loader had {workers}")
    expect(bool((taken["status"] == "ok").all()) and bool((taken["wait_us"] >= 0).all()),
           "a batch not ok, or a negative wait")
    out = {"batches": int(len(taken)), "workers": got_workers, "waited_us": float(taken["wait_us"].sum())}
    if pinned and doc is not None:
        copies = [e for e in _complete(doc) if e.get("cat") == "gpu_memcpy" and "HtoD" in str(e.get("name"))]
        from_pinned = sum(1 for e in copies if "Pinned" in str(e.get("name")))
        expect(from_pinned >= batches, f"{from_pinned} copies from pinned memory to the device for {batches} batches")
        out["pinned_copies"] = from_pinned
    return out


# ----------------------------------------------------------------- the dry run's inputs, made here


def synthetic_lines_profile(folder: str | Path) -> tuple[Any, dict, str, int]:
    """A CUDA loop with ``--lines``' line data, for the dry run of the line checks (no recorded
    CUDA trace has a ``.item()`` under a line of user code): tests/synthetic.py's training loop (4
    steps: ``y = x @ w`` launching a 500 µs kernel, ``print(y.sum().item())`` copying 4 bytes back
    and waiting 300 µs, ``x = torch.relu(y)``; at the end a 40 µs kernel launched by no operator)
    and each operator on its line of the cell, as
    ``%%torchprof --lines`` records them. Returns (profile, its trace's JSON, the .item() line,
    the scalar reads)."""
    import dataclasses

    import nbprof
    from nbprof.model import TorchProfile

    from .synthetic import training_loop

    trace = training_loop(4, kernel_us=500, item_sync_us=300)
    # and a kernel no operator launched (External id 0, as a Triton kernel called from Python is
    # recorded): its 40 µs belong on the outside row, or the lines' device time misses them
    trace.launch("triton_poi_fused_0", 0, 3996, 3, 4100, 40.0)
    path = trace.write(Path(folder) / "synthetic_loop.trace.json")
    p = nbprof.load_trace(path)
    cell, item = "<ipython-input-7-abc>", "print(y.sum().item())"
    source = f"%%torchprof --lines\nx, w = torch.ones(8, 8), torch.ones(8, 8)\ny = x @ w\n{item}\nx = torch.relu(y)\n"
    on_line = {"aten::mm": 3, "aten::item": 4, SCALAR_READ: 4, "aten::relu": 5}
    numbers = sorted(set(on_line.values()))
    frame_of = {n: i for i, n in enumerate(numbers)}
    ev = p.events
    ops = [(int(e), 1 + frame_of[on_line[n]]) for n, e in zip(ev["name"].astype(str), ev["external_id"])
           if n in on_line and e > 0]
    line_data = {
        "version": 1, "method": "tracer",
        "frames": {"file": [cell] * len(numbers), "line": numbers, "function": ["<module>"] * len(numbers),
                   "function_line": [1] * len(numbers)},
        "cells": {cell: "In [7]"}, "stacks": [[]] + [[frame_of[n]] for n in numbers],
        "ops": {"external_id": [e for e, _ in ops], "stack": [s for _, s in ops]},
        "allocs": {"stack": [], "bytes": []}, "notes": [],
    }
    lined = TorchProfile(ev, dataclasses.replace(p.meta, line_data=line_data, sources={cell: source}))
    return lined, read_trace(path), item, 4


def pending_free_snapshot() -> dict:
    """tests/snapshots.py's hand-made snapshot with its 1 MiB block freed on another stream at the
    end, the free not yet completed (``active_pending_free``: active, not allocated), as torch
    dumps it: what no recorded or hand-made snapshot had."""
    from .snapshots import MiB, entry, hand_snapshot, segment, stack

    snap = hand_snapshot()
    seg_a = snap["segments"][0]
    for b in seg_a["blocks"]:
        if b["size"] == MiB:
            b["state"] = "active_pending_free"
            snap["device_traces"][0].append(entry("free_requested", b["address"], MiB, 170, stack(9)))
    snap["segments"][0] = segment(seg_a["address"], seg_a["total_size"], seg_a["blocks"])
    return snap


def synthetic_data_loading_profile(folder: str | Path, batches: int = 8, workers: int = 2,
                                   pageable: bool = False) -> tuple[Any, dict]:
    """A CUDA loop that copies each batch to the device (tests/synthetic.py's loop: a copy from pinned
    memory, or pageable, then a kernel, per step) with a DataLoader's records written by hand for
    it (tests/test_data_loading_findings.py's ``loop_record``: each batch waited for 200 µs, made by
    worker ``i % workers``), for the dry run of the DataLoader check (no recorded CUDA trace has a
    DataLoader). Returns (profile, its trace's JSON)."""
    import dataclasses

    import nbprof
    from nbprof.model import TorchProfile

    from .synthetic import training_loop
    from .test_data_loading_findings import loop_record

    path = training_loop(batches, copy_us=50, pageable=pageable).write(Path(folder) / "synthetic_loader.trace.json")
    p = nbprof.load_trace(path)
    record = loop_record([200.0] * batches, workers=workers, pin_memory=not pageable)
    return TorchProfile(p.events, dataclasses.replace(p.meta, data_loading=record)), read_trace(path)
