#!/usr/bin/env bash
# Create .venv (once) and install nbprof with everything its tests and notebooks need.
# Idempotent: re-running only installs what changed. Source it or run it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
if [ ! -x "$ROOT/.venv/bin/python" ]; then
  echo "nbprof: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv "$ROOT/.venv"
  "$ROOT/.venv/bin/python" -m pip install -q --upgrade pip
fi
stamp="$ROOT/.venv/.nbprof-installed"
if [ ! -f "$stamp" ] || [ "$ROOT/requirements-dev.txt" -nt "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ]; then
  echo "nbprof: installing requirements-dev.txt into .venv"
  (cd "$ROOT" && .venv/bin/python -m pip install -q -r requirements-dev.txt 2>&1 | grep -v "is ignored: it is neither" || true)
  .venv/bin/python -c "import nbprof, torch, jupyterlab, nbval, playwright" # fail loudly if an install failed
  touch "$stamp"
fi
