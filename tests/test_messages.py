"""Every message true in the situation that prints it: empty states, notes, headlines; and the
flags: the same names and meanings in the magics and on the command line, one table of them in
docs/reference/flags.md, output folders made.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import nbprof

from .conftest import needs_torch, run
from .synthetic import Trace

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------- empty states


@needs_torch
def test_a_cell_without_torch_operators(shell):
    """``x = 1``: no operator ran; there is no file of the user's to speak of."""
    result, captured = run(shell, "%%torchprof -o p\nx = 1")
    assert result.error_in_exec is None
    text = shell.user_ns["p"].report().text()
    assert "The profile recorded no events: the cell ran no torch operators." in text
    assert "the file" not in text and "entries" not in text
    assert shell.user_ns["p"].meta.notes == []


@needs_torch
def test_a_schedule_longer_than_the_cell(shell):
    """``--schedule 5,5,5`` over 3 steps: the cell ran its operators, the schedule recorded none."""
    shell.run_cell("import torch, nbprof")
    result, captured = run(shell, "%%torchprof --schedule 5,5,5 -o p\nfor i in range(3):\n"
                                  "    y = torch.ones(3) * i\n    nbprof.step()")
    assert result.error_in_exec is None
    text = shell.user_ns["p"].report().text()
    assert "ran no torch operators" not in text
    assert ("The profile recorded no events: --schedule 5,5,5,1 records from step 10 on, and the cell ran "
            "3 steps, so no active step came (see the note).") in text
    assert "the cell ran 3 steps (nbprof.step() calls): no active step ran" in text


@needs_torch
def test_a_schedule_without_steps(shell):
    shell.run_cell("import torch")
    result, captured = run(shell, "%%torchprof --schedule 1,1,1 -q -o p\ny = torch.ones(3) * 2")
    p = shell.user_ns["p"]
    assert p.summary.events == 0  # step 0 is a wait step, and no nbprof.step() ended it
    text = p.report().text()
    assert "The profile recorded no events: nbprof.step() was never called, so --schedule recorded no step." in text
    assert "ran no torch operators" not in text


def test_a_trace_file_without_events(tmp_path):
    path = tmp_path / "meta_only.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}}]}))
    p = nbprof.load_trace(path)
    text = p.report().text()
    assert "The trace holds no events nbprof reads." in text
    assert "none of the file's 2 entries is an event nbprof reads" in text
    assert "cell" not in text  # no cell ran
    path.write_text(json.dumps({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {}}]}))
    assert "the file's one entry is not an event nbprof reads" in nbprof.load_trace(path).report().text()


def test_compare_by_kernel_of_two_cpu_profiles(tmp_path):
    profiles = []
    for i, dur in enumerate((100.0, 60.0)):
        t = Trace()
        t.op("aten::mm", 0, dur)
        profiles.append(t.load(tmp_path, f"cpu{i}.json"))
    c = nbprof.compare(*profiles, by="kernel")
    text = c.text()
    assert "Both profiles are empty" not in text and "Both profiles are empty" not in c.html()
    assert "Neither profile has device work (kernels, copies, memsets) to compare" in text
    assert "by='op' compares their operators" in text
    # and by op they are not empty: the operator is compared
    assert "aten::mm" in nbprof.compare(*profiles).text()


GENEXPRS_BEFORE = "a = sum(i for i in range(300000))\nb = sum(i * i for i in range(20000))"
GENEXPRS_AFTER = "a = sum(i for i in range(1000))\nb = sum(i * i for i in range(20000))"


def test_compare_headline_tells_two_functions_of_one_name_apart(shell):
    """Two different generator expressions (both ``<genexpr>``; list comprehensions too, before
    Python 3.12 inlined them): the headline names the one that changed by its line."""
    run(shell, f"%%cprofile -q -o before\n{GENEXPRS_BEFORE}")
    run(shell, f"%%cprofile -q -o after\n{GENEXPRS_AFTER}")
    # by calls: the first generator runs 300,001 times, then 1,001; the second 20,001 times in both
    c = nbprof.compare(shell.user_ns["before"], shell.user_ns["after"], metric="ncalls")
    table = c.table
    assert (table["function"] == "<genexpr>").sum() == 2  # two functions of one name
    head = c.text().splitlines()[0]
    m = re.search(r"biggest win (.+?) \(−", head)
    assert m and re.fullmatch(r"In \[\d+\]:2\(<genexpr>\)", m.group(1)), head  # line 2 (a = ...), not line 3
    assert c.summary.biggest_win == m.group(1)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12+ inlines list comprehensions (PEP 709)")
def test_compare_headline_tells_two_listcomps_apart(shell):
    run(shell, "%%cprofile -q -o before\na = [i for i in range(300000)]\nb = [i * i for i in range(20000)]")
    run(shell, "%%cprofile -q -o after\na = [i for i in range(1000)]\nb = [i * i for i in range(20000)]")
    head = nbprof.compare(shell.user_ns["before"], shell.user_ns["after"]).text().splitlines()[0]
    assert re.search(r"biggest win In \[\d+\]:2\(<listcomp>\) \(", head), head


# ------------------------------------------------------------------------------------- flags

def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nbprof", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


@needs_torch
def test_torchprof_takes_the_short_forms(shell):
    shell.run_cell("import torch")
    result, captured = run(shell, "%%torchprof -s count -l 2 -o p\nfor _ in range(3):\n    y = torch.ones(3) * 2")
    assert result.error_in_exec is None and result.error_before_exec is None
    p = shell.user_ns["p"]
    assert (p.meta.sort, p.meta.limit) == ("count", 2)
    text = p.report().text()
    assert re.search(r"^2 of \d+ rows", text, re.M)
    result, captured = run(shell, "%torchprof -s count -l 1 -q -o q y = torch.ones(3) * 2")
    assert result.error_in_exec is None and shell.user_ns["q"].meta.limit == 1


