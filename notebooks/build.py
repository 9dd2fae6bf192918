"""Build the tutorial notebooks and their solutions from one source each.

    python notebooks/build.py            # write notebooks/NN-*.ipynb and notebooks/solutions/NN-*.ipynb
    python notebooks/build.py 03         # only the notebooks whose name starts with 03
    python notebooks/build.py --check    # fail if a committed notebook differs from its source

Each notebook is written once, in ``notebooks/src/NN-name.py`` (the "percent" format that jupytext
and VS Code read: ``# %%`` starts a code cell, ``# %% [markdown]`` a markdown cell whose lines start
with ``# ``). Exercises add two cell kinds:

    # %% [task]        the starting point the student edits (goes into notebooks/NN-name.ipynb)
    # %% [solution]    a worked solution, in the same place (goes into notebooks/solutions/)
    # %% [check]       the cell that tells, with the profile's numbers, whether the task is done

so the student's notebook and the instructor's never drift apart: they differ only in their task
cells. ``{{solution}}`` in a markdown cell becomes a note on where the solution is (student
version) or that this is the solution (instructors' version).

Building runs every notebook (nbclient, this Python's kernel) and keeps the outputs of the cells
marked ``# NBVAL_CHECK_OUTPUT`` only: nbval compares those, every other output is left out of git.
It also checks the exercises themselves: every check cell must print "✔" in the solutions and
"✘" in the students' notebooks.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import nbformat

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
SOLUTIONS = HERE / "solutions"
CHECK_OUTPUT = "# NBVAL_CHECK_OUTPUT"
PASS, FAIL = "✔", "✘"

_CELL = re.compile(r"^# %%(?:[ \t]+\[(?P<kind>markdown|task|solution|check)\])?[ \t]*$")

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def parse(text: str) -> list[dict]:
    """Percent-format text -> [{"kind", "source"}] (kind: markdown, code, task, solution, check)."""
    cells: list[dict] = []
    kind, lines = None, []

    def flush() -> None:
        if kind is None:
            return
        body = "\n".join(lines).strip("\n")
        if kind == "markdown":
            body = "\n".join(re.sub(r"^# ?", "", line) for line in body.splitlines())
        cells.append({"kind": kind, "source": body})

    for line in text.splitlines():
        m = _CELL.match(line)
        if m:
            flush()
            kind, lines = m.group("kind") or "code", []
        elif kind is not None:
            lines.append(line)
    flush()
    return cells


def solution_path(stem: str) -> str:
    return f"solutions/{stem}.ipynb"


def notebook(stem: str, cells: list[dict], solution: bool) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}}
    n = 0
    for cell in cells:
        kind = cell["kind"]
        if kind == ("task" if solution else "solution"):
            continue
        n += 1
        cid = f"c{n:02d}"
        src = cell["source"]
        if kind == "markdown":
            note = (
                "*Instructors' version: the task cell below holds a worked solution.*"
                if solution
                else f"<small>Instructors: a worked solution is in `{solution_path(stem)}`.</small>"
            )
            nb.cells.append(nbformat.v4.new_markdown_cell(src.replace("{{solution}}", note), id=cid))
            continue
        c = nbformat.v4.new_code_cell(src, id=cid)
        if kind in ("task", "solution"):
            c.metadata["tags"] = ["exercise-task"]
        elif kind == "check":
            c.metadata["tags"] = ["exercise-check"]
        nb.cells.append(c)
    return nb


def targets(stem: str) -> dict[bool, Path]:
    return {False: HERE / f"{stem}.ipynb", True: SOLUTIONS / f"{stem}.ipynb"}


def build(stem: str, cells: list[dict], execute: bool = True) -> list[str]:
    problems = []
    for solution, path in targets(stem).items():
        nb = notebook(stem, cells, solution)
        if execute:
            ran = run(nb)
            problems += run_problems(ran, solution, str(path.relative_to(HERE)))
            for cell, done in zip(nb.cells, ran.cells):
                if cell.cell_type == "code" and CHECK_OUTPUT in cell.source:
                    # nbval compares these outputs; it needs a run count on a cell with stored outputs
                    cell.outputs = [_clean_output(o) for o in done.outputs]
                    cell.execution_count = done.execution_count
        path.parent.mkdir(exist_ok=True)
        nbformat.validate(nb)
        path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(HERE.parent)}")
    return problems


def run(nb: Any, cwd: Path | None = None) -> Any:
    """A copy of ``nb`` with the outputs of one run (nbclient, this Python's kernel, every cell even
    after an error), in ``cwd`` or a scratch folder: files the notebook writes land there. The test
    suite runs the notebooks through this too (tests/tutorials.py), so the reference outputs and
    the checked run come from the same kind of execution."""
    from nbclient import NotebookClient

    ran = copy.deepcopy(nb)
    with tempfile.TemporaryDirectory(prefix="nbprof-build-") as scratch:
        NotebookClient(ran, timeout=600, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(cwd or scratch)}}).execute()
    return ran


def run_problems(ran: Any, solution: bool, label: str) -> list[str]:
    """What is wrong with a run notebook: an error output, a warning from nbprof on stderr, or an
    exercise check that does not say "✔" (solutions) / "✘" (the students' notebook, before the
    exercise is done)."""
    problems = []
    for cell in ran.cells:
        if cell.cell_type != "code":
            continue
        if "exercise-check" in cell.metadata.get("tags", []):
            text = _text(cell.outputs)
            want = PASS if solution else FAIL
            if want not in text:
                problems.append(f"{label} {cell.id}: check printed {text[:200]!r}, expected {want}")
        for o in cell.outputs:
            if o.output_type == "stream" and o.name == "stderr" and "nbprof:" in o.text:
                problems.append(f"{label} {cell.id}: stderr: {o.text.strip()[:500]}")
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if errors:
            problems.append(f"{label} {cell.id}: {errors[0].ename}: {errors[0].evalue}")
    return problems


def _text(outputs: list) -> str:
    parts = []
    for o in outputs:
        if o.output_type == "stream":
            parts.append(o.text)
        elif "data" in o:
            parts.append(o.data.get("text/plain", ""))
    return "".join(parts)


def _clean_output(o: nbformat.NotebookNode) -> nbformat.NotebookNode:
    o = copy.deepcopy(o)
    if "metadata" in o:
        o.metadata = {}
    return o


def _sources(nb: nbformat.NotebookNode) -> list[tuple[str, str, str, list[str]]]:
    return [(c.id, c.cell_type, c.source, list(c.metadata.get("tags", []))) for c in nb.cells]


def check(stem: str, cells: list[dict]) -> list[str]:
    """Differences between the committed notebooks and their source (cells, not outputs)."""
    problems = []
    for solution, path in targets(stem).items():
        if not path.exists():
            problems.append(f"{path.relative_to(HERE)} is missing: run python notebooks/build.py")
            continue
        committed = nbformat.read(path, as_version=4)
        if _sources(committed) != _sources(notebook(stem, cells, solution)):
            problems.append(f"{path.relative_to(HERE)} differs from src/{stem}.py: run python notebooks/build.py {stem[:2]}")
        for c in committed.cells:
            if c.cell_type == "code" and c.outputs and CHECK_OUTPUT not in c.source:
                problems.append(f"{path.relative_to(HERE)} {c.id}: stored outputs in a cell nbval does not compare")
    return problems


def sources() -> dict[str, list[dict]]:
    return {p.stem: parse(p.read_text(encoding="utf-8")) for p in sorted(SRC.glob("[0-9]*.py"))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("only", nargs="*", help="build only the notebooks whose name starts with these")
    ap.add_argument("--check", action="store_true", help="only check that the notebooks match their sources")
    ap.add_argument("--no-execute", action="store_true", help="write the notebooks without running them")
    args = ap.parse_args(argv)
    problems: list[str] = []
    for stem, cells in sources().items():
        if args.only and not any(stem.startswith(o) for o in args.only):
            continue
        problems += check(stem, cells) if args.check else build(stem, cells, execute=not args.no_execute)
    for p in problems:
        print("problem:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
