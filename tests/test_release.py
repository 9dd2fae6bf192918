"""Ready to publish (issue 35): what a release needs, checked as the publishing workflow checks it
(docs/releasing.md).

The slow test builds the sdist and the wheel from a copy of the checkout with ``python -m build``,
runs the tools PyPI's users rely on (twine, check-wheel-contents, validate-pyproject) and installs
the wheel into a fresh venv with its dependencies from the index, where the command, the
extension and a ``%%cprofile`` cell must work in a real IPython shell, and ``load_trace`` on a
trace the package ships, with no torch installed.
The fast tests read the files: one source for the version, the changelog's format, the package's
links, the workflow.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from datetime import date
from email.parser import Parser
from pathlib import Path

import pytest

from .conftest import without_pythonpath

ROOT = Path(__file__).resolve().parent.parent
REPO = "https://github.com/nbprof/nbprof"
DOCS = "https://nbprof.readthedocs.io"
RELEASE_TOOLS = ["build", "twine", "check-wheel-contents", "validate-pyproject"]


def _pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _version_in_source() -> str:
    """``__version__`` as nbprof/__init__.py assigns it (read, not imported)."""
    tree = ast.parse((ROOT / "nbprof" / "__init__.py").read_text(encoding="utf-8"))
    [value] = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
               and [getattr(t, "id", None) for t in node.targets] == ["__version__"]]
    return value


# ------------------------------------------------------------------------------------- the files


def test_the_version_has_one_source():
    """pyproject.toml names no version: setuptools reads nbprof/__init__.py's (statically), the
    installed package's metadata says the same, and so does the changelog's newest release."""
    project = _pyproject()
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "nbprof.__version__"}
    import nbprof

    version = _version_in_source()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version) and nbprof.__version__ == version
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert released[0] == version


def test_the_changelog_keeps_a_changelog():
    """keepachangelog.com 1.1.0: '# Changelog', an Unreleased section first, then versions newest
    first with ISO dates, only its six kinds of change, each with entries, and a link per heading."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n")
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    headings = [s.split("\n", 1)[0] for s in sections]
    assert headings[0] == "[Unreleased]"
    versions = []
    for heading in headings[1:]:
        m = re.fullmatch(r"\[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})", heading)
        assert m, heading
        versions.append((tuple(map(int, m.groups()[:3])), date.fromisoformat(m.group(4))))
    assert versions and versions == sorted(versions, reverse=True)
    for section in sections:
        kinds = re.findall(r"^### (.+)$", section, re.M)
        assert kinds and set(kinds) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, kinds
        for part in re.split(r"^### .+$", section, flags=re.M)[1:]:
            assert re.search(r"^- \S", part, re.M), section[:60]  # entries under each kind
    links = dict(re.findall(r"^\[([^\]]+)\]: (\S+)$", text, re.M))
    assert {h.split("]")[0][1:] for h in headings} == set(links) - {"Keep a Changelog", "Semantic Versioning"}
    assert all(url.startswith(REPO) for name, url in links.items() if name[0].isdigit() or name == "Unreleased")
    # this round's work is listed until it is released
    unreleased = sections[0]
    for capability in ("--lines", "load_prof", "nbprof view", "Windows", "macOS", "mps", "documentation site"):
        assert capability in unreleased, capability


def test_the_package_links_to_its_docs_changelog_and_issues():
    urls = _pyproject()["project"]["urls"]
    assert urls["Homepage"] == REPO and urls["Issues"] == f"{REPO}/issues"
    assert urls["Documentation"] == DOCS
    assert urls["Changelog"] == f"{REPO}/blob/main/CHANGELOG.md" and (ROOT / "CHANGELOG.md").is_file()


def test_the_release_tools_are_in_the_test_extra():
    extra = [re.split(r"[<>=\[ ;]", r, maxsplit=1)[0].lower() for r in _pyproject()["project"]["optional-dependencies"]["test"]]
    assert set(RELEASE_TOOLS) <= set(extra)


def test_a_tag_publishes_with_trusted_publishing_after_the_checks():
    """.github/workflows/publish.yml: on a pushed tag v*, a build job runs the checks of the slow
    test below and keeps the files; the publish job needs it, runs in the environment 'pypi' with
    id-token: write, and uploads with pypa's action and no token. docs/releasing.md says it has
    not run yet."""
    yaml = pytest.importorskip("yaml")
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "publish.yml").read_text(encoding="utf-8"))
    on = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert on == {"push": {"tags": ["v*"]}}
    assert flow["permissions"] == {"contents": "read"}  # nothing else may write
    build, publish = flow["jobs"]["build"], flow["jobs"]["publish"]
    commands = "\n".join(step.get("run", "") for step in build["steps"])
    for command in ("validate-pyproject pyproject.toml", "python -m build", "twine check --strict dist/*",
                    "check-wheel-contents dist/*.whl", "python -m venv", "nbprof --help", "load_ext", "%%cprofile",
                    'test -f "dist/nbprof-${GITHUB_REF_NAME#v}-py3-none-any.whl"'):
        assert command in commands, command
    assert publish["needs"] == "build"
    assert publish["environment"]["name"] == "pypi"
    assert publish["permissions"] == {"id-token": "write"}
    [upload] = [s for s in publish["steps"] if s.get("uses", "").startswith("pypa/gh-action-pypi-publish@")]
    assert not set(upload.get("with", {})) & {"password", "user"}  # trusted publishing: no token
    releasing = (ROOT / "docs" / "releasing.md").read_text(encoding="utf-8")
    assert "configured but has not run yet" in releasing and "environment `pypi`" in releasing


