"""Binder, checked offline: repo2docker accepts binder/, and an environment built from
binder/requirements.txt alone (plus ipykernel, which Binder's base image has) resolves, has the
CPU torch and the shipped traces, and starts a kernel that runs the magics. The notebooks
themselves run once per session, in the development environment (tests/tutorials.py): this
environment differs from that one in how it is installed (binder/requirements.txt, the same torch
pin, nbprof's own dependency ranges), which is what these tests check, not in what runs.

PyTorch's CPU index (the --extra-index-url line) cannot be reached from here: the test installs the
same file without that line, so that `torch==X+cpu` resolves to the local CPU wheel, exactly the
build Binder gets from the index. The venv is cached (NBPROF_TEST_CACHE, default
~/.cache/nbprof-tests) by the hash of the requirements and pyproject.toml's [project]; nbprof itself is
reinstalled from the working tree on every run. NBPROF_FRESH_BINDER_VENV=1 rebuilds it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import cache_root, package_copy, pip_install, project_table, without_pythonpath

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"


def requirement_lines() -> list[str]:
    text = (BINDER / "requirements.txt").read_text()
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_binder_config_files():
    lines = requirement_lines()
    assert CPU_INDEX in lines, "torch must come from PyTorch's CPU index (a plain torch is the CUDA build)"
    pins = [line for line in lines if line.startswith("torch")]
    assert len(pins) == 1 and re.fullmatch(r"torch==\d+\.\d+\.\d+\+cpu", pins[0]), pins
    dev = (ROOT / "requirements-dev.txt").read_text()
    version = pins[0].split("==")[1].split("+")[0]
    assert f"torch=={version}" in dev, "keep binder's torch pin in step with requirements-dev.txt"
    assert "." in lines, "the package itself, from the repository root"
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"
    for script in ("postBuild", "start"):  # none needed today; if one is added, it must be sound
        path = BINDER / script
        if path.exists():
            assert os.access(path, os.X_OK), f"binder/{script} must be executable"
            body = path.read_text()
            assert "set -e" in body or script == "start", f"binder/{script}: use set -e"
            if script == "start":
                assert body.rstrip().endswith('exec "$@"'), "binder/start must end with exec \"$@\""


def _repo2docker() -> str:
    exe = shutil.which("repo2docker") or str(Path(sys.executable).with_name("repo2docker"))
    if not os.path.exists(exe):
        pytest.skip("jupyter-repo2docker is not installed (pip install -e '.[test]')")
    return exe


def test_repo2docker_accepts_the_config():
    """`repo2docker --no-build` needs no Docker: it reads binder/ and prints the Dockerfile."""
    result = subprocess.run(
        [_repo2docker(), "--no-build", "--debug", "--user-id", "1000", "--user-name", "jovyan", str(ROOT)],
        capture_output=True, text=True, timeout=120,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert "python=3.11" in out  # runtime.txt was read
    assert 'pip install --no-cache-dir -r "binder/requirements.txt"' in out
    assert "requirements-dev.txt" not in out  # with binder/ present, root files are ignored
    assert "FROM " in out and "ENTRYPOINT" in out


# ------------------------------------------------------------------------- the environment


def _offline_requirements(dest: Path, package: Path) -> Path:
    """binder/requirements.txt without the unreachable index, `.` -> a copy of the package."""
    out = []
    for line in requirement_lines():
        if line.startswith(("--extra-index-url", "--index-url", "-i ")):
            continue
        out.append(str(package) if line == "." else line)
    path = dest / "requirements-offline.txt"
    path.write_text("\n".join(out) + "\n")
    return path


@pytest.fixture(scope="module")
def binder_venv(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("binder")
    package = package_copy(work)
    reqs = _offline_requirements(work, package)
    key = hashlib.sha256(
        (BINDER / "requirements.txt").read_bytes() + project_table(ROOT / "pyproject.toml").encode()
        + sys.version.encode()
    ).hexdigest()[:16]
    cache = cache_root()
    cache.mkdir(parents=True, exist_ok=True)
    venv = cache / f"binder-venv-{key}"
    python = venv / "bin" / "python"
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test runs never build the same venv at once
        fresh = os.environ.get("NBPROF_FRESH_BINDER_VENV") == "1"
        if fresh or not (venv / ".complete").exists():
            shutil.rmtree(venv, ignore_errors=True)
            for old in cache.glob("binder-venv-*"):  # one cached venv at a time
                shutil.rmtree(old, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
            # what Binder installs, then what its base image has (ipykernel)
            pip_install(python, "-r", str(reqs))
            pip_install(python, "ipykernel")
            (venv / ".complete").write_text(key)
        else:  # the dependencies are cached; nbprof itself always comes from the working tree
            pip_install(python, "--no-deps", "--force-reinstall", str(package))
    return python


@pytest.mark.slow
def test_binder_environment_has_cpu_torch_and_the_shipped_traces(binder_venv, tmp_path):
    code = (
        "import torch, nbprof, pathlib\n"
        "from importlib.resources import files\n"
        "data = files('nbprof') / 'data'\n"
        "names = sorted(p.name for p in data.iterdir() if p.name.endswith('.trace.json.gz'))\n"
        "p = nbprof.load_trace(data / 'cnn_train_cuda.trace.json.gz')\n"
        "print(torch.__version__, torch.cuda.is_available(), len(names), p.summary.has_device)\n"
        "print(pathlib.Path(nbprof.__file__).parent)\n"
        "import lightning, accelerate\n"  # notebook 08's frameworks
        "print(lightning.__version__, accelerate.__version__, type(nbprof.lightning.Profiler()).__mro__[2].__module__)\n"
    )
    result = subprocess.run([str(binder_venv), "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env=without_pythonpath())
    assert result.returncode == 0, result.stderr[-3000:]
    first, where, frameworks = result.stdout.split("\n")[:3]
    version, cuda, n_traces, has_device = first.split()
    assert version.endswith("+cpu") and cuda == "False"
    assert n_traces == "4" and has_device == "True"
    assert "site-packages" in where  # the installed package, not the working tree
    assert frameworks.split()[2] == "lightning.pytorch.profilers.profiler"  # a Lightning profiler of that package


MAGIC_CELLS = [
    "%load_ext nbprof",
    "%%torchprof --memory -o prof\nimport torch\nx = torch.randn(64, 64)\nfor _ in range(3):\n    y = (x @ x).relu().sum()",
    "%%cprofile -q -o cp\nsorted(str(i) for i in range(2000))",
    "import sys, nbprof\nprint(sys.executable)\nprint(nbprof.__file__)\n"
    "print(int(prof.key_averages().set_index('name').loc['aten::mm', 'count']), int(cp.stats['ncalls'].sum()) > 2000)",
]


@pytest.mark.notebook
@pytest.mark.slow
def test_binder_kernel_runs_the_magics(binder_venv, tmp_path):
    """A Jupyter kernel from the Binder environment starts, loads nbprof and profiles a cell: the
    report and its live timeline (a widget, its static drawing beside it) come back as a notebook
    shows them."""
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    spec = tmp_path / "kernels" / "binder"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(binder_venv), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Binder environment", "language": "python",
    }))
    km = KernelManager(kernel_name="binder", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in MAGIC_CELLS]
    NotebookClient(nb, km=km, timeout=300, resources={"metadata": {"path": str(tmp_path)}}).execute(env=without_pythonpath())
    report, timeline = [o for o in nb.cells[1].outputs if o.output_type in ("display_data", "execute_result")]
    assert report.data["text/plain"].startswith("torch profile")
    assert 'class="nbprof-report"' in report.data["text/html"]
    assert timeline.data["text/plain"].startswith("Timeline:")
    # in a kernel the timeline is the live widget (anywidget is in the Binder environment), with the
    # static drawing for where no kernel answers
    assert "application/vnd.jupyter.widget-view+json" in timeline.data
    assert "<svg" in timeline.data["text/html"]
    models = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"].values()
    assert any(m["model_name"] == "AnyModel" and "spec" in m["state"] for m in models)
    executable, where, counts = nb.cells[3].outputs[0].text.splitlines()
    assert executable == str(binder_venv)  # the kernel is the Binder environment's Python
    assert "site-packages" in where  # with nbprof installed there, not the working tree
    assert counts == "3 True"
