#!/usr/bin/env bash
# CI's compat step (.ci/run, after the main suite): nbprof on PyPI's default builds of the oldest
# torch it supports and of the newest release (CUDA builds, ~3 GB of downloads each, which run on
# a machine without a GPU too), besides the pinned CPU wheel of .venv. Each version gets a venv
# with torch and nbprof's dependencies; nbprof itself is this checkout (PYTHONPATH). In it run
# tests/test_live_torch.py (tables against torch's own key_averages), tests/test_torch_versions.py
# (the magic end to end in a fresh process), tests/test_native_output.py and tests/test_modules.py
# (--modules: which torch records nn.Module calls how).
#
#   scripts/test-torch-versions.sh                 the matrix: 2.4.1 and 2.15.0
#   NBPROF_TORCH_VERSIONS="2.6.0 2.14.1" scripts/test-torch-versions.sh    any others
#   scripts/test-torch-versions.sh -k memory       extra arguments go to pytest
#
# The venvs are cached in $NBPROF_TORCH_CACHE (default ~/.cache/nbprof-torch), one per torch
# version and Python (5.3 and 5.6 GB): a missing one is built, a cached one only gets nbprof's
# dependencies again when pyproject.toml's change. Measured on the 2-core CI VM: the whole matrix
# cold (both venvs built, downloads included) 5m39s: 136 s + 35 s of tests for 2.4.1, 121 s + 47 s
# for 2.15.0; warm 1m24s. When a new torch comes out, put it in VERSIONS.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VERSIONS="${NBPROF_TORCH_VERSIONS:-2.4.1 2.15.0}"
CACHE="${NBPROF_TORCH_CACHE:-$HOME/.cache/nbprof-torch}"
PYTHON="${PYTHON:-python3}"
export PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1
mkdir -p "$CACHE"
py="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
# nbprof's dependencies, from pyproject.toml (no build of nbprof: it runs from this checkout)
requirements="$(mktemp)"
no_constraints="$(mktemp)"  # this machine's pip may cap torch (a constraints file): not for torch here
trap 'rm -f "$requirements" "$no_constraints"' EXIT
"$PYTHON" - "$ROOT/pyproject.toml" >"$requirements" <<'EOF'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["dependencies"] + ["pytest>=8", "tlparse>=0.4"]))
EOF
quiet_pip() { grep -v "is ignored: it is neither" || true; }
status=0
for version in $VERSIONS; do
  venv="$CACHE/torch-$version-py$py"
  start=$SECONDS
  exec 9>"$CACHE/.lock-torch-$version-py$py"
  flock 9  # another checkout building or testing the same venv: wait for it
  if [ ! -f "$venv/.complete" ]; then
    echo "nbprof: building $venv (torch $version from PyPI)"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    PIP_CONSTRAINT="$no_constraints" "$venv/bin/python" -m pip install -q --no-cache-dir "torch==$version" 2>&1 | quiet_pip
  fi
  if ! cmp -s "$requirements" "$venv/.requirements"; then
    "$venv/bin/python" -m pip install -q --no-cache-dir -r "$requirements" 2>&1 | quiet_pip
    cp "$requirements" "$venv/.requirements"
  fi
  "$venv/bin/python" -c "import torch, numpy, IPython, pandas" || { echo "nbprof: the torch $version venv did not install" >&2; exit 1; }
  touch "$venv/.complete"
  ready=$SECONDS
  echo "nbprof: torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)') ready in $((ready - start)) s"
  PYTHONPATH="$ROOT" "$venv/bin/python" -m pytest -p no:cacheprovider \
    tests/test_live_torch.py tests/test_torch_versions.py tests/test_native_output.py tests/test_modules.py \
    tests/test_compile.py "$@" \
    || status=1
  echo "nbprof: torch $version tested in $((SECONDS - ready)) s"
  exec 9>&-
done
exit $status