def test_ci_runs_the_slow_tier_that_holds_the_release_test():
    """.ci/run is scripts/test.sh --all, whose pytest selects no marker: the slow test below runs."""
    assert "scripts/test.sh --all" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    all_tier = script.split('if [ "$all" = 0 ]; then', 1)[1].split("fi\n", 1)[1]
    [run] = [line for line in all_tier.splitlines() if "-m pytest" in line]
    assert run.startswith(".venv/bin/python -m pytest tests ") and " -m " not in run.replace("python -m pytest", "")


# ------------------------------------------------------------------------------------- the build


def _checkout_copy(dest: Path) -> Path:
    """The files a clone has (tracked, or new and not ignored), copied: building writes build/
    and *.egg-info next to pyproject.toml."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():  # (a file deleted and not yet committed is listed too)
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def _run(*args: str | Path, timeout: float = 900, cwd: Path | None = None) -> str:
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                       env=without_pythonpath())
    assert r.returncode == 0, f"{' '.join(map(str, args))}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


CELL_CHECK = r'''
import importlib.metadata, importlib.util, sys
from IPython.terminal.interactiveshell import TerminalInteractiveShell

assert importlib.util.find_spec("torch") is None, "torch came with the base install"
shell = TerminalInteractiveShell.instance()
shell.run_line_magic("load_ext", "nbprof")
print("after load_ext:", sorted(m for m in ("torch", "plotly", "pandas") if m in sys.modules))
cell = "%%cprofile\ndef work(n):\n    return sum(range(n))\nfor _ in range(7):\n    work(1000)\n"
result = shell.run_cell(cell)
print("success:", result.success)
import nbprof
print("version:", nbprof.__version__, importlib.metadata.version("nbprof"))

# a recorded trace the package ships (the reader: msgspec, numpy, pandas), its kernels counted
# in the file by json against key_averages()' kernel rows
import gzip, json
from importlib.resources import files
trace = files("nbprof") / "data" / "two_streams.trace.json.gz"
with gzip.open(trace) as f:
    in_file = sum(1 for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel")
k = nbprof.load_trace(trace).key_averages()
print("kernels:", in_file, int(k.loc[k["kind"] == "kernel", "count"].sum()))
'''


@pytest.mark.slow  # 70-75 s with pip's cache warm (2 shared cores): an isolated build (pip fetches setuptools), a fresh venv with nbprof's dependencies
def test_the_sdist_and_wheel_pass_the_release_checks_and_install_in_a_fresh_venv(tmp_path):
    version = _version_in_source()
    src = _checkout_copy(tmp_path / "src")
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "build", "--outdir", dist, src)  # the sdist, then the wheel from it
    sdist, wheel = dist / f"nbprof-{version}.tar.gz", dist / f"nbprof-{version}-py3-none-any.whl"
    assert sorted(dist.iterdir()) == sorted([sdist, wheel])

    assert _run(sys.executable, "-m", "validate_pyproject", "pyproject.toml", cwd=src).strip() == "Valid file: pyproject.toml"
    out = _run(sys.executable, "-m", "twine", "check", "--strict", sdist, wheel)
    assert out.count("PASSED") == 2 and "WARNING" not in out
    assert _run(sys.executable, "-m", "check_wheel_contents", wheel).strip() == f"{wheel}: OK"

    # the wheel holds the package's tracked files, nothing more (its data folder's README is a
    # note for the repository's readers); the sdist holds them too, and what builds them
    package = {str(p.relative_to(src)) for p in (src / "nbprof").rglob("*") if p.is_file()} - {"nbprof/data/README.md"}
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = f"nbprof-{version}.dist-info"
        meta = Parser().parsestr(z.read(f"{info}/METADATA").decode())
    assert {n for n in names if not n.startswith(info)} == package
    with tarfile.open(sdist) as t:
        in_sdist = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert package | {"pyproject.toml", "README.md", "LICENSE", "PKG-INFO"} <= in_sdist
    assert meta["Version"] == version and meta["Name"] == "nbprof"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert urls["Documentation"] == DOCS and urls["Changelog"] == f"{REPO}/blob/main/CHANGELOG.md"
    assert not [r for r in meta.get_all("Requires-Dist") if r.startswith("torch") and "extra ==" not in r]

    # a fresh venv (no system packages), the wheel's dependencies from the index, as a user installs
    fresh = tmp_path / "fresh"
    venv.create(fresh, with_pip=True)
    python = fresh / "bin" / "python"
    _run(python, "-m", "pip", "install", "-q", wheel)
    help_text = _run(fresh / "bin" / "nbprof", "--help", cwd=tmp_path)
    assert help_text.startswith("usage: nbprof ") and "{torch,cprofile" in help_text
    out = _run(python, "-c", CELL_CHECK, cwd=tmp_path)
    # %load_ext imports neither torch, plotly nor pandas; the cell's report: work called 7 times,
    # sum 7 times (by hand: 14 calls), each a row of the table
    assert "after load_ext: []" in out and "success: True" in out, out
    assert "cProfile: 14 function calls" in out, out
    calls = {name: [line.split()[0] for line in out.splitlines() if line.endswith(name)]
             for name in ("In [1]:2(work)", "{built-in method builtins.sum}")}
    assert calls == {"In [1]:2(work)": ["7"], "{built-in method builtins.sum}": ["7"]}, out
    assert f"version: {version} {version}" in out
    [kernels] = [line.split()[1:] for line in out.splitlines() if line.startswith("kernels:")]
    assert kernels[0] == kernels[1] and int(kernels[0]) > 0, out
