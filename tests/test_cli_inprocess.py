"""``nbprof``'s command line run in this process (``nbprof.cli.main``), so that mutation testing
can reach it: tests/test_cli.py runs ``python -m nbprof`` in a subprocess in a temporary folder,
which mutmut's selection has to leave out (pyproject's [tool.mutmut]). The answers are
independent of nbprof: the exit status and stderr of the same script run by a plain ``python``
(no nbprof), argparse's own errors, the file system."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nbprof import cli

SCRIPT = """
import sys
if __name__ == "__main__":
    print("argv", sys.argv[1:], __name__)
    how = sys.argv[1] if len(sys.argv) > 1 else ""
    if how == "raise":
        raise ValueError("boom in the script")
    if how == "exit":
        sys.exit(int(sys.argv[2]))
    if how == "exit-none":
        sys.exit()
    if how == "exit-text":
        sys.exit("a message to stderr")
"""


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A folder with job.py, as the current folder; sys.argv and sys.path given back after."""
    (tmp_path / "job.py").write_text(textwrap.dedent(SCRIPT))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


def plain_python(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """The oracle: the same script under a plain Python, no nbprof."""
    return subprocess.run([sys.executable, "job.py", *args], cwd=folder, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args", [(), ("exit", "3"), ("exit", "0"), ("exit-none",), ("exit-text",), ("raise",)])
def test_the_exit_status_and_stderr_are_pythons(here, capsys, args):
    """The status a plain ``python job.py ARGS`` exits with; a SystemExit's text and an
    exception's traceback on stderr as Python prints them (without nbprof's frames); the
    report is still written."""
    want = plain_python(here, *args)
    status = cli.main(["cprofile", "-q", "job.py", *args])
    out = capsys.readouterr()
    assert status == want.returncode, (want.stderr, out.err)
    assert f"argv {list(args)} __main__" in out.out
    if args == ("exit-text",):
        assert "a message to stderr" in want.stderr and out.err.startswith("a message to stderr\n")
    if args == ("raise",):
        theirs, ours = want.stderr.splitlines(), out.err.splitlines()
        assert theirs[0] in ours and theirs[-1] == "ValueError: boom in the script" in ours
    assert (here / "job.nbprof.html").exists()
    assert sys.argv[0] == "job.py" and sys.path[0] == str(here)  # as `python job.py` sets them


def test_a_module_runs_as_main_with_its_arguments(here, capsys):
    """``-m pkg``: the package's __main__, run as ``__main__`` with the arguments after the name
    (as ``python -m pkg x -y``), the report named after the module."""
    pkg = here / "toolpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text("import sys\nprint('module main', __name__, __package__, sys.argv[1:])\n")
    sys.path.insert(0, str(here))  # python -m puts the current folder first
    want = subprocess.run([sys.executable, "-m", "toolpkg", "x", "-y"], cwd=here, capture_output=True, text=True,
                          timeout=60)
    assert cli.main(["cprofile", "-q", "-m", "toolpkg", "x", "-y"]) == 0
    out = capsys.readouterr()
    assert want.stdout == "module main __main__ toolpkg ['x', '-y']\n"
    assert want.stdout in out.out
    assert sys.argv == [str(pkg / "__main__.py"), "x", "-y"]
    assert (here / "toolpkg.nbprof.html").exists()
    assert cli.main(["cprofile", "-q", "-m", "no_such_module_here"]) == 2
    assert "-m no_such_module_here: no module by that name" in capsys.readouterr().err


def test_usage_errors_say_one_line_and_run_nothing(here, capsys):
    (here / "ran.py").write_text("open('ran', 'w').close()\n")
    assert cli.main(["cprofile", "missing.py"]) == 2
    assert "missing.py: no such file" in capsys.readouterr().err
    for argv, message in ((["cprofile"], "give a script"), (["nope", "x.py"], "invalid choice: 'nope'"),
                          (["cprofile", "--dupm", "x.prof", "ran.py"], "--dump")):
        with pytest.raises(SystemExit) as e:  # argparse's own exit: status 2
            cli.main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and message in err, argv
        assert err.startswith("usage: python -m nbprof "), err  # the command as it was typed here
    assert cli.main(["cprofile", "-s", "bogus", "ran.py"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m nbprof: ") and "unknown sort key 'bogus'" in err and err.count("\n") == 1
    assert not (here / "ran").exists() and not (here / "ran.nbprof.html").exists()


def test_split_keeps_script_arguments_apart():
    split = cli._split
    assert split(["torch", "--memory", "-l", "5", "train.py", "--lr", "0.1", "-v"]) == (
        ["torch", "--memory", "-l", "5"], "train.py", None, ["--lr", "0.1", "-v"])
    assert split(["cprofile", "-m", "pkg.mod", "-x"]) == (["cprofile"], None, "pkg.mod", ["-x"])
    assert split(["cprofile", "--", "-weird.py", "a"]) == (["cprofile"], "-weird.py", None, ["a"])
    assert split(["cprofile", "--"]) == (["cprofile"], None, None, [])
    assert split(["cprofile", "-m"]) == (["cprofile", "-m"], None, None, [])
    assert split(["cprofile", "-l"]) == (["cprofile", "-l"], None, None, [])  # a valued flag at the end
    assert split(["cprofile", "-q"]) == (["cprofile", "-q"], None, None, [])
    assert split([]) == ([], None, None, [])


def test_a_scripts_traceback_has_no_frame_of_nbprof(here, capsys):
    """The script's frames only, as Python prints them: none of nbprof's on top (mutmut leaves
    this one out: its trampolines are frames of their own between nbprof's)."""
    want = plain_python(here, "raise")
    assert cli.main(["cprofile", "-q", "--no-html", "job.py", "raise"]) == want.returncode == 1
    theirs, ours = want.stderr.splitlines(), capsys.readouterr().err.splitlines()
    frames = [line for line in ours[ours.index(theirs[0]):] if line.startswith('  File "')]
    assert len(frames) == sum(line.startswith('  File "') for line in theirs) == 1
    assert "job.py" in frames[0] and ours[-1] == theirs[-1] == "ValueError: boom in the script"


def test_the_old_o_writes_the_html_and_says_the_new_spelling_in_one_line(here, capsys):
    """In this process (the subprocess test in test_messages.py is out of mutmut's sight): a script
    written for ``-o PATH`` still writes the report there, and stderr says the new spelling, once."""
    (here / "job.py").write_text("x = sum(range(10))\n")
    assert cli.main(["cprofile", "-q", "-o", "old.html", "job.py"]) == 0
    assert (here / "old.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert capsys.readouterr().err.splitlines() == [
        "python -m nbprof: -o old.html: write --html old.html (-o names the result's variable in the magics; "
        "here it is deprecated)", "nbprof: report written to old.html"]
    with pytest.raises(SystemExit) as e:  # both spellings: argparse's one-line error, nothing run
        cli.main(["cprofile", "-o", "a.html", "--html", "b.html", "job.py"])
    assert e.value.code == 2 and "-o and --html both give the report's path: keep --html" in capsys.readouterr().err
    assert not (here / "a.html").exists() and not (here / "b.html").exists()
