"""Does each mutant listed in scripts/equivalent_mutants.txt still name the mutation it was listed for?

mutmut numbers a function's mutants in the order it finds them, so an edit to a function renumbers
its mutants: the name listed as equivalent can come to mean another, non-equivalent mutant, which
the score would then leave out unseen. For each listed name this script takes the commit that
added its line (git blame), mutates the file as it was at that commit and as it is now (mutmut's
own generator, nothing run), and compares the two edits:

- same edit: fine;
- another edit now, and the function has exactly one mutant with the listed edit: renumbered
  (``--fix`` rewrites the name);
- the edit is gone (or ambiguous): stale, to look at by hand (the exit status is 1).

A name numbered on another version of its file than the commit that wrote its line (mapped ahead
to code on another branch, say) says so after it: ``name  # at <commit>``.

    python scripts/check_equivalent_mutants.py          # report
    python scripts/check_equivalent_mutants.py --fix    # and rename the renumbered ones
"""

from __future__ import annotations

import argparse
import difflib
import functools
import re
import subprocess
import sys
from pathlib import Path

from mutmut.mutation.file_mutation import mutate_file_contents

ROOT = Path(__file__).resolve().parents[1]
LIST = ROOT / "scripts" / "equivalent_mutants.txt"
_DEF = re.compile(r"^(\s*)def (x\S*?__mutmut_(?:orig|\d+))\(")


def _module_file(name: str) -> tuple[str, str]:
    """'nbprof.analysis.tree.x_build_tree__mutmut_3' -> ('nbprof/analysis/tree.py', 'x_build_tree__mutmut_3');
    a package's mutants are in its __init__.py."""
    module, _, local = name.partition(".x")
    path = module.replace(".", "/")
    return (path + "/__init__.py" if (ROOT / path).is_dir() else path + ".py"), "x" + local


@functools.lru_cache(maxsize=None)
def _edits(path: str, commit: str) -> dict[str, tuple[str, ...]]:
    """Every mutant of ``path`` at ``commit`` ("" for the working tree): its changed lines."""
    source = (ROOT / path).read_text() if not commit else subprocess.run(
        ["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lines = mutate_file_contents(path, source).code.splitlines()
    starts = [(i, m.group(2), len(m.group(1))) for i, line in enumerate(lines) if (m := _DEF.match(line))]
    bodies: dict[str, list[str]] = {}
    for i, name, indent in starts:
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
            j += 1
        bodies[name] = lines[i + 1:j]
    out = {}
    for name, body in bodies.items():
        if not name.endswith("__mutmut_orig"):
            orig = bodies[name.rsplit("__mutmut_", 1)[0] + "__mutmut_orig"]
            out[name] = tuple(line.strip() for line in difflib.unified_diff(orig, body, lineterm="", n=0)
                              if line[:1] in "+-" and not line.startswith(("+++", "---")))
    return out


def _blame() -> dict[int, str]:
    """Line number (1-based) of the list -> the commit that wrote it ("" where not committed yet)."""
    run = subprocess.run(["git", "blame", "--porcelain", str(LIST.relative_to(ROOT))], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    out: dict[int, str] = {}
    for line in run.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and re.fullmatch(r"[0-9a-f]{40}", parts[0]):
            out[int(parts[2])] = "" if set(parts[0]) == {"0"} else parts[0]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fix", action="store_true", help="rewrite the renumbered names in the list")
    args = ap.parse_args()
    text = LIST.read_text().splitlines()
    blame = _blame()
    renamed: dict[int, tuple[str, str]] = {}  # line number -> (listed name, its name now)
    stale = 0
    for number, line in enumerate(text, start=1):
        name, _, comment = line.partition("#")
        name = name.strip()
        if not name:
            continue
        at = re.match(r"\s*at\s+([0-9a-f]{7,40})\b", comment)
        path, local = _module_file(name)
        if not (ROOT / path).exists():
            print(f"stale: {name}: {path} is gone")
            stale += 1
            continue
        try:
            then = _edits(path, at.group(1) if at else blame.get(number, ""))
        except subprocess.CalledProcessError:
            then = {}
        now = _edits(path, "")
        if local not in then:
            print(f"unknown: {name}: no such mutant when it was listed (checked as it is now)")
            then = now
        if then.get(local) == now.get(local):
            continue
        prefix = local.rsplit("__mutmut_", 1)[0] + "__mutmut_"
        same = [n for n, edit in now.items() if n.startswith(prefix) and edit == then[local]]
        if len(same) == 1:
            new = name[: len(name) - len(local)] + same[0]
            print(f"renumbered: {name} -> {same[0].rsplit('__mutmut_', 1)[1]} ({' | '.join(then[local])[:120]})")
            renamed[number] = (name, new)
        else:
            print(f"stale: {name}: its edit ({' | '.join(then[local])[:120]}) is "
                  + ("gone" if not same else f"at {len(same)} mutants"))
            stale += 1
    if args.fix and renamed:
        LIST.write_text("\n".join(line.replace(*renamed[i], 1) if i in renamed else line
                                  for i, line in enumerate(text, start=1)) + "\n")
    listed = sum(1 for line in text if line.partition("#")[0].strip())
    print(f"{listed} listed: {len(renamed)} renumbered{' (fixed)' if args.fix and renamed else ''}, {stale} stale")
    return 1 if stale or (renamed and not args.fix) else 0


if __name__ == "__main__":
    sys.exit(main())
