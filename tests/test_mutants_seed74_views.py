"""Tests that kill surviving mutmut mutants (seed 74) of nbprof.views: the cProfile text report's
filename:lineno(function) column keeps names up to 70 characters and cuts longer ones there."""

from __future__ import annotations

import pstats

from nbprof.model import PythonProfile


def _text_locations(functions: list[str]) -> list[str]:
    """The last column of each function's row in the cProfile text report of ``functions``,
    each called once by main.py's <module>."""
    main = ("main.py", 1, "<module>")
    raw = {main: (1, 1, 0.5, 0.5 + 0.1 * len(functions), {})}
    for i, fn in enumerate(functions):
        raw[("main.py", 10 * (i + 1), fn)] = (1, 1, 0.1, 0.1, {main: (1, 1, 0.1, 0.1)})
    text = PythonProfile(raw).report(limit=0).text()
    return [line.split("  ")[-1] for line in text.splitlines() if line.startswith(" ") and "main.py:" in line]


# kills nbprof.views.tabs.functions.x_function_columns__mutmut_100
def test_text_report_cuts_function_locations_at_70_characters():
    fits = "f" * (70 - len("main.py:10()"))  # its location is exactly 70 characters
    cut = "g" * (80 - len("main.py:20()"))  # 80 characters
    full_fits = pstats.func_std_string(("main.py", 10, fits))
    full_cut = pstats.func_std_string(("main.py", 20, cut))
    assert len(full_fits) == 70 and len(full_cut) == 80
    shown = _text_locations([fits, cut])
    assert full_fits in shown  # whole: no cut below 70
    assert full_cut[:67] + "..." in shown  # cut at 70, as torch's tables cut: 67 characters and "..."
    assert full_cut not in shown
