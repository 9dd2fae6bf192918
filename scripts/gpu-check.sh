#!/usr/bin/env bash
# The GPU check (docs/testing.md, "The GPU check"): on a machine with CUDA, every CUDA path of nbprof
# recorded and checked in a few minutes, the recordings kept in tests/data/gpu for the tests that
# skip without a GPU; without CUDA, the same steps on the CPU, one line saying so, exit 0.
#   bash scripts/gpu-check.sh            on a GPU (or, without CUDA, the CPU parts)
#   bash scripts/gpu-check.sh --dry-run  the CUDA checks on the recorded H100 traces in tests/data
#   ... --only lines_cnn,repeat          some steps (after the environment's); --budget-s S: their time
# On the lent GPU (the device tool's `run`), after `bash scripts/gpu-wheels.sh` here once:
#   carry [".whl"], timeout_s 540, command: bash scripts/gpu-check.sh
# Its files come back from $OUT: RESULTS.md, results.json, gpu-check.log, gpu-data.tar.gz
# (`tar xzf gpu-data.tar.gz -C tests/data` puts the recordings where the tests read them).
# PYTHON picks the interpreter (default: .venv/bin/python where there is one, else python3).
set -uo pipefail
SECONDS=0
# the run's clock starts here: the wheels' install counts against the steps' budget and the whole bound
export GPU_CHECK_STARTED="${GPU_CHECK_STARTED:-$(date +%s.%N)}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
SITE="${GPU_CHECK_SITE:-/tmp/nbprof-gpu-site}"
stamp() { echo "[$(date +%H:%M:%S)] gpu-check: $*"; }
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; exec > >(tee -a "$OUT/gpu-check.log") 2>&1; fi
stamp "start $(date -u +%Y-%m-%dT%H:%M:%SZ) in $ROOT with $PY ($("$PY" --version 2>&1))"
# nbprof's dependencies from the carried wheels, only where this Python lacks them (offline: no index)
if ! "$PY" -c "import IPython, ipywidgets, msgspec, plotly, itables, anywidget" 2>/dev/null; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    stamp "installing $(ls .whl/*.whl | wc -l) carried wheels into $SITE"
    timeout 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SITE" .whl/*.whl || { stamp "the wheels did not install (see above)"; exit 2; }
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  else
    stamp "this Python lacks nbprof's dependencies and there is no .whl/ (bash scripts/gpu-wheels.sh, here, once)"
  fi
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
export GPU_CHECK_COMMIT="${GPU_CHECK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
# the driver keeps its steps inside their budget; this bounds the whole run, the install included,
# should it hang itself
WHOLE="${GPU_CHECK_TIMEOUT:-480}"
timeout --kill-after=10 "$(( WHOLE > SECONDS + 30 ? WHOLE - SECONDS : 30 ))" "$PY" scripts/gpu_check.py "$@"
rc=$?
stamp "done, exit status $rc"
exit $rc
