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
- HTML of any string reads back as that string (an independent parser, html.parser).

The model and the sums read the file, never nbprof's tables; nbprof's own output is only ever the
side under test.
"""

from __future__ import annotations

import html.parser
import json
import os
from collections import defaultdict
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
    """Per thread: the self CPU times of its events (merged ones aside) add up to its top-level
    events' time; where its events nest (the model's top-level events do not overlap), that is
    the union of its events' intervals in the file."""
    ev = profile.events
    tree = ev["kind"].isin(["op", "annotation", "runtime", "overhead", "other"]) & (ev["thread"] >= 0)
    live = ev[tree & ~ev["merged"]]
    roots = _roots(profile)
    by_thread: dict[int, list] = defaultdict(list)
    for e in model.tree:
        by_thread[e.tid].append(e)
    assert set(live["thread"].unique()) == set(by_thread)
    for thread, events in by_thread.items():
        self_us = float(live.loc[live["thread"] == thread, "self_cpu_us"].sum())
        root_us = float(roots.loc[roots["thread"] == thread, "dur_us"].sum())
        assert self_us == pytest.approx(root_us, abs=1e-3), thread
        model_roots = sorted((e.start, e.end) for e in events if e.parent is None)
        busy = union_length([(e.start, e.end) for e in events]) / 1000
        nested = all(a[1] <= b[0] for a, b in zip(model_roots, model_roots[1:]))
        if nested:
            assert root_us == pytest.approx(busy, abs=1e-3), thread
        else:
            assert root_us >= busy - 1e-3, thread


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


CHECKS = [check_key_averages, check_memory_is_conserved, check_self_times_add_up, check_kernels_belong_to_one_op]


def check_all(path: Path) -> None:
    profile = nbprof.load_trace(path)
    model = Model(read(path))
    for check in CHECKS:
        check(profile, model)


@pytest.mark.parametrize("name", [p.name for p in RECORDED] + SYNTHETIC)
def test_invariants_of_every_trace(name, synthetic_traces):
    path = synthetic_traces[name] if name in SYNTHETIC else next(p for p in RECORDED if p.name == name)
    check_all(path)


# ---------------------------------------------------------------------------- random trees

NAMES = ["aten::a", "aten::b", "aten::mm", "ProfilerStep#1"]


@st.composite
def nested(draw, lo: int, hi: int, depth: int) -> list[tuple[int, int, str]]:
    """Intervals in [lo, hi] that nest: some siblings side by side (touching or not), each with
    its own children; zero-length ones and children sharing their parent's bounds included."""
    out: list[tuple[int, int, str]] = []
    if depth == 0 or hi < lo:
        return out
    cuts = sorted(draw(st.lists(st.integers(lo, hi), min_size=0, max_size=4)))
    bounds = [lo] + cuts + [hi]
    for a, b in zip(bounds, bounds[1:]):
        if draw(st.booleans()):
            continue
        s = draw(st.integers(a, b))
        e = draw(st.integers(s, b))
        out.append((s, e, draw(st.sampled_from(NAMES))))
        out.extend(draw(nested(s, e, depth - 1)))
    return out


@st.composite
def traces(draw) -> dict:
    """A chrome trace: one or two threads of nested ops (sometimes with ops that overlap
    partially, as profiler overhead does), kernels launched by some ops (and one by no op),
    memory events at op boundaries and between them, on the CPU and on the GPU."""
    t = Trace()
    ops: list[tuple[int, int, int]] = []  # (start, end, External id)
    for tid in draw(st.sampled_from([(TID,), (TID, TID + 1)])):
        intervals = draw(nested(0, 60, 3))
        if draw(st.integers(0, 4)) == 0:  # a partial overlap
            s = draw(st.integers(0, 60))
            intervals.append((s, s + draw(st.integers(1, 30)), "overlapping"))
        draw(st.randoms()).shuffle(intervals)  # file order is not time order
        for s, e, name in intervals:
            ops.append((s, e, t.op(name, s, e - s, tid=tid)))
    gpu = 100.0
    for s, e, ext in ops:
        if draw(st.integers(0, 2)) == 0:
            dur = draw(st.integers(0, 7))
            t.launch(draw(st.sampled_from(["gemm", "relu_kernel"])), ext, s, 0, gpu, dur,
                     cat=draw(st.sampled_from(["kernel", "kernel", "gpu_memcpy", "gpu_memset"])))
            gpu += dur + 1
    if draw(st.booleans()):
        t.launch("orphan", 10**6, 0, 0, gpu, 3)
    boundaries = sorted({x for s, e, _ in ops for x in (s, e)}) or [0]
    allocated = 0
    for i in range(draw(st.integers(0, 6))):
        at = draw(st.sampled_from(boundaries)) if draw(st.booleans()) else draw(st.integers(-5, 70))
        nbytes = draw(st.sampled_from([4096, 512, -512, 1 << 20]))
        allocated += nbytes
        t.memory(at, nbytes, allocated, 1 << 22, device=draw(st.sampled_from([0, -1])),
                 tid=draw(st.sampled_from([TID, TID + 1])), addr=i + 1)
    if not t.events:
        t.op("aten::empty", 0, 1)
    return t.doc()


@PROPERTY
@given(doc=traces())
def test_invariants_of_random_traces(tmp_path_factory, doc):
    path = tmp_path_factory.mktemp("random") / "trace.json"
    path.write_text(json.dumps(doc))
    check_all(path)


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
                 "launches", "queue_length", "collectives", "findings", "step_breakdown"):
        value = getattr(profile, name)
        out[name] = value() if callable(value) else value
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
