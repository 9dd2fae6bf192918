"""The suite's scheduling does what tests/conftest.py and the modules marked with ``xdist_group``
rely on: under ``--dist loadgroup`` (scripts/test.sh, both tiers) every test of a group runs on one
worker, one after the other. The perf guards (test_perf_guards.py) would otherwise be each other's
load, two workers would build the docs site into one folder at once (test_docs.py), each worker
would run the tutorials again (conftest's "tutorials" group) and start the nested profilers'
scenarios again (test_nested_profilers.py).

pytest-xdist groups tests by renaming each grouped test's node id; pytest 9.2 keeps the id
elsewhere, so there every group is silently ignored (pyproject.toml pins pytest below 9.2). This
runs the installed pytest and pytest-xdist on a module of grouped tests and reads which worker ran
each one."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("xdist")

pytestmark = pytest.mark.slow  # two workers started: ~10 s

MODULE = textwrap.dedent("""
    import os
    import pytest

    pytestmark = pytest.mark.xdist_group("one_worker")

    @pytest.mark.parametrize("i", range(8))
    def test_grouped(i):
        print(os.environ["PYTEST_XDIST_WORKER"])

    @pytest.mark.parametrize("i", range(8))
    def test_also_grouped(i):
        pass
""")


def test_a_groups_tests_run_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(MODULE)
    run = subprocess.run([sys.executable, "-m", "pytest", "test_grouped.py", "-n", "2", "--dist", "loadgroup",
                          "-v", "-p", "no:cacheprovider", "-p", "no:randomly"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    workers = re.findall(r"^\[(gw\d+)\] .*PASSED test_grouped\.py::", run.stdout, flags=re.M)
    assert len(workers) == 16, run.stdout[-3000:]
    assert set(workers) == {workers[0]}, (sorted(set(workers)), run.stdout[-3000:])
