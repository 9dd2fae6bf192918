"""nbprof as a package: what a wheel built from the repository carries (the license, complete
metadata, a description whose links work off GitHub), and what installing it gives (the
``nbprof`` command). The README's install lines are the ones that work today."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from .conftest import package_copy, without_pythonpath

ROOT = Path(__file__).resolve().parent.parent


def _links(markdown: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", markdown)


def test_readme_links_work_off_github():
    """The README is the package's description on an index, where a relative link goes nowhere."""
    links = _links((ROOT / "README.md").read_text(encoding="utf-8"))
    assert links
    relative = [link for link in links if not link.startswith(("https://", "http://", "#"))]
    assert relative == []


def test_readme_installs_it_the_way_it_can_be_installed():
    """No index has nbprof yet: the first command the README gives installs it from GitHub."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    assert first.strip() == 'pip install "nbprof[torch] @ git+https://github.com/nbprof/nbprof"'
    for path in (ROOT / "README.md", ROOT / "notebooks" / "README.md"):
        # "pip install nbprof[torch]" asks an index; "nbprof[torch] @ git+..." names where it is
        assert not re.search(r"pip install [\"']?nbprof\[[^\]]*\](?!\s*@)", path.read_text(encoding="utf-8")), path


def test_the_docs_example_output_uses_nbprofs_units():
    """The example report's memory columns (docs/getting-started.md, once README's) read as nbprof
    prints bytes (format.fmt_bytes)."""
    from nbprof.format import fmt_bytes

    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    block = text.split("torch profile: 1,679 events", 1)[1].split("rows (--limit 0 shows all)", 1)[0]
    sizes = re.findall(r"(-?\d+(?:\.\d+)?) ([KMGT]i?B|B)\b", block)
    assert len(sizes) >= 16
    scale = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
    for number, unit in sizes:
        assert unit in scale, unit
        assert fmt_bytes(float(number) * scale[unit]) == f"{number} {unit}"


@pytest.mark.slow  # ~30-60 s: builds a wheel (pip fetches setuptools) and a fresh venv
def test_a_wheel_carries_the_license_and_installs_the_command(tmp_path):
    src = package_copy(tmp_path)
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
                       capture_output=True, text=True, timeout=600, env=without_pythonpath())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    [wheel] = dist.glob("nbprof-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        [info] = {n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")}
        license_files = [n for n in names if n.startswith(f"{info}/licenses/")]
        assert license_files == [f"{info}/licenses/LICENSE"]
        license_text = z.read(license_files[0]).decode()
        meta = Parser().parsestr(z.read(f"{info}/METADATA").decode())
        entry_points = z.read(f"{info}/entry_points.txt").decode()
    assert license_text.startswith("BSD 3-Clause License") and "nbprof developers" in license_text
    assert license_text == (ROOT / "LICENSE").read_text()
    assert meta["License-Expression"] == "BSD-3-Clause"
    assert meta["Requires-Python"] == ">=3.10"  # no upper cap
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert {"Homepage", "Documentation", "Changelog", "Source", "Issues"} <= set(urls)
    # the docs site on Read the Docs, everything else on GitHub
    assert urls.pop("Documentation") == "https://nbprof.readthedocs.io"
    assert all(u.startswith("https://github.com/nbprof/nbprof") for u in urls.values())
    classifiers = meta.get_all("Classifier")
    assert "Programming Language :: Python :: 3.13" in classifiers and len(classifiers) >= 15
    description = meta.get_payload()
    assert "pip install" in description and not [
        link for link in _links(description) if not link.startswith(("https://", "http://", "#"))]
    assert "nbprof = nbprof.cli:main" in entry_points

    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    # the command needs no dependency to print its help; the dependencies are the metadata's above
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
                       capture_output=True, text=True, timeout=300, env=without_pythonpath())
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([str(venv / "bin" / "nbprof"), "--help"], capture_output=True, text=True, timeout=120,
                       env=without_pythonpath(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: nbprof ") and "{torch,cprofile,view}" in r.stdout
    r = subprocess.run([str(venv / "bin" / "nbprof"), "torch", "--help"], capture_output=True, text=True,
                       timeout=120, env=without_pythonpath(), cwd=tmp_path)
    assert r.returncode == 0 and "--memory" in r.stdout and "--html PATH" in r.stdout
    code = ("import importlib.metadata as m; d = m.distribution('nbprof'); "
            "print([str(f) for f in d.files if 'LICENSE' in str(f)]); print(d.metadata['License-Expression'])")
    r = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=120,
                       env=without_pythonpath(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == [f"['{info}/licenses/LICENSE']", "BSD-3-Clause"]
