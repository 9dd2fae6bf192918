#!/usr/bin/env bash
# One command: set up .venv and run the tests.
#   scripts/test.sh               the fast tier, while working (times: docs/testing.md): every test not
#                                 marked slow, browser or notebook
#   scripts/test.sh --all         everything (CI): the docs site built (warnings as errors, the
#                                 tutorials executed), then every test: also each tutorial notebook run
#                                 once, in JupyterLab in headless Chromium, Binder's environment, the
#                                 other Pythons, the built site offline in Chromium; then the live-torch
#                                 tests on the oldest and newest supported torch
#   scripts/test.sh -k timeline   extra arguments go to pytest (a -m of yours replaces the tier's)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
all=0
args=()
for arg in "$@"; do
  if [ "$arg" = "--all" ]; then all=1; else args+=("$arg"); fi
done
bash scripts/setup.sh
# bytecode cached (__pycache__/, ignored by git): the tests start ~40 fresh interpreters that import
# nbprof (the CLI, nested profilers, each module imported alone), each compiling its ~145 modules
# again when the environment says PYTHONDONTWRITEBYTECODE (these machines set it): test_imports'
# modules-alone check took 13.4 s that way, 5.7 s with the bytecode kept
unset PYTHONDONTWRITEBYTECODE
if [ "$all" = 0 ]; then
  # over every core (pytest-xdist; a -n of yours after this one wins, -n 0 runs in this process);
  # a module whose fixture starts a process of its own is one xdist_group (--dist loadgroup), so
  # the fixture runs once rather than on each worker (tests/test_nested_profilers.py: 6-7 s each)
  exec .venv/bin/python -m pytest tests -n auto --dist loadgroup -m "not slow and not browser and not notebook" ${args[@]+"${args[@]}"}
fi
if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
  echo "nbprof: installing Debian's chromium for the browser tests"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi
# the docs site first (tests/test_docs.py opens this build in a browser instead of building again):
# warnings are errors; the tutorials run once, then come from docs/_build/.jupyter_cache
.venv/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html
# over every core; the checks of the tutorials' runs stay on one worker (tests/conftest.py)
.venv/bin/python -m pytest tests -n auto --dist loadgroup ${args[@]+"${args[@]}"}
# the compat step: the live-torch tests on PyPI's builds of the oldest supported torch and the
# newest (venvs cached in ~/.cache/nbprof-torch, built when missing: ~6 min cold, ~1.5 min warm)
exec bash scripts/test-torch-versions.sh -q
