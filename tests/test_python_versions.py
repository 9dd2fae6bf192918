"""nbprof on the other Pythons of this machine (3.10, 3.12, 3.13), without torch.

Each interpreter gets a venv (its dependencies cached while pyproject.toml's [project] is
unchanged) with nbprof installed from this checkout; a script then runs the magics in a real
IPython shell: %%cprofile and load_trace work, %%torchprof says how to install torch, and the busy
check meets the real sys.monitoring refusal of Python 3.12+. Each report is rendered (text, HTML,
figures) with the pandas and numpy that pip picks for that Python (3.10: pandas 2.x, the oldest
line we support; 3.11 runs the whole suite with pandas 3).
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import textwrap
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from .conftest import cache_root, package_copy, pip_install, project_table, without_pythonpath

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ["3.10", "3.12", "3.13"]

SCRIPT = textwrap.dedent(
    """
    import cProfile, sys
    from IPython.testing.globalipapp import start_ipython
    ip = start_ipython()
    ip.run_line_magic("load_ext", "nbprof")
    r = ip.run_cell("%%cprofile -q -o cp\\ndef f(n):\\n    return sum(i * i for i in range(n))\\nf(1000)")
    assert r.error_in_exec is None, r.error_in_exec
    print("cprofile", int(ip.user_ns["cp"].stats["ncalls"].sum()) > 1000)
    other = cProfile.Profile()
    other.enable()
    r = ip.run_cell("%%cprofile\\nran = True")
    other.disable()
    err = r.error_in_exec
    print("busy", type(err).__name__, "already active" in str(err), "ran" in ip.user_ns)
    r = ip.run_cell("%%torchprof\\nx = 1")
    err = r.error_in_exec or r.error_before_exec
    print("torchprof", type(err).__name__, "pip install torch" in str(err))
    import nbprof
    p = nbprof.load_trace(sys.argv[1])
    print("load_trace", len(p.key_averages()) > 10, "torch" in sys.modules)
    # every view renders with this Python's pandas/numpy
    from IPython.display import display
    from IPython.utils.capture import capture_output
    r = ip.run_cell("%%cprofile -o cp2\\ndef f(n):\\n    return sum(i * i for i in range(n))\\nf(3000)")
    assert r.error_in_exec is None, r.error_in_exec
    cp2 = ip.user_ns["cp2"]
    html = cp2.report().html()
    print("cprofile_report", "Callers &amp; callees" in html and "Callers & callees" not in html,
          "<svg" in html, len(cp2.callees("f")) >= 1)
    with capture_output() as shown:
        display(p)
    kinds = [k for o in shown.outputs for k in o.data]
    print("trace_report", "text/html" in kinds, "application/vnd.plotly.v1+json" in kinds,
          len(p.timeline().data) > 0, len(p.findings) > 0)
    c = nbprof.compare(ip.user_ns["cp"], cp2)
    print("compare", len(c.table) > 0, "text/html" in c._repr_mimebundle_())
    # a profiler the cell starts itself: nbprof's cProfile yields to it and says so (3.12+: the other's
    # enable() raised "Another profiling tool is already active"); a sys.setprofile hook replaces
    # cProfile's before 3.12 only
    ip.run_cell("import cProfile, pstats\\ndef before():\\n    return sum(range(100))\\ndef after():\\n    return sum(range(100))")
    r = ip.run_cell("%%cprofile -q -o tk\\nbefore()\\ninner = cProfile.Profile()\\ninner.enable()\\nafter()\\ninner.disable()")
    fns = set(ip.user_ns["tk"].stats["function"])
    import pstats
    inner = {k[2] for k in pstats.Stats(ip.user_ns["inner"]).stats}
    print("takeover", r.error_in_exec is None, "before" in fns and "after" not in fns, "after" in inner,
          any(n.startswith("another Python profiler (cProfile.Profile.enable") for n in ip.user_ns["tk"].meta.notes),
          sys.getprofile() is None)
    r = ip.run_cell("%%cprofile -q -o sp\\nimport sys\\nbefore()\\nsys.setprofile(lambda *a: None)\\nafter()\\nsys.setprofile(None)")
    print("setprofile", r.error_in_exec is None, "after" in set(ip.user_ns["sp"].stats["function"]),
          any("sys.setprofile" in n for n in ip.user_ns["sp"].meta.notes))
    # actions (Lightning's hooks report them so): each call in the profile of the innermost one,
    # nbprof's own switches between its profiles no takeover (3.12+: sys.monitoring's one tool)
    ip.run_cell("def a():\\n    return sum(range(10))\\ndef b():\\n    return [a() for _ in range(3)]")
    r = ip.run_cell("%%cprofile -q -o ac\\nfrom nbprof.run import runner\\nc = runner.active().collector\\na()\\n"
                    "c.begin_action('X')\\nb()\\nc.begin_action('Y')\\na()\\nc.end_action('Y')\\na()\\n"
                    "c.end_action('X')\\na()")
    ac = ip.user_ns["ac"]
    calls = {(x.action, x.function): x.ncalls for x in ac.action_stats().itertuples() if x.function in ("a", "b")}
    print("actions", r.error_in_exec is None, calls == {("(outside every action)", "a"): 2, ("X", "a"): 4,
          ("X", "b"): 1, ("Y", "a"): 1}, int(ac.stats.set_index("function").loc["a", "ncalls"]) == 7,
          not any("another" in n for n in ac.meta.notes), sys.getprofile() is None)
    # --lines: hand-counted hits (a for header: once per iteration and once at the end), cProfile's
    # table as without it, nothing left running (3.12+: nbprof's sys.monitoring tool id given back)
    ip.run_cell("def loop(n):\\n    s = 0\\n    for i in range(n):\\n        s += i\\n    return s")
    r = ip.run_cell("%%cprofile -q -o ln --lines\\nloop(5)\\nloop(5)")
    ln = ip.user_ns["ln"].lines()
    hits = {(f, l): h for f, l, h in zip(ln["function"], ln["line"], ln["hits"])}
    monitoring = getattr(sys, "monitoring", None)
    print("lines", r.error_in_exec is None, hits == {("loop", 2): 2, ("loop", 3): 12, ("loop", 4): 10, ("loop", 5): 2,
          ("<module>", 2): 1, ("<module>", 3): 1}, int(ip.user_ns["ln"].stats.set_index("function").loc["loop", "ncalls"]) == 2,
          sys.gettrace() is None and sys.getprofile() is None,
          monitoring is None or all(monitoring.get_tool(i) is None for i in (3, 4)))
    r = ip.run_cell("%%cprofile -q -o nxt\\nafter()")
    print("next", r.error_in_exec is None, "after" in set(ip.user_ns["nxt"].stats["function"]), ip.user_ns["nxt"].meta.notes == [])
    import pandas
    print("pandas", pandas.__version__)
    """
)


def _python(version: str) -> str | None:
    """A real interpreter (pyenv's shims refuse versions that are not activated)."""
    candidates = sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}"))
    if candidates:
        return str(candidates[-1])
    found = shutil.which(f"python{version}")
    return found if found and "/shims/" not in found else None


