"""The static timeline SVG at a height the caller asks for (mutation seed 73, ``timeline_svg``).

With ``height`` given, the image is that tall and the levels are scaled to share the space between
the header and the time axis: every rectangle and the axis stay inside the image, however many
levels there are (a profile with one level hides a row height multiplied instead of divided by the
level count, so these use two and three levels).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

SVG = "{http://www.w3.org/2000/svg}"


def _nested_trace(levels: int):
    """One CPU thread, ``levels`` ops each inside the one before (one level each), all wide."""
    from .synthetic import Trace

    t = Trace()
    for k in range(levels):
        t.op(f"aten::level{k}", 10.0 * k, 1000.0 - 20.0 * k)
    return t


@pytest.mark.parametrize("levels", [2, 3])
@pytest.mark.parametrize("height", [240, 300, 600])
def test_a_timeline_svg_of_a_given_height_keeps_every_level_and_the_axis_inside_the_image(tmp_path, levels, height):
    from nbprof.views.timeline import timeline_svg

    p = _nested_trace(levels).load(tmp_path)
    root = ET.fromstring(timeline_svg(p, width=1000, height=height))
    assert float(root.get("height")) == height
    assert root.get("viewBox") == f"0 0 1000 {height}"

    # the ops' rectangles: the wide ones are <rect>s with a tooltip naming the op
    boxes = {}
    for r in root.iter(SVG + "rect"):
        title = r.find(SVG + "title")
        if title is not None and title.text.startswith("aten::level"):
            boxes[title.text.split("\n")[0]] = (float(r.get("y")), float(r.get("height")))
    assert sorted(boxes) == [f"aten::level{k}" for k in range(levels)]
    axis = [float(line.get("y1")) for line in root.iter(SVG + "line") if line.get("stroke") == "#aaa"]
    assert len(axis) == 1 and 0 < axis[0] < height  # the time axis is drawn inside the image

    tops = [boxes[f"aten::level{k}"][0] for k in range(levels)]
    assert tops == sorted(tops) and len(set(tops)) == levels  # each level below its parent
    heights = {h for _, h in boxes.values()}
    assert len(heights) == 1  # the levels share the space evenly
    for y, h in boxes.values():
        assert 0 < y and y + h <= axis[0] <= height  # every level above the axis, inside the image
