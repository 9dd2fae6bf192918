"""What seed 69's sample of mutants (docs/testing.md) showed no test held: a folder's collectives
whose calls sit in the first row of their rank's timeline (a rank whose only thread is gloo's), the
session's Dask client found by the loader, and which side of a comparison the error names."""

from __future__ import annotations

import cProfile

import pytest

import nbprof
from nbprof.errors import OptionError

from .synthetic import Trace


def test_collectives_in_each_ranks_first_row_are_linked(tmp_path):
    """Two ranks whose one thread runs two ``gloo:all_reduce`` ranges and nothing else: rank 0 at 25
    and 1,025 µs, rank 1 at 65 and 1,025 µs (as written in the files). Each rank has one row (its
    thread), so every call sits in that rank's first row, the stacked view's rows 0 and 1. By hand:
    2 collectives x 2 ranks = 4 links, at 0 and 40 µs (#0), 1,000 and 1,000 µs (#1) from the
    earliest event; rank 1 arrived last at #0 (40 µs late), and #1 has no last arrival. (Dropping
    the calls in a rank's row 0 drew no link at all.)"""
    for r, first in ((0, 25.0), (1, 65.0)):
        t = Trace(rank=r)
        t.annotation("gloo:all_reduce", first, 300.0)
        t.annotation("gloo:all_reduce", 1025.0, 120.5)
        t.write(tmp_path / f"host_{r}.pt.trace.json")
    view = nbprof.load_trace(tmp_path, workers=0, progress=False).timeline_view()
    links = view.data.links
    assert links is not None and len(links) == 4
    got = sorted((int(g), int(p), int(row), float(x), bool(last))
                 for g, p, row, x, last in zip(links["group"], links["part"], links["row"], links["x_us"],
                                               links["last"]))
    assert got == [(0, 0, 0, 0.0, False), (0, 1, 1, 40.0, True), (1, 0, 0, 1000.0, False), (1, 1, 1, 1000.0, False)]
    svg = view.svg()
    assert "<polyline" in svg and "rank 1 arrived last" in svg


def test_the_sessions_dask_client_is_the_active_one():
    """With a Dask client open in this process (dask.distributed imported), ``active_dask_client``
    is that client, the one ``load_trace(folder)`` uses when given none; once it is closed, None.
    (Reading "distributed imported" the wrong way round gave None with the client open.)"""
    distributed = pytest.importorskip("distributed")
    from nbprof.cluster.workers import active_dask_client

    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as client:
        assert active_dask_client() is client
    assert active_dask_client() is None


def test_compare_names_the_side_it_cannot_read():
    """A profile before and an int after: the error says "after" (and the type it got), in the words of compare's
    signature, so the user knows which argument to fix; a list before: "before"."""
    before = cProfile.Profile()
    with pytest.raises(OptionError, match=r"^compare: after is of type int; pass a TorchProfile"):
        nbprof.compare(before, 3)
    with pytest.raises(OptionError, match=r"^compare: before is of type list; pass a TorchProfile"):
        nbprof.compare([before], before)
