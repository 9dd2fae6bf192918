#!/usr/bin/env bash
# One command: set up .venv and run every test (unit, magics in a real IPython shell,
# notebooks with nbval, Binder config, JupyterLab in headless Chromium).
#   scripts/test.sh            everything
#   scripts/test.sh -k timeline   extra arguments go to pytest
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
  echo "nbprof: installing Debian's chromium for the browser tests"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi
export PYTHONDONTWRITEBYTECODE=1
.venv/bin/python -m pytest tests "$@"
