#!/usr/bin/env bash
# The mutation score (docs/testing.md): mutmut changes the code of nbprof/ (pyproject's [tool.mutmut]
# says what it leaves out) one small edit at a time (a < for a <=, a + for a -, a constant moved, a
# line dropped) and runs, for each mutant, the fast-tier tests that call the mutated function; a
# mutant no test fails "survived". Then the finding thresholds (module constants, which mutmut
# leaves alone) are moved 3 % each way by scripts/threshold_mutants.py. Not part of the test tiers:
# it takes days for the whole scope (~26,000 mutants); run it on a module at a time, or measure the
# score on a random sample with scripts/mutation_sample.py (docs/testing.md).
#
#   scripts/mutation.sh                       everything in scope
#   scripts/mutation.sh 'nbprof.format.*'     one module (mutmut's mutant names, globs allowed)
#   scripts/mutation.sh 'nbprof.analysis.tree.*' 'nbprof.analysis.memory.*'
#   NBPROF_MUTATION_JOBS=4 scripts/mutation.sh ...   parallel mutants (default 1)
#   NBPROF_MUTATION_THRESHOLDS=0 ...                skip the thresholds step
#
# Results: `python -m mutmut results` (survivors), `python -m mutmut show <mutant>` (its diff);
# mutants/ keeps them between runs (delete it after changing the tests' selection or the code).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
export PYTHONDONTWRITEBYTECODE=1
# tests that start other processes (the command line, IPython shells) import the mutated copy
export PYTHONPATH="$ROOT/mutants${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -m mutmut run --max-children "${NBPROF_MUTATION_JOBS:-1}" "$@" || status=$?
"$PY" -m mutmut results || true
if [ "${NBPROF_MUTATION_THRESHOLDS:-1}" != 0 ] && { [ $# = 0 ] || [[ "$*" == *findings* ]]; }; then
  PYTHONPATH="$ROOT" "$PY" scripts/threshold_mutants.py
fi
exit "${status:-0}"
