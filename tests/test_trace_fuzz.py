"""A trace is data (issue 24), fuzzed: hypothesis writes chrome traces with malformed structures
and extreme values in every field the reader reads (the event's own fields, every arg it reads,
the header), in every layout it reads (torch's writer, compact JSON, a bare list, gzip'd). Loading
one either gives sane numbers or raises nbprof's own error: never another exception, never a
warning (they are errors here), never a negative or non-finite time, never a span beyond what the
notes say. In-process, no browser (the browser fuzz of every output is tests/test_browser_*)."""

from __future__ import annotations

import gzip
import json
import math
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import nbprof
from nbprof.collect import trace_schema
from nbprof.errors import NbprofError

from .test_perf_reader import torch_layout

DAY_US = 86_400e6
BASE_US = 4484342762862.144  # a recorded H100 trace's clock

# -- values ------------------------------------------------------------------------------------

EXTREME_INTS = st.sampled_from([0, 1, -1, 7, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64,
                                10**30, -(10**30)])
INTS = st.one_of(st.integers(-3, 200), EXTREME_INTS, st.integers(-(2**70), 2**70))
EXTREME_FLOATS = st.sampled_from([0.0, -0.0, 1e-300, 0.5, -1.0, 1e15, 4.6e15, 9.3e15, 1e16, 1.7e18, 1e300, -1e300,
                                  -1e16, DAY_US, DAY_US + 1.0, 2.0**63, 2.0**64])
FLOATS = st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=64), EXTREME_FLOATS)
TEXT = st.one_of(
    st.text(max_size=10),
    st.sampled_from(["", " ", "aten::add", "[memory]", "[OutOfMemory]", "ProfilerStep#1", "stream 7", "0x0", "12",
                     "nan", "inf", "-inf", "1e999", "</script><script>alert(1)</script>", "\u2028", "\x00BAD"]),
)
LEAF = st.one_of(st.none(), st.booleans(), INTS, FLOATS, TEXT)
JSON = st.recursive(LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                    max_leaves=10)
ANY = st.one_of(INTS, FLOATS, TEXT, JSON)

CATEGORIES = sorted(c for c in trace_schema.CAT_KIND if c) + ["Operator", "Kernel", "Runtime", "Memcpy", "Memory",
                                                      "gizmo_runtime", "", "Trace"]
ARGS = sorted({f.arg for f in trace_schema.FIELDS} | {"name", "labels"})


def sometimes(draw, likely, anything=ANY, odds: int = 8):
    """A value of the right kind; one time in ``odds``, anything at all."""
    return draw(anything) if draw(st.integers(0, odds - 1)) == 0 else draw(likely)


@st.composite
def events(draw, odds: int) -> dict:
    """An event; each field missing, or anything at all, one time in ``odds``."""
    e: dict = {}
    fields = {
        "ph": st.sampled_from(["X", "X", "X", "X", "i", "M", "B", "s"]),
        "cat": st.sampled_from(CATEGORIES),
        "name": TEXT,
        "pid": st.one_of(st.integers(-2, 3), INTS, TEXT),
        "tid": st.one_of(st.integers(-2, 3), INTS, TEXT),
        # mostly times a profile has, so that the analyses behind the reader run too
        "ts": st.one_of(st.floats(0, 5e4).map(lambda t: round(BASE_US + t, 3)), st.integers(0, 10**6), FLOATS, INTS),
        "dur": st.one_of(st.floats(0, 5e3).map(lambda t: round(t, 3)), st.integers(0, 10**4), FLOATS, INTS),
    }
    for key, likely in fields.items():
        if draw(st.integers(0, odds - 1)):
            e[key] = sometimes(draw, likely, odds=odds)
    if draw(st.integers(0, 3)):
        args = draw(st.dictionaries(st.sampled_from(ARGS), st.one_of(INTS, FLOATS, TEXT, JSON), max_size=8))
        if "Input Dims" in args and draw(st.booleans()):  # shapes as torch writes them
            args["Input Dims"] = draw(st.lists(st.lists(st.integers(0, 2**40), max_size=3), max_size=3))
        e["args"] = sometimes(draw, st.just(args), odds=odds)
    return e


