"""The tutorial notebooks: in step with their sources, and run by nbval (lax, with the checked cells
compared through notebooks/nbval_sanitize.cfg); the sanitizer itself makes nbprof's text stable.

Every notebook runs in a copy of notebooks/ under a temporary folder, so the files the notebooks
write (traces/) never land in the repository.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SANITIZE = NOTEBOOKS / "nbval_sanitize.cfg"


def tutorial_notebooks() -> list[str]:
    """Paths relative to notebooks/: the students' notebooks, then the solutions."""
    names = sorted(p.name for p in NOTEBOOKS.glob("[0-9]*.ipynb"))
    return names + [f"solutions/{n}" for n in sorted(p.name for p in (NOTEBOOKS / "solutions").glob("[0-9]*.ipynb"))]


def copy_notebooks(dest: Path) -> Path:
    shutil.copytree(NOTEBOOKS, dest, ignore=shutil.ignore_patterns("traces", ".ipynb_checkpoints", "__pycache__"))
    return dest


def nbval(python: str, paths: list[str], cwd: Path, *, lax: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax" if lax else "--nbval",
           "--nbval-current-env", "--nbval-sanitize-with", str(SANITIZE), "--nbval-cell-timeout", "600", *paths]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _load_build():
    spec = importlib.util.spec_from_file_location("nbprof_notebook_build", NOTEBOOKS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------------- structure


def test_every_tutorial_has_a_solution_and_they_match_their_sources():
    build = _load_build()
    sources = build.sources()
    assert [f"{s}.ipynb" for s in sources] == sorted(p.name for p in NOTEBOOKS.glob("[0-9]*.ipynb"))
    assert len(sources) == 6
    problems = [p for stem, cells in sources.items() for p in build.check(stem, cells)]
    assert not problems, "\n".join(problems)


def test_exercises_have_a_task_and_a_check():
    import nbformat

    for rel in tutorial_notebooks():
        nb = nbformat.read(NOTEBOOKS / rel, as_version=4)
        tags = [t for c in nb.cells for t in c.metadata.get("tags", [])]
        assert tags.count("exercise-check") >= 2, rel
        assert tags.count("exercise-task") >= tags.count("exercise-check"), rel
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        assert "### Exercise 1" in text and "### Exercise 2" in text, rel
        if not rel.startswith("solutions/"):
            assert f"solutions/{Path(rel).name}" in text, rel  # where instructors find the solution
        for c in nb.cells:  # committed without volatile outputs
            if c.cell_type == "code":
                if "# NBVAL_CHECK_OUTPUT" not in c.source:
                    assert not c.outputs and c.execution_count is None, (rel, c.id)


def test_gpu_notebook_reads_the_traces_shipped_in_the_package():
    from importlib.resources import files

    data = files("nbprof") / "data"
    for name in ("cnn_train_cuda", "two_streams", "cnn_cuda_toggled", "transformer_infer_stack"):
        shipped = data / f"{name}.trace.json.gz"
        assert shipped.is_file(), name
        assert shipped.read_bytes() == (ROOT / "tests" / "data" / f"{name}.trace.json.gz").read_bytes(), name
    source = (NOTEBOOKS / "05-gpu-and-the-timeline.ipynb").read_text()
    assert 'files(\\"nbprof\\") / \\"data\\"' in source


# ------------------------------------------------------------------------------------- nbval


@pytest.mark.slow
@pytest.mark.parametrize("notebook", tutorial_notebooks())
def test_notebook_passes_nbval(notebook, tmp_path):
    root = copy_notebooks(tmp_path / "notebooks")
    result = nbval(sys.executable, [notebook], root)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("notebook", [n for n in tutorial_notebooks() if n.startswith("solutions/")])
def test_solutions_pass_their_checks(notebook):
    """Each check cell judges with the profile's own numbers: run with this nbprof, the solutions
    must get "✔" from every one of them (the students' notebooks get "✘": see the browser test)."""
    import nbformat

    nb = nbformat.read(NOTEBOOKS / notebook, as_version=4)
    ran, problems = _load_build().run_and_check(nb, True, notebook)
    assert not problems, "\n".join(problems)
    checks = [c for c in ran.cells if "exercise-check" in c.metadata.get("tags", [])]
    assert len(checks) >= 2


SANITIZER_NOTEBOOK = [
    "%load_ext nbprof",
    "import torch\nx = torch.randn(64, 64)",
    "%%torchprof -q --memory -o prof\nfor _ in range(3):\n    y = (x @ x).relu().sum()",
    "# NBVAL_CHECK_OUTPUT\nprint(prof.report(sort='name').text())",
    "def pairs(n):\n    return sorted(str(i) for i in range(n))",
    "%%cprofile -q -s ncalls -o py\npairs(2000)",
    "# NBVAL_CHECK_OUTPUT\nprint(py.report().text())",
    "# NBVAL_CHECK_OUTPUT\nprof.key_averages()[['name', 'count', 'cpu_mem_bytes']]",
    "# NBVAL_CHECK_OUTPUT\npy.report()",  # text/plain + the report's HTML (collapsed by the sanitizer)
]


@pytest.mark.slow
def test_sanitizer_makes_report_text_stable(tmp_path):
    """A notebook that shows nbprof's text reports, recorded once, passes strict nbval twice."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in SANITIZER_NOTEBOOK]
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    texts = [o.get("text", "") for c in nb.cells for o in c.outputs]
    assert any(t.startswith("torch profile:") for t in texts) and any(t.startswith("cProfile:") for t in texts)
    path = tmp_path / "report_text.ipynb"
    nbformat.write(nb, path)
    for attempt in (1, 2):
        result = nbval(sys.executable, [path.name], tmp_path, lax=False)
        assert result.returncode == 0, f"run {attempt}:\n" + result.stdout[-6000:] + result.stderr[-2000:]
        assert f"{len(SANITIZER_NOTEBOOK)} passed" in result.stdout, result.stdout[-2000:]


def test_sanitizer_patterns_cover_nbprof_numbers():
    import re

    from nbval.plugin import get_sanitize_patterns

    patterns = get_sanitize_patterns(SANITIZE.read_text(encoding="utf-8"))
    assert len(patterns) >= 6

    def clean(s: str) -> str:
        for regex, replace in patterns:
            s = re.sub(regex, replace, s)
        return s

    a = textwrap.dedent("""\
        torch profile: 40 events · span 47.97 ms · self CPU 47.33 ms
        top by self CPU: aten::mm (97.6%)
        aten::mm                 97.6%  46.17 ms   46.18 ms  15.39 ms   192.00 KB     192.00 KB      3
        ✅ Done: 10.0x faster (1097 ms → 109 ms); 448 calls → 4 (7% of the time), 3 steps""")
    b = textwrap.dedent("""\
        torch profile: 40 events · span 5.1 ms · self CPU 4.93 ms
        top by self CPU: aten::relu (51.0%)
        aten::mm                 48.2%  980.2 µs  990.0 µs  326.7 µs   192.00 KB     192.00 KB      3
        ✅ Done: 9.7x faster (1,316 ms → 136 ms); 448 calls → 4 (12% of the time), 3 steps""")
    assert clean(a) == clean(b)
    assert "192.00 KB" in clean(a) and "448 calls → 4" in clean(a) and "3 steps" in clean(a)
    html = '<style>x</style><div class="nbprof-report"><b>cProfile</b> 12 ms</div>'
    assert clean(html) == "NBPROF-REPORT-HTML"
    assert json.dumps(clean("2,002 function calls")) == json.dumps("2,002 function calls")
