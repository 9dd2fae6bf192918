"""Survivors of a mutation sample against the fast-tier tests mutmut cannot run (docs/testing.md,
seed 54).

pyproject's ``[tool.mutmut]`` leaves out (``--ignore``, ``--deselect``) the fast-tier tests that
fail under mutmut's trampolines for reasons that are mutmut's (they read the sources, count
cProfile's calls, start fresh processes). A survivor they would kill is killed by the fast tier.
This applies each named mutant to the real sources of a worktree (``mutmut apply``), runs those
tests against it (``PYTHONPATH`` at the worktree, so fresh processes import it too), and restores
the sources after each; one line per mutant: killed (with the failing tests) or not.

    python scripts/mutants_by_hand.py WORKTREE NAME [NAME ...]   # in the worktree mutmut ran in
    python scripts/mutants_by_hand.py WORKTREE NAME ... -- TEST ...  # those tests instead (a new
                                                                     # test's kill, checked)

The worktree's ``nbprof/`` must have no changes of its own: it is restored with ``git checkout``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path


def left_out_tests(worktree: Path) -> list[str]:
    """The fast-tier tests [tool.mutmut] leaves out (test_types.py: mypy, the slow tier's)."""
    args = tomllib.loads((worktree / "pyproject.toml").read_text())["tool"]["mutmut"]["pytest_add_cli_args_test_selection"]
    tests = [a.split("=", 1)[1] for a in args if a.startswith(("--ignore=", "--deselect="))]
    return [t for t in tests if "test_types.py" not in t]


def main() -> None:
    args = sys.argv[1:]
    given = args.index("--") if "--" in args else len(args)
    worktree, names = Path(args[0]).resolve(), args[1:given]
    tests = args[given + 1:] or left_out_tests(worktree)  # paths relative to the worktree
    env = dict(os.environ, PYTHONPATH=str(worktree))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # each fresh process would compile nbprof again
    try:
        for name in names:
            subprocess.run(["git", "checkout", "-q", "nbprof"], cwd=worktree, check=True)
            subprocess.run([sys.executable, "-m", "mutmut", "apply", name], cwd=worktree, check=True, capture_output=True)
            if not subprocess.run(["git", "diff", "--quiet", "nbprof"], cwd=worktree).returncode:
                print(name, json.dumps({"applied": False}), flush=True)
                continue
            t0 = time.time()
            run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-n", "2",
                                  "-m", "not slow and not browser and not notebook and not gpu", "--tb=line", *tests],
                                 cwd=worktree, env=env, capture_output=True, text=True)
            failed = [line for line in run.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
            print(name, json.dumps({"killed": run.returncode != 0, "s": round(time.time() - t0), "failed": failed[:3]}),
                  flush=True)
    finally:
        subprocess.run(["git", "checkout", "-q", "nbprof"], cwd=worktree, check=True)


if __name__ == "__main__":
    main()
