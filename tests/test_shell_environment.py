"""The test command in any shell: with another virtualenv activated (VIRTUAL_ENV names it, its bin
first on PATH), as a developer's shell often is, the tests pass as in a clean one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import needs_torch

ROOT = Path(__file__).resolve().parent.parent

# the tests that read a fresh process's stderr whole: IPython's "Attempting to work in a
# virtualenv" warning there failed them in such a shell
STDERR_TESTS = [
    "tests/test_live_torch.py::test_first_profile_of_a_process_prints_nothing_on_fd2",
    "tests/test_torch_versions.py::test_magic_end_to_end_in_a_fresh_process",
]


@needs_torch
@pytest.mark.slow  # ~15 s: pytest in pytest, two fresh processes importing torch
def test_tests_pass_with_another_venv_active(tmp_path):
    other = tmp_path / "another-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True, timeout=120)
    env = dict(os.environ, VIRTUAL_ENV=str(other), PATH=f"{other / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *STDERR_TESTS],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "2 passed" in r.stdout
