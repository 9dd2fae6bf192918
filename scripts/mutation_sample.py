"""A mutation score from a random sample of the mutants (docs/testing.md).

The whole scope (nbprof/, pyproject's [tool.mutmut]; ~19,700 mutants when it was analysis/, collect/
and format.py) costs hours of CPU per thousand mutants on a 2-core machine, days for all. A
uniform random sample of them (the first n of one seeded random order, so a sample grows by running a larger n) estimates the
score with a known margin: the killed share of n sampled mutants, with its 95 % Wilson interval. The survivors are
listed (``python -m mutmut show <name>`` gives each one's diff) to be killed by a new test or
explained as equivalent in docs/testing.md.

    python scripts/mutation_sample.py 400            # draw 400 (seed 26), run them, print the score
    python scripts/mutation_sample.py 400 --seed 7   # another sample
    python scripts/mutation_sample.py 400 --report   # only the score of a sample already run
    python scripts/mutation_sample.py 100 --within 'nbprof.analysis.findings.*'   # one part's score

The first run has mutmut generate the mutants and record which tests call which function
(~10 minutes). The mutants are run by mutmut itself (``mutmut run <names>``); this script only
draws the names and reads mutmut's results. A mutant's status: killed (a test failed, or it
hung past mutmut's timeout, or crashed the tests' process), or not (survived, or no test of the
fast tier calls its function).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"


def all_mutants() -> dict[str, int | None]:
    """Every mutant mutmut generated, with its exit code (None: not run yet)."""
    out: dict[str, int | None] = {}
    for meta in sorted(MUTANTS.rglob("*.meta")):
        out.update(json.loads(meta.read_text()).get("exit_code_by_key", {}))
    return out


def draw(names: list[str], n: int, seed: int) -> list[str]:
    """The first n of one random order of every mutant (a uniform sample; a larger n holds the
    smaller one's mutants, so a sample can grow run by run)."""
    order = sorted(names)
    random.Random(seed).shuffle(order)
    return sorted(order[:n])


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, help="how many mutants to draw")
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--within", action="append", default=[], metavar="GLOB",
                    help="draw only from the mutants whose names match (mutmut's names, e.g. "
                         "'nbprof.analysis.findings.*'); repeatable. The score of such a sample is that "
                         "part's, not the whole scope's")
    ap.add_argument("--report", action="store_true", help="run nothing: the score of the sample as it stands")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("NBPROF_MUTATION_JOBS", "1")))
    ap.add_argument("--equivalent", type=Path, default=ROOT / "scripts" / "equivalent_mutants.txt",
                    help="mutants explained as equivalent (one name per line, # comments): left out of the score")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(MUTANTS), os.environ.get("PYTHONPATH")]))}
    if not args.report:
        # mutmut generates every mutant (again for the files changed since: their functions'
        # mutants renumbered) and maps the tests before it looks for the names it was given: a name
        # that matches none does only that. So the sample is drawn from the code as it is now.
        subprocess.run([sys.executable, "-m", "mutmut", "run", "none.generate-only"], cwd=ROOT, env=env,
                       check=False, stdout=subprocess.DEVNULL)
    everything = all_mutants()
    if not everything:
        print("no mutants: mutmut generated none (run `python -m mutmut run none.x` to see why)", file=sys.stderr)
        return 2
    names = [n for n in everything if not args.within or any(fnmatch.fnmatchcase(n, g) for g in args.within)]
    sample = draw(names, args.n, args.seed)
    if not args.report:
        subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.jobs), *sample],
                       cwd=ROOT, env=env, check=False)
        everything = all_mutants()
    from mutmut.stats import status_by_exit_code  # mutmut's own reading of its exit codes

    equivalent = set()
    if args.equivalent.exists():
        equivalent = {line.split("#", 1)[0].strip() for line in args.equivalent.read_text().splitlines()} - {""}
    status = {name: status_by_exit_code[everything.get(name)] for name in sample}
    counts = Counter(status.values())
    # not killed: no test failed, or no test of the fast tier calls the mutated function at all
    lived = ("survived", "no tests", "suspicious", "skipped")
    survivors = sorted(n for n, s in status.items() if s in lived and n not in equivalent)
    explained = sorted(n for n, s in status.items() if s in lived and n in equivalent)
    # killed: a test failed, or the mutant hung past its timeout or crashed the tests' process
    killed = sum(1 for s in status.values() if s in ("killed", "timeout", "segfault"))
    scored = killed + len(survivors)
    lo, hi = wilson(killed, scored)
    scope = f" within {' '.join(args.within)}" if args.within else ""
    print(f"sample of {len(sample)} of {len(names):,} mutants{scope} (seed {args.seed}): "
          + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    print(f"equivalent (explained, left out): {len(explained)}")
    if scored:
        print(f"score: {killed}/{scored} = {killed / scored:.1%} of the non-equivalent mutants killed "
              f"(95 % interval {lo:.1%}-{hi:.1%})")
    for name in survivors:
        print(f"{status[name]}: {name}")
    not_run = [n for n, s in status.items() if s == "not checked"]
    if not_run:
        print(f"not run yet: {len(not_run)}")
    return 0 if not survivors and not not_run else 1


if __name__ == "__main__":
    raise SystemExit(main())