@contextmanager
def _venv(version: str, python: str, work: Path) -> Iterator[Path]:
    """A venv for this Python with nbprof installed from this checkout. Its dependencies are cached
    (conftest.cache_root(), shared by checkouts: building one took ~50 s of a CI run, three of them
    on every clean clone); nbprof itself is reinstalled every time, and the venv stays locked while
    it is used, so that two checkouts testing at once each test their own nbprof."""
    stamp = hashlib.sha1(project_table(ROOT / "pyproject.toml").encode() + b"pytest").hexdigest()[:12]
    cache = cache_root()
    cache.mkdir(parents=True, exist_ok=True)
    venv = cache / f"venv-py{version}-{stamp}"
    package = package_copy(work)
    with open(cache / f".lock-py{version}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".complete").exists():
            for old in cache.glob(f"venv-py{version}-*"):  # one cached venv per Python
                shutil.rmtree(old, ignore_errors=True)
            subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
            # pytest: IPython's test shell (globalipapp) imports it
            pip_install(venv / "bin/python", str(package), "pytest")
            (venv / ".complete").write_text(stamp)
        else:
            pip_install(venv / "bin/python", "--no-deps", "--force-reinstall", str(package))
        yield venv


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_nbprof_on_python(version, tmp_path):
    python = _python(version)
    if python is None:
        pytest.skip(f"no python{version} on this machine")
    trace = ROOT / "tests" / "data" / "two_streams.trace.json.gz"
    with _venv(version, python, tmp_path) as venv:
        out = subprocess.run([str(venv / "bin/python"), "-c", SCRIPT, str(trace)], capture_output=True, text=True,
                             timeout=300, cwd=tmp_path, env=without_pythonpath())
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines() if " " in line)
    assert lines["cprofile"] == "True"
    assert lines["busy"] == "UsageError True False"  # one-line error, the cell did not run
    assert lines["torchprof"] == "UsageError True"
    assert lines["load_trace"] == "True False"  # loads without importing torch
    assert lines["cprofile_report"] == "True True True"
    assert lines["trace_report"] == "True True True True"
    assert lines["compare"] == "True True"
    assert lines["takeover"] == "True True True True True"
    # before 3.12 a profile function replaces cProfile's (said, the calls after it are not in the
    # report); from 3.12 it runs beside cProfile's sys.monitoring hooks (nothing lost, nothing said)
    assert lines["setprofile"] == ("True False True" if version < "3.12" else "True True False")
    assert lines["next"] == "True True True"
    assert lines["lines"] == "True True True True True"
    assert lines["actions"] == "True True True True True"
    if version == "3.10":  # pandas 3 needs 3.11+: here the 2.x line is what users get
        assert lines["pandas"].startswith("2."), lines["pandas"]
