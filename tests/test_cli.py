"""``python -m nbprof torch|cprofile script.py [args]``, run in a subprocess on small scripts."""

from __future__ import annotations

import os
import pstats
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import nbprof
from nbprof.cli import _split

from .conftest import needs_torch

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "nbprof", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def script(tmp_path: Path, body: str, name: str = "job.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


PY = """
import sys
def square(x):
    return x * x
if __name__ == "__main__":
    print("argv", sys.argv[1:], "torch" in sys.modules)
    total = sum(square(i) for i in range(500))
    if "--fail" in sys.argv:
        raise ValueError("boom in the script")
    if "--exit" in sys.argv:
        sys.exit(int(sys.argv[-1]))
"""


def test_cprofile_runs_the_script_as_main_prints_the_table_and_writes_html(tmp_path):
    script(tmp_path, PY)
    r = cli("cprofile", "-s", "ncalls", "job.py", "a", "--b", "-c", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "argv ['a', '--b', '-c'] False" in out  # arguments reach the script; no torch imported
    assert "cProfile:" in out and "job.py:3(square)" in out
    line = next(x for x in out.splitlines() if "(square)" in x)
    assert line.split()[0] == "500"  # ncalls, as pstats counts them
    html = (tmp_path / "job.nbprof.html").read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "square" in html
    assert "report written to job.nbprof.html" in r.stderr


def test_script_module_frame_keeps_its_numbers(tmp_path):
    script(tmp_path, PY)
    r = cli("cprofile", "--dump", "out.prof", "--no-html", "job.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    stats = pstats.Stats(str(tmp_path / "out.prof")).stats
    [(key, value)] = [(k, v) for k, v in stats.items() if k[2] == "<module>" and k[0].endswith("job.py")]
    cc, nc, tt, ct, callers = value
    assert (cc, nc) == (1, 1) and ct >= tt > 0 and callers == {}
    [square] = [v for k, v in stats.items() if k[2] == "square"]
    assert square[1] == 500
    assert not (tmp_path / "job.nbprof.html").exists()
    assert not any("nbprof" in k[0] and "site-packages" not in k[0] and k[0].endswith(".py") and "/nbprof/" in k[0]
                   for k in stats)


@pytest.mark.parametrize("flag,code", [("--exit", 3), ("--exit", 0)])
def test_exit_code_is_the_scripts(tmp_path, flag, code):
    script(tmp_path, PY)
    r = cli("cprofile", "-q", "job.py", flag, str(code), cwd=tmp_path)
    assert r.returncode == code
    assert (tmp_path / "job.nbprof.html").exists()


def test_exception_prints_traceback_and_still_writes_the_report(tmp_path):
    script(tmp_path, PY)
    r = cli("cprofile", "-o", "custom.html", "job.py", "--fail", cwd=tmp_path)
    assert r.returncode == 1
    assert "Traceback" in r.stderr and "ValueError: boom in the script" in r.stderr
    assert 'File "' in r.stderr and "job.py" in r.stderr
    assert "cli.py" not in r.stderr  # nbprof's own frames are not in the script's traceback
    assert "the script raised (ValueError: boom in the script)" in r.stdout
    assert (tmp_path / "custom.html").exists()


def test_run_a_module(tmp_path):
    pkg = tmp_path / "toolpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text("import sys\nprint('module main', __name__, sys.argv[1:])\n")
    r = cli("cprofile", "-m", "toolpkg", "x", "-y", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "module main __main__ ['x', '-y']" in r.stdout
    assert (tmp_path / "toolpkg.nbprof.html").exists()


def test_usage_errors(tmp_path):
    r = cli("cprofile", "missing.py", cwd=tmp_path)
    assert r.returncode == 2 and "missing.py: no such file" in r.stderr
    r = cli("cprofile", cwd=tmp_path)
    assert r.returncode == 2 and "give a script" in r.stderr
    r = cli("nope", "x.py", cwd=tmp_path)
    assert r.returncode == 2
    script(tmp_path, PY)
    r = cli("cprofile", "-s", "bogus", "job.py", cwd=tmp_path)
    assert r.returncode == 2 and "unknown sort key" in r.stderr


# the magics' flags and checks (nbprof/run/flags.py): each bad value fails before the script runs,
# in one line, with the magics' message (tests/test_magics.py BAD_FLAGS)
BAD_FLAGS = [
    ("torch", ["--sort", "wallclock"], "unknown sort key 'wallclock'; choose one of: self_cpu_us"),
    ("torch", ["--limit", "-3"], "--limit -3: must be 0 (all rows) or a positive number"),
    ("torch", ["--export", "trace.txt"], "must end with .json or .json.gz"),
    ("torch", ["--export", "job.py/sub/t.json"], "job.py is a file, not a folder"),
    ("torch", ["--schedule", "1,x,2"], "--schedule 1,x,2: expected wait,warmup,active"),
    ("cprofile", ["-l", "-1"], "--limit -1: must be 0 (all rows)"),
    ("cprofile", ["--dump", "job.py/out.prof"], "job.py is a file, not a folder"),
]


@pytest.mark.parametrize("profiler,flags,message", BAD_FLAGS)
def test_bad_flags_are_the_magics_one_line_errors(tmp_path, profiler, flags, message):
    script(tmp_path, "open('ran', 'w').close()\n")
    r = cli(profiler, *flags, "job.py", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("python -m nbprof: ") and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "ran").exists() and not (tmp_path / "job.nbprof.html").exists()


def test_split_keeps_script_arguments_apart():
    assert _split(["torch", "--memory", "-l", "5", "train.py", "--lr", "0.1", "-v"]) == (
        ["torch", "--memory", "-l", "5"], "train.py", None, ["--lr", "0.1", "-v"])
    assert _split(["cprofile", "-m", "pkg.mod", "-x"]) == (["cprofile"], None, "pkg.mod", ["-x"])
    assert _split(["cprofile", "--", "-weird.py", "a"]) == (["cprofile"], "-weird.py", None, ["a"])


TORCH_PY = """
import sys
import torch, nbprof
from torch.profiler import record_function
x = torch.randn(32, 32)
for i in range(6):
    with record_function("body"):
        y = torch.mm(x, x).relu()
    nbprof.step()
print("done", sys.argv[1:])
"""


@needs_torch
@pytest.mark.slow
def test_torch_profiles_the_script_with_a_schedule_and_exports(tmp_path):
    """One subprocess (importing torch takes seconds): the table, the export, the HTML, and only
    the active steps of the schedule (wait 1, warmup 1, active 2 of 6 iterations)."""
    script(tmp_path, TORCH_PY, "train.py")
    r = cli("torch", "--no-cuda", "--shapes", "--schedule", "1,1,2", "--export", "trace.json.gz", "train.py",
            "--epochs", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "done ['--epochs', '1']" in r.stdout
    assert "torch profile:" in r.stdout and "aten::mm" in r.stdout
    p = nbprof.load_trace(tmp_path / "trace.json.gz")
    assert p.steps()["step"].tolist() == [2, 3]
    a = p.key_averages().set_index("name")
    assert a.loc["aten::mm", "count"] == 2 and a.loc["body", "count"] == 2
    assert p.collected["shapes"]
    assert (tmp_path / "train.nbprof.html").exists()


# ------------------------------------------------------------------------------------ view


def test_view_a_prof_file_from_python_m_cprofile(tmp_path):
    """The file the user has: ``python -m cProfile -o run.prof job.py``; ``nbprof view`` prints
    pstats' numbers and writes the report's HTML next to it."""
    script(tmp_path, PY)
    subprocess.run([sys.executable, "-m", "cProfile", "-o", "run.prof", "job.py"], cwd=tmp_path, check=True,
                   capture_output=True, timeout=120)
    r = cli("view", "run.prof", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    [square] = [v for k, v in pstats.Stats(str(tmp_path / "run.prof")).stats.items() if k[2] == "square"]
    line = next(x for x in r.stdout.splitlines() if "(square)" in x)
    assert line.split()[0] == str(square[1]) == "500" and "job.py:3(square)" in line
    assert "from run.prof" in r.stdout
    html = (tmp_path / "run.nbprof.html").read_text()
    assert html.lstrip().lower().startswith("<!doctype html")
    for name in ("job.py:3(square)", "builtins.sum", "Callers &amp; callees", '"type":"icicle"'):
        assert name in html, name
    assert "report written to run.nbprof.html" in r.stderr
    r = cli("view", "-q", "--html", "out/sub/r.html", "run.prof", cwd=tmp_path)  # nbprof view's flags
    assert r.returncode == 0 and not r.stdout and (tmp_path / "out/sub/r.html").exists()
    r = cli("view", "-s", "ncalls", "-l", "2", "--no-html", "run.prof", cwd=tmp_path)  # pstats' keys
    rows = [x.split() for x in r.stdout.splitlines() if x.strip()[:1].isdigit() and " of " not in x]
    # the generator's 501 resumes, then square's 500 calls (pstats' ncalls)
    assert r.returncode == 0 and [(x[0], x[-1]) for x in rows] == [("501", "job.py:7(<genexpr>)"),
                                                                   ("500", "job.py:3(square)")]
    r = cli("view", "-s", "self_cpu_us", "run.prof", cwd=tmp_path)  # torch's key, for a .prof
    assert r.returncode == 2 and "unknown sort key 'self_cpu_us'; choose one of: tottime" in r.stderr


def test_view_a_trace_and_a_folder_of_ranks(tmp_path):
    from .conftest import DATA, trace_path

    r = cli("view", "-s", "count", "-l", "3", "--html", str(tmp_path / "t.html"), str(trace_path("two_streams")),
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "torch profile" in (tmp_path / "t.html").read_text() and "Self CPU" in r.stdout
    assert "3 of " in r.stdout and "--limit 0 shows all" in r.stdout
    r = cli("view", "--html", str(tmp_path / "ranks.html"), str(DATA / "ddp_gloo"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "ranks.html").read_text()
    assert ">Ranks<" in html and "ProfilerStep#" in html


def test_view_says_what_it_cannot_read(tmp_path):
    script(tmp_path, PY)
    (tmp_path / "notes.txt").write_text("not a profile\n")
    (tmp_path / "cut.prof").write_bytes(b"\xfb)\x03")
    (tmp_path / "dump.pickle").write_bytes(b"not a pickle")
    for path, message in (("job.py", "neither a .prof file (cProfile's stats), a chrome trace (.json, .json.gz), "
                                     "a folder of traces nor a memory snapshot (.pickle)"),
                          ("dump.pickle", "dump.pickle: not a memory snapshot (a pickle"),
                          ("notes.txt", "neither a .prof file"), ("missing.prof", "missing.prof: no such file or folder"),
                          ("cut.prof", "cut.prof: not a complete .prof file"),
                          (".", "no trace files (.json or .json.gz) in this folder")):
        r = cli("view", path, cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.startswith("python -m nbprof view: ") and message in r.stderr, path
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not list(tmp_path.glob("*.html"))
    r = cli("view", "--html", "r.txt", "cut.prof", cwd=tmp_path)
    assert r.returncode == 2 and "--html r.txt: the file must end with .html or .htm" in r.stderr
