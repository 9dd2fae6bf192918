"""Invariants (issue 26), on every recorded and hand-made trace and on random event trees
(hypothesis): what must hold whatever the trace, each side computed apart.

- key averages equal the plain-Python model of the raw JSON (tests/reference.py: torch's tree,
  same-name collapse, kernels and memory, one object per event);
- memory is conserved: the top-level events' bytes plus the "[memory]" rows are the bytes of all
  memory events (each counted once per top-level event whose [start, end] holds it);
- self CPU times of a thread add up to the time its top-level events take (the union of its
  events' intervals where they nest);
- every kernel, copy and memset belongs to at most one op, and the ops' self device time is the
  time of those that belong to one;
- HTML of any string reads back as that string (an independent parser, html.parser);
- the device records start after their launches, and the clock_skew check stays quiet.

The model and the sums read the file, never nbprof's tables; nbprof's own output is only ever the
side under test.
"""

from __future__ import annotations

import html.parser
import json
import os
from collections import defaultdict
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import nbprof
from nbprof.format import esc

from . import htmltext
from .conftest import DATA, TRACES, trace_path, union_length
from .reference import Model, read
from .synthetic import TID, Trace, collectives_folder, training_loop

# Bounded and the same examples every run in the fast tier; a long hunt for new ones:
# NBPROF_HYPOTHESIS_EXAMPLES=1000 NBPROF_HYPOTHESIS_RANDOM=1 pytest tests/test_invariants.py
EXAMPLES = int(os.environ.get("NBPROF_HYPOTHESIS_EXAMPLES", "40"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    derandomize=not os.environ.get("NBPROF_HYPOTHESIS_RANDOM"),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large])

# traces torch's writer (or Meta's, AMD's, MTIA's tooling) wrote; legacy torch 1.8-1.9 traces
# ("Operator" categories) are not the model's
WILD = ["amd_mi250_rocm6.json.gz", "meta_format_control.json.gz", "mtia_inference_rank_0.json.gz",
        "nccl_data.json.gz"]
RECORDED = ([trace_path(n) for n in TRACES] + [DATA / "wild" / n for n in WILD]
            + sorted((DATA / "ddp_gloo").glob("*.json.gz")))


SYNTHETIC = ["loop.json", "memory.json", "rank_a.json", "rank_b.json"]


def _synthetic(tmp: Path) -> dict[str, Path]:
    """Hand-made traces: a training loop with copies and syncs, a memory-heavy one, the ranks of
    the collectives fixture."""
    loop = training_loop(3, copy_us=50, item_sync_us=20).write(tmp / "loop.json")
    t = Trace()
    t.annotation("step", 0, 1000)
    ext = t.op("aten::linear", 10, 300)
    inner = t.op("aten::linear", 20, 200)
    t.launch("gemm", inner, 30, 5, 40, 100)
    t.memory(20, 4096, 4096, 1 << 21)  # at the inner op's start
    t.memory(310, -4096, 0, 1 << 21, addr=1)  # at the outer op's end
    t.op("aten::add", 310, 0)  # zero-length, at the outer op's end
    t.memory(500, 512, 512, 1 << 21, device=-1, addr=2)  # inside step only
    t.memory(1500, 64, 576, 1 << 21, device=-1, addr=3)  # outside every op
    t.launch("orphan_kernel", 999_999, 600, 5, 700, 10)  # an External id no op has
    assert ext
    mem = t.write(tmp / "memory.json")
    folder = collectives_folder(tmp / "ranks")
    return dict(zip(SYNTHETIC, [loop, mem, folder / "a.json", folder / "b.json"]))


@pytest.fixture(scope="module")
def synthetic_traces(tmp_path_factory) -> dict[str, Path]:
    return _synthetic(tmp_path_factory.mktemp("synthetic"))


# ------------------------------------------------------------------------------- the checks


def check_key_averages(profile, model: Model) -> None:
    """Every row of key_averages() is the model's row, and no row is missing."""
    ref = model.key_averages()
    ours = {(r["name"], r["kind"]): r for r in profile.key_averages().to_dict("records")}
    assert set(ours) == set(ref), (sorted(set(ours) ^ set(ref))[:10])
    for key, want in ref.items():
        got = ours[key]
        for column, value in want.items():
            assert got[column] == pytest.approx(value, abs=1e-6), (key, column)


