"""Surviving mutants of seed 73 in ``nbprof.collect``: ``CompileWatch.end`` after a watch that
could not begin.

A session calls ``CompileWatch.begin()`` before the cell and ``end()`` after it. When ``begin``
fails it undoes itself (it calls ``end``); when that ``end`` fails as well, the watch must still
count as stopped, so the session's own ``end()`` after the cell leaves the ``torch.__trace``
logger as the cell left it (its level was put back already, and the cell may have changed it).
"""

from __future__ import annotations

import logging
import sys
import types


class _UnreadableCounters(dict):
    """Dynamo's counters as a compilation on another thread leaves them mid-update: not empty,
    and reading them raises."""

    def items(self):
        raise RuntimeError("dictionary changed size during iteration")


def test_a_watch_that_failed_to_begin_and_to_end_leaves_the_loggers_level_the_cell_set(monkeypatch):
    from nbprof.collect.compile_state import TRACE_LOGGER, CompileWatch

    utils = types.ModuleType("torch._dynamo.utils")
    utils.counters = _UnreadableCounters(stats={"calls_captured": 1})
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", utils)
    logger = logging.getLogger(TRACE_LOGGER)
    handlers, level = list(logger.handlers), logger.level
    logger.setLevel(logging.WARNING)
    try:
        w = CompileWatch()
        w.begin()  # reading the counters fails: begin undoes itself, and that end fails the same way
        assert logger.level == logging.WARNING and logger.handlers == handlers  # the watch is off
        logger.setLevel(logging.INFO)  # the cell sets the trace logger's level
        w.end()  # the session's end after the cell
        assert logger.level == logging.INFO  # not the level the watch found at begin: that was put back
        assert logger.handlers == handlers
        assert w.result() is None
    finally:
        logger.setLevel(level)
