"""The line tracer of ``--lines`` (``collect.line_tracer``) on every Python of this machine: the
lines of a user file's function in the order they ran, alongside cProfile (sys.monitoring tool 2
on 3.12+), refusing a taken tool id or another tracer, and gone after ``stop``. Without torch: the
tracer is the standard library only. The interpreters are pyenv's, as tests/test_python_versions.py
finds them."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYENV = Path.home() / ".pyenv" / "versions"

USER_FILE = """\
def work(n):
    total = 0
    for i in range(n):
        total += i
    return total
"""

SCRIPT = textwrap.dedent("""
    import sys, time, cProfile, io, pstats
    sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
    from nbprof.collect.line_tracer import LineTracer
    from nbprof.collect.user_code import UserCode
    import userfile
    t = LineTracer(UserCode(None))
    prof = cProfile.Profile()
    prof.enable()
    t0 = time.time_ns()
    t.start(sys._getframe())
    userfile.work(2)
    t.stop()
    prof.disable()
    names = {cid: c.co_name for cid, c in t.code_objects.items()}
    seen = [(names.get(c, "?"), l) for c, l in zip(t.codes, t.lines)]
    # counted by hand: line 2, then the loop header and body twice, the header's exit, the return
    assert seen == [("work", 2), ("work", 3), ("work", 4), ("work", 3), ("work", 4), ("work", 3), ("work", 5)], seen
    assert all(x >= t0 for x in t.times) and list(t.times) == sorted(t.times)
    assert t.refused is None
    s = io.StringIO(); pstats.Stats(prof, stream=s).print_stats("work"); assert "work" in s.getvalue()
    n = len(t.times); userfile.work(3); assert len(t.times) == n  # stopped: nothing more
    if sys.version_info >= (3, 12):
        assert sys.monitoring.get_tool(4) is None
        sys.monitoring.use_tool_id(4, "other")
        t2 = LineTracer(UserCode(None)); t2.start(None); userfile.work(1); t2.stop()
        assert t2.refused and len(t2.times) == 0 and sys.monitoring.get_tool(4) == "other"
    else:
        assert sys.gettrace() is None
        other = lambda *a: None
        sys.settrace(other)
        t2 = LineTracer(UserCode(None)); t2.start(None); t2.stop()
        assert t2.refused and sys.gettrace() is other
        sys.settrace(None)
    print("ok")
""")


def _interpreters() -> list[Path]:
    found = []
    for version in ("3.10", "3.11", "3.12", "3.13"):
        matches = sorted(PYENV.glob(f"{version}.*/bin/python")) if PYENV.is_dir() else []
        if matches:
            found.append(matches[-1])
    return found


@pytest.mark.parametrize("python", _interpreters() or [None], ids=lambda p: p.parent.parent.name if p else "none")
def test_the_tracer_records_the_users_lines(python, tmp_path):
    if python is None:
        pytest.skip("no pyenv interpreters on this machine")
    (tmp_path / "userfile.py").write_text(USER_FILE)
    out = subprocess.run([str(python), "-c", SCRIPT, str(ROOT), str(tmp_path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]
