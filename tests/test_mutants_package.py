"""Tests written for the survivors of the first fresh sample of the whole package (issue 38,
seed 51, 2026-11-29; docs/testing.md "Mutation score"). Each was run on its mutant and fails
there; the sample's score was measured before they were written."""

from __future__ import annotations

import re

import pandas as pd


def test_htas_idle_breakdown_table_has_htas_categories_per_stream():
    """The HTA idle table of the Ranks tab: a column per HTA idle category (host_wait,
    kernel_wait, other) under its own header, after the (rank, device, stream) it is for; a
    category a stream never had shows 0. Hand-made rows: rank 0's stream waited on the host 1.5 ms
    and on kernels 20 µs. (Left: the table also lists (rank, device, stream) combinations no rank
    had, zeros, docs/testing.md; this test does not pin the rows after the first.)"""
    from nbprof.views.tabs.ranks import hta_idle_html

    rows = pd.DataFrame({"rank": [0, 0, 1], "device": ["cuda:0", "cuda:0", "cuda:1"], "stream": [7, 7, 7],
                         "idle_category": ["host_wait", "kernel_wait", "host_wait"],
                         "idle_time_us": [1500.0, 20.0, 250.0]})
    html = hta_idle_html(rows)
    head = html[html.index("<thead>"):html.index("</thead>")]
    assert re.findall(r"<th[^>]*>([^<]*)</th>", head) == ["Rank", "Device", "Stream", "Host wait", "Kernel wait",
                                                          "Other"]
    body = html[html.index("<tbody>", html.index("</thead>")):]
    first = re.findall(r"<td[^>]*>([^<]*)</td>", re.findall(r"<tr>(.*?)</tr>", body)[0])
    assert first == ["0", "cuda:0", "7", "1.50 ms", "20.0 µs", "0"]
    assert hta_idle_html(rows.iloc[:0]) == ""