def _roots(profile):
    ev = profile.events
    tree = ev["kind"].isin(["op", "annotation", "runtime", "overhead", "other"]) & (ev["thread"] >= 0)
    return ev[tree & (ev["depth"] == 0)]


def check_memory_is_conserved(profile, model: Model) -> None:
    """Bytes of the top-level events + bytes of the "[memory]" rows = bytes of the memory events
    (from the file), each counted once per top-level event that holds it (at least once)."""
    roots = _roots(profile)
    origin = profile.meta.origin_ns  # nbprof's times start there; the model's are the file's
    starts = [origin + round(x * 1000) for x in roots["start_us"]]
    ends = [s + round(x * 1000) for s, x in zip(starts, roots["dur_us"])]
    expected = {"cpu": 0, "device": 0}
    for m in model.memory:
        t = m.start
        holders = sum(1 for s, e in zip(starts, ends) if s <= t <= e)
        expected["cpu" if m.on_cpu else "device"] += m.nbytes * max(holders, 1)
    k = profile.key_averages()
    loose = k[k["kind"] == "memory"]
    got_cpu = int(roots["cpu_mem_bytes"].sum()) + int(loose["cpu_mem_bytes"].sum())
    got_device = int(roots["device_mem_bytes"].sum()) + int(loose["device_mem_bytes"].sum())
    assert (got_cpu, got_device) == (expected["cpu"], expected["device"])


def check_self_times_add_up(profile, model: Model) -> None:
    """Per thread: every self CPU time is at least 0 and at most its event's time, and together
    they take at least the thread's busy time (the union of its events' intervals in the file)
    and at most that plus the time its sibling events' intervals share (the top-level events
    are siblings too): torch's stack leaves partially overlapping events, and calls sharing start
    and end on a coarse clock, as siblings, each with its own time. Where no siblings share any
    time, the self times add up to the busy time exactly, and so do the top-level events'."""
    ev = profile.events
    tree = ev["kind"].isin(["op", "annotation", "runtime", "overhead", "other"]) & (ev["thread"] >= 0)
    live = ev[tree & ~ev["merged"]]
    assert (live["self_cpu_us"] >= 0).all(), live.loc[live["self_cpu_us"] < 0, ["name", "start_us", "self_cpu_us"]]
    assert (live["self_cpu_us"] <= live["dur_us"] + 1e-9).all()
    roots = _roots(profile)
    by_thread: dict[int, list] = defaultdict(list)
    for e in model.live():
        by_thread[e.tid].append(e)
    assert set(live["thread"].unique()) == set(by_thread)
    for thread, events in by_thread.items():
        self_us = float(live.loc[live["thread"] == thread, "self_cpu_us"].sum())
        root_us = float(roots.loc[roots["thread"] == thread, "dur_us"].sum())
        busy = union_length([(e.start, e.end) for e in events]) / 1000
        # the model's sibling groups: each event's children, and the top-level events
        groups = [e.children for e in events] + [[e for e in events if e.parent is None]]
        shared = sum(sum(c.dur for c in g) - union_length([(c.start, c.end) for c in g]) for g in groups) / 1000
        assert busy - 1e-3 <= self_us <= busy + shared + 1e-3, thread
        assert busy - 1e-3 <= root_us, thread
        if shared == 0:
            assert self_us == pytest.approx(busy, abs=1e-3) and root_us == pytest.approx(busy, abs=1e-3), thread


def check_kernels_belong_to_one_op(profile, model: Model) -> None:
    """Each device work event hangs from at most one op: the one the model links it to (by
    External id, else through its runtime call); the ops' self device time is exactly the time of
    the work that belongs to one, and the top-level events' device totals add up to it."""
    ev = profile.events
    work = ev[ev["kind"].isin(["kernel", "memcpy", "memset"])]
    assert len(work) == len(model.work)
    attributed_us = sum(w.dur for w, op in model.launcher.items() if op is not None) / 1000
    total_us = sum(w.dur for w in model.work) / 1000
    assert float(work["dur_us"].sum()) == pytest.approx(total_us, abs=1e-3)
    assert int((work["parent"] >= 0).sum()) == sum(op is not None for op in model.launcher.values())
    parents = ev.loc[work.loc[work["parent"] >= 0, "parent"]]
    assert parents["kind"].isin(["op", "annotation", "other"]).all() and not parents["merged"].any()
    tree = ev["kind"].isin(["op", "annotation", "runtime", "overhead", "other"]) & (ev["thread"] >= 0) & ~ev["merged"]
    assert float(ev.loc[tree, "self_device_us"].sum()) == pytest.approx(attributed_us, abs=1e-3)
    assert float(_roots(profile)["device_total_us"].sum()) == pytest.approx(attributed_us, abs=1e-3)
    # key averages: the kernel rows hold all of it, the op rows what belongs to an op
    k = profile.key_averages()
    rows = k["kind"].isin(["kernel", "memcpy", "memset"])
    assert float(k.loc[rows, "self_device_us"].sum()) == pytest.approx(total_us, abs=1e-3)
    assert int(k.loc[rows, "count"].sum()) == len(model.work)
    assert float(k.loc[~rows, "self_device_us"].sum()) == pytest.approx(attributed_us, abs=1e-3)


