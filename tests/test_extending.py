"""docs/architecture.md's worked examples, done for real: a tab, a finding kind, an events column.

Each test copies the package, makes exactly the change the document shows (its code blocks are
read from the document, so the examples cannot go stale), and checks in a fresh interpreter that
the addition works end to end and that nothing else had to change.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
TRACE = Path(__file__).resolve().parent / "data" / "cnn_train_cuda.trace.json.gz"

def doc_block(first_line: str) -> str:
    """The ```python block of the document whose first line starts with ``first_line``."""
    for block in re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S):
        if block.lstrip("\n").startswith(first_line):
            return block
    raise AssertionError(f"docs/architecture.md has no code block starting with {first_line!r}")


@pytest.fixture
def package(tmp_path) -> Path:
    """A copy of nbprof to change, importable from ``tmp_path``."""
    shutil.copytree(ROOT / "nbprof", tmp_path / "nbprof", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path.name}: {old!r} is not where the document says"
    path.write_text(text.replace(old, new))


def run(where: Path, code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=where, capture_output=True,
                         text=True, timeout=300, env={"PYTHONPATH": str(where), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_tab_is_one_module_and_its_entry(package):
    tab = doc_block("# nbprof/views/tabs/threads.py")
    (package / "nbprof/views/tabs/threads.py").write_text(tab)
    init = package / "nbprof/views/tabs/__init__.py"
    edit(init, "from .timeline import TIMELINE\n", "from .threads import THREADS\nfrom .timeline import TIMELINE\n")
    edit(init, "RANKS, TIMELINE]", "RANKS, THREADS, TIMELINE]")
    got = run(package, f"""
        import json, re, nbprof
        p = nbprof.load_trace({str(TRACE)!r})
        html = p.report().html(include_library=False)
        titles = re.findall(r'<label for="nbprof-\\d+-(\\d+)">([^<]*)</label>', html)
        css = re.findall(r'#nbprof-\\d+-(\\d+):checked~\\.nbprof-panel-(\\d+)', html)
        ev = p.events
        threads = sorted(int(t) for t in ev.loc[(ev["thread"] >= 0) & (ev["depth"] == 0), "thread"].unique())
        print(json.dumps({{"titles": titles, "css": css, "threads": threads,
                           "nbprof": nbprof.__file__}}))
    """)
    assert got["nbprof"].startswith(str(package))
    titles = [t for _, t in got["titles"]]
    assert titles[-2:] == ["Threads", "Timeline"]
    i = titles.index("Threads")
    # the panel shows when its tab is checked: the CSS came from the registry, no other change
    assert [str(i), str(i)] in [list(pair) for pair in got["css"]]
    assert len(got["css"]) == len(titles)
    assert got["threads"], "the trace has CPU threads: the tab has rows"


def test_a_finding_kind_is_one_module_and_its_entry(package):
    finding = doc_block("# nbprof/analysis/findings/profiler_overhead.py")
    (package / "nbprof/analysis/findings/profiler_overhead.py").write_text(finding)
    init = package / "nbprof/analysis/findings/__init__.py"
    edit(init, "    memory_peak,\n", "    memory_peak,\n    profiler_overhead,\n")
    edit(init, "memory_peak, straggler)", "memory_peak, straggler, profiler_overhead)")
    got = run(package, f"""
        import gzip, json, nbprof
        from nbprof.analysis import findings
        p = nbprof.load_trace({str(TRACE)!r})
        f = p.findings
        row = f[f["kind"] == "profiler_overhead"]
        raw = json.load(gzip.open({str(TRACE)!r}))["traceEvents"]
        # the profiled span: first to last complete event; torch's own "PyTorch Profiler" span
        # (cat Trace) is the profiler's, not an event of the profile
        spans = [e for e in raw if e.get("ph") == "X" and e.get("cat") != "Trace"]
        begin = min(e["ts"] for e in spans)
        end = max(e["ts"] + e.get("dur", 0) for e in spans)
        overhead = sum(e.get("dur", 0) for e in raw if e.get("cat") == "overhead")
        print(json.dumps({{"kinds": list(findings.KINDS), "evidence": row["evidence"].tolist(),
                           "table": findings.kinds_markdown(), "raw_overhead_us": overhead,
                           "raw_span_us": end - begin}}))
    """)
    assert "profiler_overhead" in got["kinds"]
    assert "| `profiler_overhead` | torch |" in got["table"] and "`OVERHEAD_MIN_SHARE` = 0.001" in got["table"]
    assert got["raw_overhead_us"] > 0, "the recorded trace has overhead events"
    (evidence,) = got["evidence"]
    # the number the new kind reports, against the raw JSON (not nbprof's own tables)
    assert evidence["overhead_us"] == pytest.approx(got["raw_overhead_us"], abs=0.01)
    assert evidence["share"] == pytest.approx(got["raw_overhead_us"] / got["raw_span_us"], rel=1e-6)


def test_an_events_column_is_one_entry_in_the_schema(package, tmp_path):
    line = doc_block('    EventColumn("queued"')
    events = package / "nbprof" / "events.py"
    text = events.read_text()
    start = text.index("\nCOLUMNS = (")
    close = text.index("\n)\n", start)
    events.write_text(text[:close] + "\n" + line.rstrip("\n") + text[close:])
    saved = tmp_path / "saved.json.gz"
    got = run(package, f"""
        import gzip, json, nbprof
        p = nbprof.load_trace({str(TRACE)!r})
        ev = p.events
        kernels = ev[ev["kind"] == "kernel"]
        others = ev[ev["kind"] != "kernel"]
        p.save({str(saved)!r})
        back = nbprof.load_trace({str(saved)!r}).events
        raw = json.load(gzip.open({str(TRACE)!r}))["traceEvents"]
        raw_queued = sorted(e["args"]["queued"] for e in raw if e.get("cat") == "kernel")
        print(json.dumps({{"dtype": str(ev["queued"].dtype), "kernels": sorted(kernels["queued"].tolist()),
                           "others": sorted(set(others["queued"].tolist())), "raw": raw_queued,
                           "round_trip": back["queued"].tolist() == ev["queued"].tolist()}}))
    """)
    assert got["dtype"] == "int64"
    assert got["kernels"] == got["raw"] and len(got["raw"]) > 0  # read for kernels, as the file has it
    assert got["others"] == [-1]  # "does not apply" elsewhere
    assert got["round_trip"]  # written back by the exporter, read again
