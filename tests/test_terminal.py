"""The magics where people type in a terminal: terminal IPython and ``jupyter console``.

Both ask IPython's completeness check whether Enter runs the input or opens a continuation line
(terminal IPython directly, jupyter console through the kernel's is_complete_request). A
``%%torchprof`` or ``%%cprofile`` line must be as incomplete as ``%%time``'s: the cell runs after
a blank line, with its body, never on the magic line's Enter with an empty body.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

from .conftest import HAS_TORCH, needs_torch

# what %%time answers, line by line: IPython's own rule for a cell magic
CELLS = [
    "{magic}\n",
    "{magic}\ny = sum(range(10))\n",
    "{magic}\ny = sum(range(10))\n\n",
    "{magic}\nfor i in range(3):\n    y = i\n",
    "{magic}\nfor i in range(3):\n    y = i\n\n",
]
MAGICS = ["%%torchprof", "%%torchprof --memory -o p", "%%cprofile", "%%cprofile -s cumtime -o cp"]


@pytest.mark.parametrize("magic", MAGICS)
def test_completeness_check_answers_as_for_time(shell, magic):
    check = shell.input_transformer_manager.check_complete
    for cell in CELLS:
        assert check(cell.format(magic=magic)) == check(cell.format(magic="%%time")), cell.format(magic=magic)
    assert check(f"{magic}\n") == ("incomplete", 0)
    assert check(f"{magic}\ny = 1\n\n") == ("complete", None)


def test_the_cell_is_still_rewritten_when_it_runs(shell):
    """Left out of the completeness check only: the cell that runs is still the wrapped one."""
    assert shell.transform_cell("%%cprofile -q\ny = 1\n").splitlines()[0] == "'%%cprofile -q'"


# -------------------------------------------------------------------------------- real terminals

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[=>]")


class Terminal:
    """A program in a pseudo-terminal (pexpect), its output read without escape sequences."""

    def __init__(self, args: list[str], tmp: Path) -> None:
        pexpect = pytest.importorskip("pexpect")
        self._pexpect = pexpect
        env = dict(os.environ, TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1", IPYTHONDIR=str(tmp / "ipython"),
                   JUPYTER_RUNTIME_DIR=str(tmp / "runtime"), JUPYTER_CONFIG_DIR=str(tmp / "jupyter"))
        self.child = pexpect.spawn(sys.executable, args, env=env, encoding="utf-8", timeout=5,
                                   dimensions=(50, 200), cwd=str(tmp))
        self.text = ""
        self.seen = 0  # what wait() has matched so far

    def _read(self, seconds: float) -> None:
        try:
            self.text += _ANSI.sub("", self.child.read_nonblocking(65536, timeout=seconds)).replace("\r", "")
        except self._pexpect.TIMEOUT:
            pass

    def wait(self, pattern: str, timeout: float = 60) -> str:
        """Wait for ``pattern`` in what was printed since the last match; return that text."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.text[self.seen:])
            if m:
                out = self.text[self.seen:self.seen + m.end()]
                self.seen += m.end()
                return out
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} not printed in {timeout} s; the terminal shows:\n"
                                     f"{self.text[-3000:]}")
            self._read(0.2)

    def quiet_for(self, seconds: float) -> str:
        """What is printed in the next ``seconds`` (nothing matched)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._read(0.2)
        return self.text[self.seen:]

    def type(self, line: str) -> None:
        self.child.send(line + "\r")  # Enter, as a terminal sends it

    def close(self) -> None:
        self.child.close(force=True)


def _enter_cell_and_expect(term: Terminal, magic: str, body: str, printed: str, prompt: str) -> str:
    """Type a cell magic as a user does: the magic line, the body, a blank line. Enter on the magic
    line and on the body opens a continuation line (nothing runs); the blank line's Enter, and the
    one after it (the cursor on an empty last line), run the cell, as for %%time."""
    term.type(magic)
    term.wait(r"\.\.\.:", 20)
    assert printed not in term.quiet_for(1.0), f"{magic}: ran on the magic line's Enter"
    term.type(body)
    term.wait(r"\.\.\.:", 20)
    term.type("")
    assert printed not in term.quiet_for(1.0)
    term.type("")
    return term.wait(prompt, 120)


def _ipython_session(term: Terminal, first_prompt: int = 1) -> None:
    n = first_prompt
    term.wait(rf"In \[{n}\]:", 120)
    term.type("%load_ext nbprof")
    term.wait(rf"In \[{n + 1}\]:", 60)
    out = _enter_cell_and_expect(term, "%%time", "y = sum(range(1000))", "Wall time", rf"In \[{n + 2}\]:")
    assert "Wall time" in out  # IPython's own cell magic, typed the same way: the reference
    out = _enter_cell_and_expect(term, "%%cprofile -l 3", "y = sorted(range(1000))", "cProfile:", rf"In \[{n + 3}\]:")
    assert re.search(r"cProfile: \d+ function calls? .*\n.*sorted", out), out
    if HAS_TORCH:
        term.type("import torch")
        term.wait(rf"In \[{n + 4}\]:", 120)
        out = _enter_cell_and_expect(term, "%%torchprof --memory --limit 3", "y = torch.ones(64, 64) @ torch.ones(64, 64)",
                                     "torch profile:", rf"In \[{n + 5}\]:")
        m = re.search(r"torch profile: ([\d,]+) events?", out)
        assert m and int(m.group(1).replace(",", "")) > 0, out  # the body ran under the profiler
        assert "aten::mm" in out  # the report of the body, not an empty one


@pytest.mark.slow  # ~10 s: a terminal IPython imports torch
def test_terminal_ipython_session(tmp_path):
    term = Terminal(["-m", "IPython", "--no-banner", "--colors=NoColor", "--no-confirm-exit",
                     "--HistoryManager.enabled=False"], tmp_path)
    try:
        _ipython_session(term)
    finally:
        term.close()


@pytest.mark.notebook  # a kernel: jupyter console asks it (is_complete_request) what Enter does
def test_jupyter_console_session(tmp_path):
    pytest.importorskip("jupyter_console")
    term = Terminal(["-m", "jupyter_console", "--kernel", "python3", "--ZMQTerminalInteractiveShell.banner=",
                     "--ZMQTerminalInteractiveShell.kernel_timeout=120"], tmp_path)
    try:
        _ipython_session(term)
    finally:
        term.close()


@pytest.mark.notebook
def test_kernel_is_complete_reply(tmp_path):
    """What a kernel answers a frontend's is_complete_request (jupyter console, qtconsole)."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:
        kc.execute_interactive("%load_ext nbprof", timeout=60)
        for magic in ("%%time", "%%torchprof --memory", "%%cprofile -s cumtime"):
            for cell, status in ((f"{magic}", "incomplete"), (f"{magic}\ny = 1", "incomplete"),
                                 (f"{magic}\ny = 1\n\n", "complete")):
                kc.is_complete(cell)
                reply = kc.get_shell_msg(timeout=30)
                assert reply["content"]["status"] == status, (cell, reply["content"])
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@needs_torch
def test_the_profiled_cell_runs_its_body(shell):
    """Through run_cell as a terminal sends it after the blank line: the report of the body."""
    from .conftest import reports, run

    result, captured = run(shell, "%%torchprof -q -o p\nimport torch\ny = torch.ones(8) * 2\n\n")
    assert result.error_in_exec is None
    assert "aten::mul" in set(shell.user_ns["p"].key_averages()["name"])
    assert reports(captured) == []