def check_clocks_agree(profile, model: Model) -> None:
    """Every device record of these traces starts after its launch: the clock_skew check is quiet
    (tests/test_clock_skew.py has it fire where the clocks disagree)."""
    from nbprof.analysis.findings import clock_skew
    from nbprof.analysis.findings._common import TorchContext

    if len(profile.events):
        assert list(clock_skew.find(TorchContext(profile))) == []


CHECKS = [check_key_averages, check_memory_is_conserved, check_self_times_add_up, check_kernels_belong_to_one_op]


def check_all(path: Path, *, clocks_agree: bool = False) -> None:
    """Every check of CHECKS; ``clocks_agree``: and check_clocks_agree, for traces whose device
    records are known to follow their launches (not a live CUDA profile's: torch's own clock bug
    is what clock_skew is for)."""
    profile = nbprof.load_trace(path)
    model = Model(read(path))
    for check in CHECKS + ([check_clocks_agree] if clocks_agree else []):
        check(profile, model)


@pytest.mark.parametrize("name", [p.name for p in RECORDED] + SYNTHETIC)
def test_invariants_of_every_trace(name, synthetic_traces):
    path = synthetic_traces[name] if name in SYNTHETIC else next(p for p in RECORDED if p.name == name)
    check_all(path, clocks_agree=True)


# ---------------------------------------------------------------------------- random trees

NAMES = ["aten::a", "aten::b", "aten::mm", "ProfilerStep#1"]


@st.composite
def nested(draw, lo: int, hi: int, depth: int) -> list[tuple[int, int, str]]:
    """Intervals in [lo, hi] (on a grid of clock ticks) that nest, and the ways real traces do not:

    - siblings side by side (touching or not), each with its own children;
    - a tie: a second event with the same start and end (same name: two calls on a coarse clock,
      tree.py ``_split_ties``; another name: a parent with one child that fills it);
    - zero-length events at the parent's start or end;
    - a partial overlap: an event that starts inside a sibling and ends after it, within the
      parent (torch's stack makes the two overlapping siblings) or past the parent's end (it pops
      the parent and hangs higher up); with children of its own, which overlap in turn. At the top
      level (``lo``, ``hi``: the trace's range) these are overlapping top-level events."""
    out: list[tuple[int, int, str]] = []
    if depth == 0 or hi < lo:
        return out
    cuts = sorted(draw(st.lists(st.integers(lo, hi), min_size=0, max_size=4)))
    bounds = [lo] + cuts + [hi]
    for a, b in zip(bounds, bounds[1:]):
        shape = draw(st.sampled_from(["gap", "plain", "plain", "tie", "edges", "overlap", "overlap", "overlap"]))
        if shape == "gap":
            continue
        s = draw(st.integers(a, b))
        e = draw(st.integers(s, b))
        name = draw(st.sampled_from(NAMES))
        out.append((s, e, name))
        out.extend(draw(nested(s, e, depth - 1)))
        if shape == "tie":
            out.append((s, e, draw(st.sampled_from([name, *NAMES]))))
        elif shape == "edges":  # zero-length events at the parent's start and/or end
            out.extend((at, at, draw(st.sampled_from(NAMES))) for at in draw(st.sets(st.sampled_from([lo, hi]), min_size=1)))
        elif shape == "overlap" and e > s:
            s2 = draw(st.integers(s, e - 1))
            e2 = draw(st.integers(e + 1, max(e + 1, hi + draw(st.sampled_from([0, 0, 5])))))  # at times past the parent
            out.append((s2, e2, draw(st.sampled_from(NAMES))))
            out.extend(draw(nested(s2, e2, depth - 1)))
    return out


