#!/usr/bin/env bash
# The wheels the GPU check needs on the lent GPU machine, which reaches no package index (its
# Python 3.12 has torch, numpy, pandas, pytest, ... but not IPython, ipywidgets, msgspec, plotly,
# itables or anywidget): nbprof's dependencies (pyproject.toml), cp312 manylinux builds with what
# they need, into .whl/ (ignored by git; the device tool's `run` carries it, docs/testing.md).
#   bash scripts/gpu-wheels.sh          run once, here, in the repository root (needs PyPI)
# Wheels of what the machine already has are left out (its image's list: the device tool's
# KINDS.md): one version of each package, and torch keeps the numpy it was built against.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if [ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ]; then PY=.venv/bin/python; fi
mapfile -t DEPS < <("$PY" - <<'PYEOF'
import tomllib
for dep in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]:
    print(dep)
PYEOF
)
rm -rf .whl && mkdir -p .whl
"$PY" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "${DEPS[@]}"
# already on the GPU machine (two versions of one package break the install there)
for name in numpy pandas python_dateutil six packaging psutil typing_extensions pygments attrs jsonschema \
            jsonschema_specifications referencing rpds_py narwhals tqdm tzdata; do
  rm -f .whl/"$name"-*.whl
done
echo "gpu-wheels: $(ls .whl | wc -l) wheels, $(du -sh .whl | cut -f1) in .whl/"