@needs_torch
def test_the_command_line_takes_the_magics_flags(tmp_path):
    (tmp_path / "job.py").write_text("import torch\nfor _ in range(3):\n    y = torch.ones(3) * 2\n")
    r = _cli("torch", "-s", "count", "-l", "2", "--no-html", "job.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^2 of \d+ rows", r.stdout, re.M)


def test_the_command_lines_html_flag_and_the_old_o(tmp_path):
    (tmp_path / "job.py").write_text("x = sum(range(10))\n")
    r = _cli("cprofile", "--html", "out/new/report.html", "job.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out/new/report.html").read_text().startswith("<!DOCTYPE html>")
    r = _cli("cprofile", "-o", "old.html", "job.py", cwd=tmp_path)  # scripts written for -o PATH still work
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "old.html").exists()
    assert "-o old.html: write --html old.html" in r.stderr
    r = _cli("cprofile", "--help", cwd=tmp_path)
    assert "--html PATH" in r.stdout and "-o PATH" not in r.stdout


@needs_torch
def test_export_makes_its_folder(shell, tmp_path):
    shell.run_cell("import torch")
    path = tmp_path / "some" / "new" / "dir" / "x.json.gz"
    result, captured = run(shell, f"%%torchprof -q --export {path}\ny = torch.ones(3) * 2")
    assert result.error_in_exec is None and result.error_before_exec is None
    with gzip.open(path) as f:
        assert any(e.get("name") == "aten::mul" for e in json.load(f)["traceEvents"])


def test_dump_makes_its_folder(shell, tmp_path):
    import pstats

    path = tmp_path / "a" / "b" / "cell.prof"
    result, captured = run(shell, f"%%cprofile -q --dump {path}\nsorted(range(100))")
    assert result.error_in_exec is None and result.error_before_exec is None
    assert pstats.Stats(str(path)).total_calls >= 1


def test_a_path_under_a_file_is_refused_before_the_cell_runs(shell, tmp_path):
    from IPython.core.error import UsageError

    (tmp_path / "afile").write_text("")
    shell.user_ns.pop("ran", None)
    result, captured = run(shell, f"%%cprofile --dump {tmp_path}/afile/x.prof\nran = 1")
    err = result.error_in_exec or result.error_before_exec
    assert isinstance(err, UsageError) and f"{tmp_path}/afile is a file, not a folder" in str(err)
    assert "ran" not in shell.user_ns


# the flags each front end really accepts, read from its own parser
def _magic_options(magic: str) -> set[str]:
    from nbprof.magics import ProfileMagics

    parser = getattr(ProfileMagics, magic).parser
    return {s for a in parser._actions for s in a.option_strings if s not in ("-h", "--help")}


def _command_line_options(sub: str) -> set[str]:
    from nbprof.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return {s for a in subparsers.choices[sub]._actions for s in a.option_strings
            if s not in ("-h", "--help") and a.help != "==SUPPRESS=="}


FLAGS_PAGE = ROOT / "docs" / "reference" / "flags.md"  # the docs' reference; the site regenerates it at build


def _docs_table() -> list[tuple[set[str], str]]:
    text = FLAGS_PAGE.read_text(encoding="utf-8")
    block = text.split("<!-- flags: begin -->", 1)[1].split("<!-- flags: end -->", 1)[0]
    rows = []
    for line in block.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows.append(({m.split()[0] for m in re.findall(r"`([^`]+)`", cells[0])}, cells[1]))
    return rows


def test_the_docs_have_the_generated_table():
    """docs/reference/flags.md holds what `python -m nbprof.run.flags` prints (the command itself, run)."""
    import subprocess
    import sys

    text = FLAGS_PAGE.read_text(encoding="utf-8")
    block = text.split("<!-- flags: begin -->", 1)[1].split("<!-- flags: end -->", 1)[0]
    printed = subprocess.run([sys.executable, "-m", "nbprof.run.flags"], capture_output=True, text=True, check=True,
                             cwd=ROOT).stdout
    assert block.strip() == printed.strip(), (
        "docs/reference/flags.md's flag table is not nbprof.run.flags': replace what is between its flags markers "
        "with the output of `python -m nbprof.run.flags`")


def test_the_table_lists_what_each_front_end_accepts():
    """Read from the docs' table and from the real parsers: the same flags in the magics and on the
    command line for a profiler, and each documented where it works."""
    rows = _docs_table()
    where: dict[str, set[str]] = {}
    for names, place in rows:
        for name in names:
            where.setdefault(place, set()).add(name)
    torch = where.get("torch", set()) | where.get("torch, cProfile", set())
    cprof = where.get("cProfile", set()) | where.get("torch, cProfile", set())
    assert {"-s", "--sort", "-l", "--limit"} <= torch & cprof
    everywhere = where["everywhere"]
    assert _magic_options("torchprof") == torch | everywhere | where["magics"]
    assert _magic_options("cprofile") == cprof | everywhere | where["magics"]
    assert _command_line_options("torch") == torch | everywhere | where["command line"]
    assert _command_line_options("cprofile") == cprof | everywhere | where["command line"]
    assert "-o" in where["magics"] and "-o" not in where["command line"]  # -o: one meaning
