"""Surviving mutants of seed 73 in the Steps tab (``views.tabs.steps.render``): the table of
recorded steps shows its "GPU time" and "Kernels" columns whenever a step ran any device work,
however short (a step of 1 µs or less of kernel time is still a step that used the GPU)."""

from __future__ import annotations

import re

import pytest

from .synthetic import training_loop


def _steps_table(html: str) -> tuple[list[str], list[list[str]]]:
    """The headers and body cells of the Steps tab's first table (the steps, one row each)."""
    html = html[:html.index("</table>", html.index("<thead>"))]
    head = html[html.index("<thead>"):html.index("</thead>")]
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", head)
    body = html[html.index("<tbody>", html.index("</thead>")):]
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", body)]
    return headers, rows


@pytest.mark.parametrize(("kernel_us", "shown"), [(1.0, "1.0 µs"), (0.5, "0.5 µs")])
def test_a_step_whose_kernels_ran_one_microsecond_or_less_is_shown_with_its_gpu_time(tmp_path, kernel_us, shown):
    """Three ProfilerSteps of 1 ms around a hand-made loop whose one kernel a step runs
    ``kernel_us`` (1 µs, then 0.5 µs) on cuda:0: the Steps table has the "GPU time" and "Kernels"
    columns, each step's row holding that kernel's time and one kernel."""
    from nbprof.views.tabs.steps import render

    t = training_loop(3, kernel_us=kernel_us)
    for i in range(3):
        t.annotation(f"ProfilerStep#{i}", i * 1000.0, 1000.0)
    headers, rows = _steps_table(render(t.load(tmp_path).report()))
    assert headers == ["Step", "Duration", "Self CPU", "Ops", "GPU time", "Kernels", "Top op", "Top op time"]
    assert [r[0] for r in rows] == ["0", "1", "2"]
    assert {(r[headers.index("GPU time")], r[headers.index("Kernels")]) for r in rows} == {(shown, "1")}