@st.composite
def documents(draw) -> tuple[bytes, str]:
    odds = draw(st.sampled_from([3, 10, 30, 100]))  # how hostile this trace is
    evs = draw(st.lists(events(odds), min_size=1, max_size=25))
    if draw(st.integers(0, 4)) == 0:  # exact duplicates
        evs = evs + draw(st.lists(st.sampled_from(evs), max_size=5))
    header = draw(st.dictionaries(
        st.sampled_from(["schemaVersion", "deviceProperties", "record_shapes", "profile_memory", "with_stack",
                         "with_flops", "with_modules", "baseTimeNanoseconds", "traceName", "distributedInfo",
                         "displayTimeUnit"]),
        st.one_of(INTS, TEXT, JSON,
                  st.lists(st.dictionaries(st.sampled_from(["id", "name", "numSms", "totalGlobalMem", "computeMajor",
                                                            "computeMinor", "warpSize"]), ANY, max_size=5),
                           max_size=2),
                  st.fixed_dictionaries({"rank": ANY, "world_size": ANY})),
        max_size=5))
    layout = draw(st.sampled_from(["torch", "compact", "list"]))
    if layout == "torch":
        raw = torch_layout(evs, **header)
    elif layout == "compact":
        raw = json.dumps({**header, "traceEvents": evs}).encode()
    else:
        raw = json.dumps(evs).encode()
    raw = raw.replace(b"\\u0000BAD", b"\xff\xfe")  # invalid UTF-8 inside a string
    suffix = ".json"
    if draw(st.booleans()):
        raw, suffix = gzip.compress(raw, compresslevel=1), ".json.gz"
    return raw, suffix


# -- the property ------------------------------------------------------------------------------


def load_checked(path: Path, views: bool) -> None:
    """Load ``path``: nbprof's error, or sane numbers (and, with ``views``, every view builds)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning reaching the user is a failure
        try:
            p = nbprof.load_trace(path)
            ev = p.events
            start, dur = ev["start_us"].to_numpy(), ev["dur_us"].to_numpy()
            assert np.isfinite(start).all() and np.isfinite(dur).all()
            assert (start >= 0).all() and (dur >= 0).all(), "a negative time"
            assert (dur <= DAY_US).all()
            if len(ev):
                end = float((start + dur).max())
                assert end < 2.0**63 / 1000
                # what the events span (the origin may be an earlier event left out, e.g. the
                # profiler's own "Trace" span): a day exactly is no note
                if end - float(start.min()) > DAY_US:
                    assert any("span" in n and "nanoseconds" in n for n in p.meta.notes), p.meta.notes
            ka = p.key_averages()
            for col in ("cpu_total_us", "device_total_us", "self_device_us"):
                assert (ka[col] >= 0).all(), col
            assert all(math.isfinite(x) for x in ka.select_dtypes("number").to_numpy().ravel() if x == x)
            assert p.summary is not None
            if views:
                html = p.report().html(include_library=False)
                assert "Traceback" not in html
                p.report().text()
                p.timeline()
                p.memory_curve()
                p.kernels()
                p.steps()
                p.findings
                p.device_stats
        except NbprofError as e:
            assert "\n" not in str(e), "errors are one line"


# The same examples every run (as the other fuzz tests: a failure in CI is one anyone can rerun);
# NBPROF_FUZZ_RANDOM=1 for new ones, NBPROF_FUZZ_EXAMPLES=N for more. No "explain" phase: its
# coverage tracer made shrinking a failure through the views take 15+ minutes and 15 GB.
RANDOM = bool(os.environ.get("NBPROF_FUZZ_RANDOM"))
FUZZ = dict(deadline=None, database=None, derandomize=not RANDOM,
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@settings(max_examples=int(os.environ.get("NBPROF_FUZZ_EXAMPLES", "60")), **FUZZ)
@given(doc=documents())
def test_any_trace_loads_sanely_or_raises_nbprofs_error(doc, tmp_path):
    raw, suffix = doc
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(raw)
    load_checked(path, views=False)


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("NBPROF_FUZZ_EXAMPLES", "400")), **FUZZ)
@given(doc=documents())
# CI's run found it: one event lasting exactly a day, starting 1 µs after the nameless "Trace"
# span that sets the origin (the events span a day exactly: no note owed)
@example(doc=(b'{"traceEvents": [{"ph": "X", "name": "0", "ts": 1, "dur": 86400000000.0, "args": {}},'
              b' {"ph": "X", "cat": "Trace", "ts": 0}], "traceName": "t[1].json"}', ".json"))
# and: an event 52 days after a kernel at ts 0 (the timeline's window far from zero: its GPU-busy
# bins narrower than a float's step divided 0 by 0)
@example(doc=(b'{"traceEvents": [{"ph": "X", "name": "0", "ts": 4484342762862.144},'
              b' {"ph": "X", "cat": "kernel", "name": "0", "tid": -1, "ts": 0}], "traceName": "t[1].json"}', ".json"))
def test_any_trace_gives_every_view_or_nbprofs_error(doc, tmp_path):
    raw, suffix = doc
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(raw)
    load_checked(path, views=True)


def test_the_largest_thread_id_reads_without_an_overflow(tmp_path):
    """CI's fuzz run (derandomized) found it: a tid of 2**63 - 1 overflowed where negative ids
    (kineto's signed 32-bit ones) are made unsigned; the warning is an error here, as for users."""
    doc = {"traceEvents": [{}, {"ph": "X", "cat": "cpu_op", "name": "0", "tid": 2**63 - 1, "ts": 0}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    load_checked(path, views=True)
    assert nbprof.load_trace(path).events["thread"].tolist() == [2**63 - 1]
