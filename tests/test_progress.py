"""The progress of a folder of ranks loading (``views.progress.RankProgress``, through tqdm) where
people look: a widget in a notebook's kernel, one redrawn line in a terminal, and in logs and CI
(stderr no terminal) one line per rank with no carriage return. Each in a real process: a pipe, a
pseudo-terminal (pexpect), a Jupyter kernel (jupyter_client)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .test_cluster import cpu_only_folder

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = "import nbprof\np = nbprof.load_trace({folder!r}, workers=0)\nprint('ranks', len(p.rank_labels))\n"


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_in_a_log_one_line_per_rank_and_no_carriage_return(tmp_path):
    folder = cpu_only_folder(tmp_path / "cpu")
    run = subprocess.run([sys.executable, "-c", SCRIPT.format(folder=str(folder))], capture_output=True,
                         text=True, env=_env(), timeout=120)
    assert run.returncode == 0, run.stderr
    assert "\r" not in run.stderr
    lines = run.stderr.splitlines()
    assert lines[0] == "nbprof: loading 3 ranks"
    assert [line.split(" ranks loaded")[0] for line in lines[1:]] == [f"nbprof: {k} of 3" for k in (1, 2, 3)]
    assert run.stdout.strip() == "ranks 3"


def terminal_bar(folder: Path, env: dict) -> str:
    """What a folder's load draws in a pseudo-terminal before the script's own line."""
    pexpect = pytest.importorskip("pexpect")
    child = pexpect.spawn(sys.executable, ["-c", SCRIPT.format(folder=str(folder))], env=env,
                          encoding="utf-8", timeout=120, dimensions=(24, 120))
    child.expect(pexpect.EOF)
    out = child.before
    child.close()
    assert child.exitstatus == 0, out
    return out.split("ranks 3")[0]


def test_in_a_terminal_one_line_redrawn(tmp_path):
    bar = terminal_bar(cpu_only_folder(tmp_path / "cpu"), _env())
    # tqdm's line, redrawn in place: a carriage return before each state, 0/3 to 3/3, one newline
    draws = [d for d in bar.split("\r") if d.strip()]
    assert draws[0].startswith("nbprof: ranks loaded:   0%") and "0/3" in draws[0]
    assert "3/3" in draws[-1] and "100%" in draws[-1]
    assert bar.count("\n") == 1 and "loaded in" not in bar


@pytest.mark.notebook  # starts a Jupyter kernel: ~5 s
def test_in_a_notebook_a_progress_widget(tmp_path):
    jupyter_client = pytest.importorskip("jupyter_client")
    folder = cpu_only_folder(tmp_path / "cpu")
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3", env=_env())
    try:
        messages: list[dict] = []
        reply = kc.execute_interactive(SCRIPT.format(folder=str(folder)), output_hook=messages.append, timeout=120)
        assert reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    shown = [m["content"]["data"] for m in messages if m["msg_type"] == "display_data"]
    assert len(shown) == 1 and "application/vnd.jupyter.widget-view+json" in shown[0]
    # the progress bar's model: max 3, then each rank's value, then success
    states = [m["content"]["data"].get("state", {}) for m in messages if m["msg_type"] in ("comm_open", "comm_msg")]
    bar = [s for s in states if s.get("_model_name") == "FloatProgressModel"]
    assert bar and bar[0]["max"] == 3
    values = [s["value"] for s in states if isinstance(s.get("value"), float)]
    assert values[-1] == 3.0 and sorted(values) == values
    assert {"bar_style": "success"} in states
    text = [m["content"]["text"] for m in messages if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"]
    assert not text  # nothing written around the widget