@st.composite
def flat(draw, lo: int, hi: int) -> list[tuple[int, int, str]]:
    """Events that never nest: starts and ends both strictly increasing, so none holds another,
    and each may run past the next one's start (the trace of issue 33: ``ts 100 dur 52``, then
    ``ts 150 dur 40``; no event has a child)."""
    starts = sorted(draw(st.sets(st.integers(lo, hi), min_size=1, max_size=6)))
    out, last_end = [], -1
    for i, s in enumerate(starts):
        e = max(s, last_end + 1, draw(st.integers(s, (starts[i + 1] if i + 1 < len(starts) else hi) + 4)))
        out.append((s, e, draw(st.sampled_from(NAMES))))
        last_end = e
    return out


# a clock tick as written in the file: whole µs (old torch, Meta's format, other machines), or
# ns on a three-decimal clock (torch's writer), from 0 or from an epoch-like origin in µs
CLOCKS = {"whole µs": (Fraction(1), 0), "ns": (Fraction(137, 1000), 0),
          "ns, epoch": (Fraction(137, 1000), 1_700_000_000_000)}


def _us(ticks: int, tick: Fraction, origin: int = 0) -> float | int:
    """µs as the file writes them: an int on a whole-µs clock, else a float of three decimals."""
    value = origin + ticks * tick
    return int(value) if value.denominator == 1 else float(value)


@st.composite
def traces(draw) -> dict:
    """A chrome trace: one to three threads, each of nested ops with partial overlaps at every
    depth (``nested``) or of ops that only overlap (``flat``; at times on every thread), kernels
    launched by some ops (and one by no op), memory events at op boundaries and between them, on
    the CPU and on the GPU. A trace that is flat everywhere is CPU-only half the time: a launch's
    runtime call would be a child of its op."""
    t = Trace()
    tick, origin = CLOCKS[draw(st.sampled_from(sorted(CLOCKS)))]
    ops: list[tuple[int, int, int]] = []  # (start, end, External id), in ticks
    threads = [TID + i for i in range(draw(st.integers(1, 3)))]
    # no nesting anywhere (no event has a child: issue 33's crash), nesting on every thread, or both
    layout = draw(st.sampled_from(["flat", "nested", "nested", "mixed"]))
    for tid in threads:
        if layout == "mixed":
            intervals = draw(st.one_of(nested(0, 60, 3), flat(0, 60)))
        else:
            intervals = draw(flat(0, 60) if layout == "flat" else nested(0, 60, 3))
        draw(st.randoms()).shuffle(intervals)  # file order is not time order
        for s, e, name in intervals:
            ops.append((s, e, t.op(name, _us(s, tick, origin), _us(e - s, tick), tid=tid)))
    gpu = 100
    cpu_only = layout == "flat" and draw(st.booleans())
    for s, e, ext in ops:
        if not cpu_only and draw(st.integers(0, 2)) == 0:
            dur = draw(st.integers(0, 7))
            t.launch(draw(st.sampled_from(["gemm", "relu_kernel"])), ext, _us(s, tick, origin), 0,
                     _us(gpu, tick, origin), _us(dur, tick),
                     cat=draw(st.sampled_from(["kernel", "kernel", "gpu_memcpy", "gpu_memset"])))
            gpu += dur + 1
    if not cpu_only and draw(st.booleans()):
        t.launch("orphan", 10**6, _us(0, tick, origin), 0, _us(gpu, tick, origin), _us(3, tick))
    boundaries = sorted({x for s, e, _ in ops for x in (s, e)}) or [0]
    allocated = 0
    for i in range(draw(st.integers(0, 6))):
        at = draw(st.sampled_from(boundaries)) if draw(st.booleans()) else draw(st.integers(-5, 70))
        nbytes = draw(st.sampled_from([4096, 512, -512, 1 << 20]))
        allocated += nbytes
        t.memory(_us(at, tick, origin), nbytes, allocated, 1 << 22, device=draw(st.sampled_from([0, -1])),
                 tid=draw(st.sampled_from(threads)), addr=i + 1)
    if not t.events:
        t.op("aten::empty", _us(0, tick, origin), _us(1, tick))
    return t.doc()


@PROPERTY
@given(doc=traces())
def test_invariants_of_random_traces(tmp_path_factory, doc):
    path = tmp_path_factory.mktemp("random") / "trace.json"
    path.write_text(json.dumps(doc))
    check_all(path, clocks_agree=True)


