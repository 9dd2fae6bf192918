"""The tutorial notebooks: in step with their sources; each run once (tests/tutorials.py) and
checked the way `pytest --nbval-lax` checks it (no error, the `# NBVAL_CHECK_OUTPUT` cells' outputs
equal the committed ones through notebooks/nbval_sanitize.cfg), with the exercises' verdicts ("✔"
in the solutions, "✘" in the students' notebooks); the sanitizer itself, under real nbval, makes
nbprof's text stable.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .tutorials import NOTEBOOKS, ROOT, SANITIZE, load_build, nbval_differences, tutorial_notebooks


def nbval(python: str, paths: list[str], cwd: Path, *, lax: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax" if lax else "--nbval",
           "--nbval-current-env", "--nbval-sanitize-with", str(SANITIZE), "--nbval-cell-timeout", "600", *paths]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


# --------------------------------------------------------------------------------- structure


def test_every_tutorial_has_a_solution_and_they_match_their_sources():
    build = load_build()
    sources = build.sources()
    assert [f"{s}.ipynb" for s in sources] == sorted(p.name for p in NOTEBOOKS.glob("[0-9]*.ipynb"))
    assert len(sources) == 8
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


@pytest.mark.notebook  # starts two kernels
def test_each_tutorial_ends_with_a_cell_that_shuts_the_kernel_down_on_binder(tmp_path):
    """Binder gives all of a user's kernels ~2 GB: each tutorial's last cell stops its kernel
    there (mybinder.org sets BINDER_REPO_URL / BINDER_LAUNCH_HOST in the user's server) and
    nowhere else. Run in real kernels, one as on Binder, one not."""
    import nbformat
    from jupyter_client.manager import KernelManager

    last = set()
    for rel in tutorial_notebooks():
        nb = nbformat.read(NOTEBOOKS / rel, as_version=4)
        code = [c.source for c in nb.cells if c.cell_type == "code"]
        last.add(code[-1])
        assert "shuts this kernel down" in nb.cells[-2].source, rel  # the markdown that says why
    [cell] = last  # the same cell in every notebook
    import os

    for on_binder in (False, True):
        env = {k: v for k, v in os.environ.items() if not k.startswith("BINDER_")}
        if on_binder:
            env["BINDER_REPO_URL"] = "https://github.com/nbprof/nbprof"
        km = KernelManager(kernel_name="python3")
        km.start_kernel(cwd=str(tmp_path), env=env)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            kc.execute(cell)
            for _ in range(200):  # ~20 s: the kernel ends shortly after the cell ran
                if not km.is_alive():
                    break
                import time

                time.sleep(0.1)
            assert km.is_alive() is (not on_binder), on_binder
            if not on_binder:
                assert kc.execute_interactive("1 + 1", timeout=30)["content"]["status"] == "ok"
        finally:
            kc.stop_channels()
            if km.is_alive():
                km.shutdown_kernel(now=True)
            else:
                km.cleanup_resources()


@pytest.mark.notebook
@pytest.mark.slow  # ~60-80 s: the notebook runs once, sampled
def test_notebook_06_with_its_processes_stays_under_1_gib(tmp_path):
    """Binder gives ~2 GB in all: notebook 6, the heaviest (a DDP job: torchrun and two ranks, next to
    its kernel), peaks under 1 GiB. Measured as a container is charged: the proportional set size
    (PSS: each shared page, libtorch's, counted once over the processes that map it) of the kernel
    and every process under it, sampled every 0.1 s while nbclient runs the notebook."""
    import threading
    import time

    import nbformat
    import psutil
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOKS / "solutions" / "06-long-training-loops.ipynb", as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    peak = {"pss": 0, "processes": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            proc = getattr(getattr(client.km, "provisioner", None), "process", None) if client.km else None
            if proc is not None:
                try:
                    procs = [psutil.Process(proc.pid)]
                    procs += procs[0].children(recursive=True)
                except psutil.NoSuchProcess:
                    procs = []
                pss = 0
                for p in procs:
                    try:
                        pss += p.memory_full_info().pss
                    except (psutil.NoSuchProcess, psutil.AccessDenied):
                        pass
                if pss > peak["pss"]:
                    peak.update(pss=pss, processes=len(procs))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        client.execute()
    finally:
        done.set()
        sampler.join()
    assert peak["processes"] >= 4  # the DDP job was seen: kernel, torchrun, two ranks
    assert peak["pss"] < 2**30, f"peak {peak['pss'] / 2**20:.0f} MiB in {peak['processes']} processes"


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


@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.parametrize("notebook", tutorial_notebooks())
def test_notebook_passes_nbval(notebook, tutorial_runs):
    """The notebook's one run, judged as `pytest --nbval-lax --nbval-sanitize-with
    notebooks/nbval_sanitize.cfg` judges it: no cell raised, and every `# NBVAL_CHECK_OUTPUT`
    cell printed what the committed notebook stores, up to the sanitizer."""
    run = tutorial_runs.get(notebook)
    problems = nbval_differences(run.reference, run.ran)
    assert not problems, "\n".join(problems)
    checked = [c for c in run.reference.cells if c.cell_type == "code" and "# NBVAL_CHECK_OUTPUT" in c.source]
    assert checked and all(c.outputs for c in checked)  # something was compared


@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.parametrize("notebook", tutorial_notebooks())
def test_exercise_checks_judge_the_run(notebook, tutorial_runs):
    """Each check cell judges with the profile's own numbers: run with this nbprof, the solutions
    get "✔" from every one of them and the students' notebooks, exercises not done, "✘"; and no
    error, no nbprof warning on stderr (notebooks/build.py's `run_problems`, what the build checks)."""
    run = tutorial_runs.get(notebook)
    problems = load_build().run_problems(run.ran, run.solution, notebook)
    assert not problems, "\n".join(problems)
    verdicts = ["".join(o.text for o in c.outputs if o.output_type == "stream")
                for c in run.ran.cells if "exercise-check" in c.metadata.get("tags", [])]
    verdict, never = ("✔", "✘") if run.solution else ("✘", "✔")
    assert len(verdicts) >= 2 and all(verdict in v and never not in v for v in verdicts), verdicts


def test_nbval_differences_judges_like_nbval():
    """The check above on runs made elsewhere: what nbval compares (checked cells, through the
    sanitizer, streams coalesced) and what it does not (other cells' outputs, metadata)."""
    import nbformat

    def stream(text, name="stdout"):
        return nbformat.v4.new_output("stream", name=name, text=text)

    def shown(text, html=None):
        data = {"text/plain": text, **({"text/html": html} if html else {})}
        return nbformat.v4.new_output("display_data", data=data, metadata={"isolated": True})

    reference = nbformat.v4.new_notebook()
    reference.cells = [
        nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(report)", execution_count=1,
                                  outputs=[stream("aten::mm   46.17 ms   97.6%   3 calls\n")]),
        nbformat.v4.new_code_cell("prof", execution_count=2, outputs=[]),
        nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\ntable", execution_count=3,
                                  outputs=[shown("name  count\nmm  3")]),
    ]

    def ran(first, second, third):
        nb = nbformat.from_dict(json.loads(json.dumps(reference)))
        for cell, outputs in zip(nb.cells, (first, second, third)):
            cell.outputs = outputs
        return nb

    same = ran([stream("aten::mm   980.2 µs   "), stream("51.0%   3 calls\n")],  # times and shares vary
               [shown("anything", "<b>anything</b>")],  # not a checked cell
               [nbformat.v4.new_output("display_data", data={"text/plain": "name  count\nmm  3"})])
    assert nbval_differences(reference, same) == []
    assert nbval_differences(reference, same, lax=False)  # --nbval compares the unchecked cell too
    count = ran([stream("aten::mm   980.2 µs   51.0%   4 calls\n")], [], [shown("name  count\nmm  3")])
    assert [p.split(":")[0] for p in nbval_differences(reference, count)] == ["Cell 0 (%s)" % reference.cells[0].id]
    extra = ran(reference.cells[0].outputs, [], [shown("name  count\nmm  3", "<table></table>")])
    assert len(nbval_differences(reference, extra)) == 1  # an output field the committed cell lacks
    error = ran(reference.cells[0].outputs, [nbformat.v4.new_output("error", ename="NameError", evalue="prof",
                                                                     traceback=[])], reference.cells[2].outputs)
    assert nbval_differences(reference, error) == [f"Cell 1 ({reference.cells[1].id}): NameError: prof"]


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


@pytest.mark.notebook
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
    # the check the tutorials' shared runs get agrees with nbval's on a third run
    assert nbval_differences(nb, load_build().run(nb, cwd=tmp_path), lax=False) == []


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
        aten::mm                 97.6%  46.17 ms   46.18 ms  15.39 ms   192.00 KiB    192.00 KiB      3
        ✅ Done: 10.0x faster (1097 ms → 109 ms); 448 calls → 4 (7% of the time), 3 steps""")
    b = textwrap.dedent("""\
        torch profile: 40 events · span 5.1 ms · self CPU 4.93 ms
        top by self CPU: aten::relu (51.0%)
        aten::mm                 48.2%  980.2 µs  990.0 µs  326.7 µs   192.00 KiB    192.00 KiB      3
        ✅ Done: 9.7x faster (1,316 ms → 136 ms); 448 calls → 4 (12% of the time), 3 steps""")
    assert clean(a) == clean(b)
    assert "192.00 KiB" in clean(a) and "448 calls → 4" in clean(a) and "3 steps" in clean(a)
    html = '<style>x</style><div class="nbprof-report"><b>cProfile</b> 12 ms</div>'
    assert clean(html) == "NBPROF-REPORT-HTML"
    assert json.dumps(clean("2,002 function calls")) == json.dumps("2,002 function calls")
