"""What seed 67's sample of mutants (docs/testing.md) showed no test held outside the analyses and
views: the subcommands' usage line as the command line's doc writes it, ``nbprof view`` of a
``.prof`` file against pstats reading the same file, how many jobs a pool whose worker died left
undone (counted by hand), and the controls panel's toggles reacting to a click only (read back
through ipywidgets' own traits)."""

from __future__ import annotations

import cProfile
import operator
import os
import pstats

import pytest

from nbprof import cli

from .conftest import needs_torch
from .test_mutants_untested import panel  # noqa: F401  (the fixture: a fresh panel, put back after)

# ---------------------------------------------------------------- cli.build_parser: the usage line


@pytest.mark.parametrize("subcommand", ["torch", "cprofile"])
def test_a_subcommands_help_says_its_usage_as_the_doc_writes_it(subcommand, capsys):
    """``nbprof torch --help``: argparse's help, with the usage line the command line's doc gives
    (``[options] (script.py | -m module) [args ...]``), not argparse's list of every flag."""
    with pytest.raises(SystemExit) as e:
        cli.main([subcommand, "--help"])
    assert e.value.code == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"usage: {cli.PROG} {subcommand} [options] (script.py | -m module) [args ...]"


# ---------------------------------------------------------------- cli.view: a .prof file


def _busy(n: int) -> int:
    return sum(i * i for i in range(n))


def test_view_of_a_prof_file_prints_its_functions_as_pstats_reads_them(tmp_path, capsys):
    """``nbprof view run.prof`` (a file ``cProfile`` dumped) reads it as cProfile's stats: it exits
    0 and its table names the function pstats finds in the same file, with pstats' call count."""
    path = tmp_path / "run.prof"
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(3):
        _busy(1000)
    prof.disable()
    prof.dump_stats(str(path))
    stats = pstats.Stats(str(path)).stats
    (key,) = [k for k in stats if k[2] == "_busy"]
    assert stats[key][1] == 3  # pstats: three calls

    status = cli.main(["view", "--no-html", str(path)])
    out = capsys.readouterr()
    assert status == 0, out.err
    rows = [line for line in out.out.splitlines() if "_busy" in line]
    assert rows and rows[0].split()[0] == "3", out.out


# ---------------------------------------------------------------- cluster.workers: a worker that died


def test_a_dead_worker_counts_only_the_unfinished_jobs_as_left():
    """One worker, two jobs run in order: ``abs(-3)`` finishes (its result comes back), then the
    worker exits (``os._exit(3)``) on the second. The pool's error, worded by ``died``, is told 1
    job left (the second), counted by hand: the finished one is not counted again."""
    from nbprof.cluster.workers import RankPool
    from nbprof.errors import TraceError

    told = []

    def died(death, left):
        told.append((death.code if death is not None else None, left))
        return f"died, {left} left"

    pool = RankPool(1, idle_s=None)
    got = []
    try:
        with pytest.raises(TraceError) as e:
            for i, result in pool.as_completed(operator.call, [(abs, -3), (os._exit, 3)], died=died):
                got.append((i, result))
    finally:
        pool.close()
    assert got == [(0, 3)]
    assert str(e.value) == "died, 1 left"
    assert told == [(3, 1)]


# ---------------------------------------------------------------- widgets.Controls: what a toggle follows


@needs_torch
def test_a_toggle_restyled_or_renamed_keeps_the_setting(panel):  # noqa: F811
    """The panel follows a toggle's value (a click) only: a toggle whose style, label or tooltip
    changes (any other trait ipywidgets reports) leaves the setting and the status as they were."""
    import nbprof

    c = nbprof.controls()
    toggles = list(c.widget.children[1].children)
    t_memory = toggles[1]
    before = c.widget.children[3].value
    assert (t_memory.value, panel.memory) == (False, False)
    t_memory.button_style = "info"
    t_memory.description = "Memory (costly)"
    t_memory.tooltip = "allocations"
    assert panel.memory is False and t_memory.value is False and t_memory.icon == ""
    assert c.widget.children[3].value == before
    t_memory.value = True  # a click still works
    assert panel.memory is True and t_memory.icon == "check"
