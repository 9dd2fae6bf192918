#!/usr/bin/env bash
# One command: set up .venv and open JupyterLab on the tutorial notebooks.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT/notebooks"
# containers and CI machines often run as root, which JupyterLab refuses without this flag
if [ "$(id -u)" = 0 ]; then set -- --allow-root "$@"; fi
exec "$ROOT/.venv/bin/jupyter" lab "$@"
