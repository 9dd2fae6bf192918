"""The fuzz test of issue 24, input half: malformed structures and extreme numbers in a trace.

A load either gives a profile whose outputs render (the report, its page, the timeline), or
raises nbprof's own error (``NbprofError``: a one-line ``TraceError`` naming the file), never a
raw ``KeyError``, ``TypeError``, ``OverflowError``, ``UnicodeDecodeError``, ``RecursionError`` ...;
no numpy ``RuntimeWarning`` leaks. The traces: the hostile trace of tests/hostile.py with fields
replaced by values of any JSON type and numbers past int64, its top level replaced, its bytes
cut or corrupted (invalid UTF-8), gzipped or not.

``NBPROF_FUZZ_EXAMPLES`` sets the number of examples (default 25).
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import warnings
from pathlib import Path

import pytest

import nbprof
from nbprof.errors import NbprofError

from .hostile import PAYLOADS, hostile_trace

hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("NBPROF_FUZZ_EXAMPLES", "25"))

EXTREME = (2**63, 2**63 - 1, -(2**63), -(2**63) - 1, 2**64, 2**70, 10**30, 1e308, -1e308, 5e-324, 0, -1, 1.5e15,
           9.2e18, -9.2e18, 4.5e12)
number = st.one_of(st.sampled_from(EXTREME), st.integers(-(2**80), 2**80),
                   st.floats(allow_nan=False, allow_infinity=False))
scalar = st.one_of(st.none(), st.booleans(), number, st.sampled_from(PAYLOADS), st.text(max_size=8))
json_value = st.recursive(scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                          st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                          max_leaves=8)
# the keys nbprof reads: of an event, of its args, of the trace
EVENT_KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "s", "id")
ARG_KEYS = ("External id", "correlation", "device", "stream", "Input Dims", "Input type", "grid", "block",
            "registers per thread", "shared memory", "blocks per SM", "warps per SM", "est. achieved occupancy %",
            "Collective name", "Process Group Name", "Process Group Ranks", "In msg nelems", "dtype", "bytes",
            "Bytes", "Total Allocated", "Total Reserved", "Addr", "Device Id", "Device Type", "Python id",
            "Python parent id", "Python module id", "name", "labels", "flops", "queued")
TOP_KEYS = ("traceEvents", "deviceProperties", "distributedInfo", "baseTimeNanoseconds", "schemaVersion",
            "record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules", "traceName",
            "displayTimeUnit", "nbprofRanks")

mutation = st.one_of(
    st.tuples(st.just("event"), st.integers(0, 40), st.sampled_from(EVENT_KEYS), json_value),
    st.tuples(st.just("event"), st.integers(0, 40), st.sampled_from(("ts", "dur", "pid", "tid")), number),
    st.tuples(st.just("arg"), st.integers(0, 40), st.sampled_from(ARG_KEYS), json_value),
    st.tuples(st.just("arg"), st.integers(0, 40), st.sampled_from(ARG_KEYS), number),
    st.tuples(st.just("top"), st.just(0), st.sampled_from(TOP_KEYS), json_value),
    st.tuples(st.just("drop"), st.integers(0, 40), st.sampled_from(EVENT_KEYS), st.none()),
    st.tuples(st.just("rank"), st.just(0), st.just("rank"), st.one_of(number, st.sampled_from(PAYLOADS), json_value)),
)
byte_damage = st.one_of(
    st.none(),
    st.tuples(st.just("cut"), st.floats(0, 1)),
    st.tuples(st.just("bytes"), st.floats(0, 1), st.binary(min_size=1, max_size=4).filter(lambda b: b != b'"')),
    st.tuples(st.just("invalid utf-8 in a name"), st.floats(0, 1), st.sampled_from((b"\xff", b"\xc3", b"\xed\xa0\x80",
                                                                                     b"\xf4\x90\x80\x80"))),
)


def _mutated(mutations, rank) -> object:
    doc = hostile_trace(lambda f: f"plain_{f}", rank=0 if rank else None)
    events = doc["traceEvents"]
    for where, i, key, value in mutations:
        if where == "top":
            doc[key] = value
        elif where == "rank":
            doc["distributedInfo"] = {"rank": value, "world_size": 2}
        elif isinstance(events, list) and events:
            ev = events[i % len(events)]
            if where == "event":
                ev[key] = value
            elif where == "drop":
                ev.pop(key, None)
            elif isinstance(ev.get("args"), dict):
                ev["args"][key] = value
    return doc


def _damage(raw: bytes, damage) -> bytes:
    if damage is None:
        return raw
    at = int(damage[1] * len(raw))
    if damage[0] == "cut":
        return raw[:at]
    if damage[0] == "bytes":
        return raw[:at] + damage[2] + raw[at:]
    name = raw.find(b'"name": "', at)  # inside a name's string
    name = name if name >= 0 else raw.find(b'"name": "')
    at = name + len(b'"name": "')
    return raw[:at] + damage[2] + raw[at:]


def _renders(p) -> None:
    """A profile that loaded: what a user looks at first must render."""
    from nbprof.views.page import standalone_html

    p.report().html(include_library=False)
    p._repr_mimebundle_()
    p.timeline()._repr_mimebundle_()
    standalone_html(p)


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not os.environ.get("NBPROF_FUZZ_RANDOM"),
          phases=tuple(p for p in Phase if p != Phase.shrink or os.environ.get("NBPROF_FUZZ_SHRINK")),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(mutations=st.lists(mutation, max_size=4), damage=byte_damage, gz=st.booleans(), rank=st.booleans(),
       deep=st.sampled_from((0, 0, 0, 100_000)))
def test_malformed_traces_raise_only_nbprofs_errors(tmp_path_factory, mutations, damage, gz, rank, deep):
    doc = _mutated(copy.deepcopy(mutations), rank)
    raw = json.dumps(doc).encode("utf-8")
    if deep:  # an arg nested deeper than any parser's recursion
        raw = raw.replace(b'"args": {', b'"args": {"deep": ' + b"[" * deep + b"]" * deep + b", ", 1)
    raw = _damage(raw, damage)
    path = Path(tmp_path_factory.mktemp("malformed")) / ("t.json.gz" if gz else "t.json")
    path.write_bytes(gzip.compress(raw) if gz else raw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # numpy's overflow and invalid-value warnings
        try:
            p = nbprof.load_trace(path)
        except NbprofError as e:
            assert "\n" not in str(e).strip(), f"a one-line message: {e}"
            return
        _renders(p)
