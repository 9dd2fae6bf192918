"""Move each finding threshold a little and check that a test fails (docs/testing.md).

mutmut mutates what is inside functions; the thresholds of the finding kinds are module
constants (``STRAGGLER_MIN_IMBALANCE = 0.10``), which it leaves alone. This script makes those
mutants itself: every upper-case number of every module in ``nbprof/analysis/findings/`` moved
3 % up and 3 % down (integers by one), in a copy of the package, and the tests of that kind
(``-k <kind>`` in tests/test_boundaries.py) run against it. A mutant
that no test fails is a survivor: the tests do not pin that threshold.

    python scripts/threshold_mutants.py            # all kinds
    python scripts/threshold_mutants.py straggler  # some kinds

Prints one line per mutant and the score; exits 1 when a mutant survived.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def moved(value: int | float) -> list[int | float]:
    if isinstance(value, int):
        return [value - 1, value + 1]
    return [value * 0.97, value * 1.03]


def main(kinds: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from nbprof.analysis import findings as F

    checks = [m for m in F.TORCH_CHECKS + F.PYTHON_CHECKS if not kinds or F.kind_name(m) in kinds]
    killed = survived = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in ("tests", "nbprof"):
            shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(ROOT / "pyproject.toml", work / "pyproject.toml")
        env = {**os.environ, "PYTHONPATH": str(work), "PYTHONDONTWRITEBYTECODE": "1"}
        for check in checks:
            kind = F.kind_name(check)
            path = work / "nbprof" / "analysis" / "findings" / f"{kind}.py"
            original = path.read_text(encoding="utf-8")
            for const, value in F.thresholds(check).items():
                for new in moved(value):
                    line = re.compile(rf"^{const} = [^\n#]+", re.M)
                    assert line.search(original), (kind, const)
                    path.write_text(line.sub(f"{const} = {new!r}", original, count=1), encoding="utf-8")
                    result = subprocess.run(
                        [sys.executable, "-m", "pytest", "tests/test_boundaries.py", "-q",
                         "-x", "-p", "no:cacheprovider", "-m", "not slow and not browser and not notebook",
                         "-k", f"{kind} and not documented and not thresholds_are"],
                        cwd=work, env=env, capture_output=True, text=True)
                    path.write_text(original, encoding="utf-8")
                    if result.returncode == 5:
                        raise SystemExit(f"no tests selected for {kind}")
                    ok = result.returncode != 0
                    killed += ok
                    survived += not ok
                    print(f"{'killed  ' if ok else 'SURVIVED'} {kind}.{const} = {value!r} -> {new!r}", flush=True)
    total = killed + survived
    print(f"threshold mutants: {killed}/{total} killed ({100 * killed / max(total, 1):.0f} %)")
    return 1 if survived else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