def _shapes(doc: dict) -> set[str]:
    """What a random trace holds, read from the model's tree (torch's stack), not nbprof's."""
    model = Model(doc)
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    out = {"whole-µs clock" if all(isinstance(e["ts"], int) for e in ops) else "three-decimal clock",
           f"{len({e['tid'] for e in ops})} threads"}
    by_thread: dict[int, list] = defaultdict(list)
    for e in model.tree:
        by_thread[e.tid].append(e)
    nothing_nests = len(model.tree) > 1 and all(e.parent is None for e in model.tree)  # runtime calls too
    for events in by_thread.values():
        if len(events) > 1 and all(e.parent is None for e in events):
            out.add("a thread without nesting")
        depth = {}
        for e in sorted(events, key=lambda e: (e.start, -e.end)):  # parents first
            depth[e] = 0 if e.parent is None else depth[e.parent] + 1
        groups = [[e for e in events if e.parent is None]] + [e.children for e in events]
        for group in groups:
            ordered = sorted(group, key=lambda e: (e.start, -e.end))
            for a, b in zip(ordered, ordered[1:]):
                if (a.start, a.end) == (b.start, b.end):
                    out.add("same-start-same-end siblings")
                elif b.start < a.end < b.end:
                    out.add("partial overlap at the top level" if a.parent is None else "partial overlap below it")
                    if nothing_nests:
                        out.add("partial overlap, no nesting anywhere")  # issue 33's crash
        for e in events:
            for c in e.children:
                if c.start == c.end == e.start:
                    out.add("zero-length at a parent's start")
            if e.start == e.end and any(o.start < e.start == o.end for o in events):
                out.add("zero-length at an event's end")  # (torch's stack: that event's sibling)
    return out


def test_the_random_traces_make_every_shape_the_invariants_are_checked_on():
    """40 examples drawn as the fast tier draws them (derandomized: the same every run; not the
    invariants test's own 40, hypothesis seeds each test from the test itself) hold each shape at
    least once: a change to the strategies that makes one rare fails here, not silently."""
    seen: set[str] = set()

    @PROPERTY
    @given(doc=traces())
    def collect(doc):
        seen.update(_shapes(doc))

    collect()
    assert seen >= {"whole-µs clock", "three-decimal clock", "1 threads", "2 threads", "3 threads",
                    "a thread without nesting", "partial overlap, no nesting anywhere", "same-start-same-end siblings", "partial overlap at the top level",
                    "partial overlap below it", "zero-length at a parent's start",
                    "zero-length at an event's end"}, sorted(seen)


# ------------------------------------------------------------------------------------------ HTML


HOSTILE = ["<script>alert(1)</script>", "a & b", '"quoted" \'single\'', "x<y>z", "&amp;", "</div><b>",
           "<!-- c -->", "&#x27;&lt;"]


@PROPERTY
@given(text=st.one_of(st.sampled_from(HOSTILE), st.text(), st.text(alphabet="<>&\"'ab ")))
@example("<b>&</b>")
def test_escaped_text_reads_back_as_itself(text):
    """esc() of any string, inside an element or an attribute, is that string to an HTML parser."""
    assert htmltext.text(f"<div>{esc(text)}</div>") == text
    attrs = []
    parser = html.parser.HTMLParser(convert_charrefs=True)
    parser.handle_starttag = lambda tag, a: attrs.extend(a)  # type: ignore[method-assign]
    parser.feed(f'<a title="{esc(text)}"></a>')
    assert attrs == [("title", text)]


