"""Every static drawing of a report (the inline SVGs: timeline, memory curve, snapshot chart,
segments, flame, the Ranks tab's breakdown, the data loading lanes) keeps what it draws inside its
own width and height: a tick, a label or a marker placed past the edge is cut off where the
drawing is shown (found so: the memory curve's last tick, "20 ms", sat at x=840 of a drawing 760
wide, half a step past the axis' end, and the snapshot chart's "0.6 ms" at 779).

Checked on every recorded trace here (the H100 runs, the wild ones, a live CPU run), folders of
ranks, the compiled run, CUDA memory snapshots and a .prof."""

from __future__ import annotations

import glob
import re
import xml.etree.ElementTree as ET

import pytest

import nbprof

from .conftest import DATA, TRACES, trace_path

NS = "{http://www.w3.org/2000/svg}"
# the attributes that place an element (a polygon's points and a path's d are checked as pairs)
_X, _Y = ("x", "x1", "x2", "cx"), ("y", "y1", "y2", "cy")


def drawings(html: str) -> list[str]:
    return re.findall(r'<svg xmlns="http://www.w3.org/2000/svg".*?</svg>', html, re.S)


def outside(svg: str) -> list[tuple]:
    """What the drawing places past its own edges (half a pixel of rounding allowed)."""
    root = ET.fromstring(svg)
    width, height = float(root.get("width")), float(root.get("height"))
    out = []

    def check(tag: str, what: str, v: float, limit: float, el: ET.Element) -> None:
        if v < -0.5 or v > limit + 0.5:
            out.append((tag, what, v, limit, "".join(el.itertext())[:40]))

    for el in root.iter():
        tag = el.tag.replace(NS, "")
        for names, limit in ((_X, width), (_Y, height)):
            for name in names:
                if el.get(name) is not None:
                    check(tag, name, float(el.get(name)), limit, el)
        if tag in ("polygon", "polyline") and el.get("points"):
            for pair in el.get("points").split():
                x, y = (float(v) for v in pair.split(","))
                check(tag, "points x", x, width, el)
                check(tag, "points y", y, height, el)
    return out


def torch_reports():
    paths = [trace_path(n) for n in TRACES] + [DATA / "baselines" / "live_cpu_training.trace.json.gz"]
    paths += sorted(glob.glob(str(DATA / "wild" / "*.json*")))
    return paths


@pytest.mark.parametrize("path", torch_reports(), ids=lambda p: str(p).rsplit("/", 1)[-1])
def test_a_traces_drawings_stay_inside(path):
    html = nbprof.load_trace(path).report().html(include_library=False)
    svgs = drawings(html)
    assert svgs
    assert [(i, o) for i, svg in enumerate(svgs) for o in outside(svg)] == []


def test_folders_compiled_runs_snapshots_and_prof_files(tmp_path):
    from .snapshots import hand_snapshot, simulated, write
    from .test_cluster_timeline import ddp, h100
    from .test_compile import RECORDED, Run

    profiles = {
        "ddp": nbprof.load_trace(ddp(tmp_path)),
        "h100 folder": nbprof.load_trace(h100(tmp_path)),
        "compiled": Run(RECORDED).profile(),
        "snapshot": nbprof.load_snapshot(write(hand_snapshot(), tmp_path / "hand.pickle")),
        "two devices": nbprof.load_snapshot(write(simulated(400, seed=3, devices=2, dropped=20), tmp_path / "two.pickle")),
        "prof": nbprof.load_prof(DATA / "baselines" / "course_bottleneck.prof"),
    }
    found = {}
    for name, p in profiles.items():
        svgs = drawings(p.report().html(include_library=False))
        assert svgs, name
        found[name] = [o for svg in svgs for o in outside(svg)]
    assert found == {name: [] for name in profiles}