@settings(PROPERTY, max_examples=max(EXAMPLES // 4, 10))  # a whole report each: fewer
@given(name=st.one_of(st.sampled_from(HOSTILE), st.text(st.characters(blacklist_categories=("Cs", "Cc")),
                                                        min_size=1, max_size=30)))
@example("<b>bold</b> & co")
def test_an_ops_name_reads_back_from_the_report(tmp_path_factory, name):
    """The top operator's name, whatever it holds, is text in the report's findings and summary:
    an HTML parser reads back exactly the name, and finds no element the name would have made."""
    if name != name.strip() or name.startswith(("ProfilerStep#", "enumerate(")) or not name:
        return  # (the message is stripped; torch's own ranges are not operators)
    t = Trace()
    t.op(name, 0, 100)
    t.op("aten::relu", 200, 10)
    path = t.write(tmp_path_factory.mktemp("names") / "trace.json")
    report = nbprof.load_trace(path).report().html(include_library=False)
    [top] = [p for p in htmltext.texts_of(report, "nbprof-finding") if " takes " in p]
    assert top.startswith(f"• {name} takes ")
    # the name made no element of its own: the findings are one <div> each, with only text inside
    findings = report[report.index('class="nbprof-finding"'):]
    assert htmltext.tags("<div " + findings.split("</div>", 1)[0] + "</div>") == ["div"]


# ----------------------------------------------------------------- a column's dtype, whatever the trace

def _tables(profile) -> dict[str, object]:
    """Every table the public API gives a torch profile, by name."""
    out: dict[str, object] = {f"key_averages({g!r})": profile.key_averages(group_by=g) for g in ("op", "shape", "stack")}
    for name in ("events", "kernels", "steps", "overview", "modules", "ranges", "range_ops", "allocations",
                 "launches", "queue_length", "collectives", "findings", "step_breakdown", "alive_at_end",
                 "memory_growth"):
        value = getattr(profile, name)
        out[name] = value() if callable(value) else value
    out["alive_at_end(by='op')"] = profile.alive_at_end(by="op")
    ranks = profile.ranks()
    for name in ("table", "differences", "hta_idle"):
        out[f"ranks().{name}"] = getattr(ranks, name)
    stats = profile.device_stats
    for name in ("devices", "streams"):
        out[f"device_stats.{name}"] = getattr(stats, name)
    return out


def test_a_tables_column_dtypes_do_not_depend_on_the_trace(synthetic_traces, tmp_path):
    """The same column has the same dtype in a trace that has rows for its table and in one that
    has none (a CPU-only trace's kernels, a trace without memory events' allocations, ...): code
    that reads `.str` or compares integers must not break on the empty case. The rows' dtypes are
    the answer: what torch's recorded traces give, read apart from the empty branches."""
    one_op = Trace()
    one_op.op("aten::empty", 0, 1)
    paths = ([*RECORDED, *synthetic_traces.values(), one_op.write(tmp_path / "one_op.json")]
             + sorted((DATA / "wild").glob("TestProfiler.*.json")))
    # merged ranks: a rank column; the views every rank has, summed (one rank without memory)
    folders = [DATA / "ddp_gloo", collectives_folder(tmp_path / "ranks"), DATA / "cluster_views" / "partial"]
    seen: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in paths + folders:
        for table, frame in _tables(nbprof.load_trace(path, progress=False)).items():
            for column in frame.columns:
                seen[(table, column)][str(frame[column].dtype)].add(
                    f"{path.name} ({'rows' if len(frame) else 'empty'})")
    differ = {key: {d: sorted(where)[:2] for d, where in kinds.items()}
              for key, kinds in seen.items() if len(kinds) > 1}
    assert not differ, "\n".join(f"{k}: {v}" for k, v in sorted(differ.items()))


def test_a_python_profiles_column_dtypes_do_not_depend_on_the_profile():
    """The same for %%cprofile's tables: a profile with calls between functions, one function
    that calls nothing, and no function at all (cProfile's raw stats, written by hand)."""
    from nbprof.model import PythonProfile

    main, work = ("main.py", 1, "<module>"), ("work.py", 3, "work")
    calls = {main: (1, 1, 0.5, 2.0, {}), work: (4, 4, 1.5, 1.5, {main: (4, 4, 1.5, 1.5)})}
    profiles = {"calls": (PythonProfile(calls), "work"), "alone": (PythonProfile({main: (1, 1, 0.0, 0.0, {})}), "<module>"),
                "none": (PythonProfile({}), None)}
    seen: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for label, (profile, fn) in profiles.items():
        tables = {"stats": profile.stats, "edges": profile.edges, "call_tree": profile.call_tree(),
                  "findings": profile.findings}
        if fn is not None:
            tables |= {"callers": profile.callers(fn), "callees": profile.callees(fn)}
        for table, frame in tables.items():
            for column in frame.columns:
                seen[(table, column)][str(frame[column].dtype)].add(f"{label} ({len(frame)})")
    differ = {key: dict(kinds) for key, kinds in seen.items() if len(kinds) > 1}
    assert not differ, "\n".join(f"{k}: {v}" for k, v in sorted(differ.items()))
