"""Run cProfile around a piece of code and turn its raw stats into tables.

cProfile's raw result is ``{(file, line, func): (primitive_calls, ncalls, tottime, cumtime,
callers)}`` where ``callers`` maps each caller to the same four numbers for that edge. The stats
table is that dict as rows (what ``pstats`` prints); the edges table is every caller -> callee
edge with its own numbers (what ``pstats.print_callers/print_callees`` print).

What cProfile sees: only the thread that runs the cell (Python < 3.12: ``sys.setprofile`` is
per thread; 3.12+: cProfile's ``sys.monitoring`` hooks also see other threads' calls, but time
them as if on one stack, which is wrong). Work in other threads or processes (DataLoader workers)
is not attributed to its functions; use ``%%torchprof`` for those.

Actions (Lightning's hooks, reported through ``begin_action`` / ``end_action``): one
``cProfile.Profile`` per action name, and one for the code outside every action; at each
boundary the current one is disabled and the innermost open action's enabled, as Lightning's
``AdvancedProfiler`` keeps a profile per action (which re-enables none when a nested action ends;
here the enclosing action's profile records again). So each call is counted once, in the
profile of the action that was innermost when it was made: the merged stats (the report's
totals, ``pstats``' own ``add`` of the profiles) have the call counts one profiler would have.
Times have one limit, said in the report: disabling a profile closes the calls still running
at that moment (cProfile's ``flush_unmatched``), so a function that was running when an action
began (``Trainer.fit``, the loops) is timed until then, and its own time after that is in no
profile.
"""

from __future__ import annotations

import _lsprof
import cProfile
import marshal
import numbers
import os
import sys
import threading
import time
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ProfilerBusyError, TraceError
from .collector import Collector, Takeover, code_sites
from .python_line_recorder import PythonLineRecorder
from .user_code import UserCode

__all__ = ["CProfileSession", "MergedProfile", "OUTSIDE_ACTIONS", "raw_stats", "raw_stats_of", "merge_raw", "stats_table", "edges_table", "STATS_COLUMNS", "EDGE_COLUMNS", "another_profiler_active",
           "ProfilerHookWatch", "read_prof_file", "is_pstats_head", "PROF_SUFFIXES", "without_own_frames",
           "note_wrapped"]

STATS_COLUMNS = (
    "function",
    "filename",
    "lineno",
    "ncalls",
    "primitive_calls",
    "tottime_s",
    "cumtime_s",
    "tottime_per_call_s",
    "cumtime_per_call_s",
)
EDGE_COLUMNS = (
    "caller_function",
    "caller_filename",
    "caller_lineno",
    "callee_function",
    "callee_filename",
    "callee_lineno",
    "ncalls",
    "primitive_calls",
    "tottime_s",
    "cumtime_s",
)

_NBPROF_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Calls nbprof itself makes while the profiler runs (starting/stopping it).
_OWN_BUILTINS = ("<method 'disable' of '_lsprof.Profiler' objects>",)
# (filename, first line, name) of the library functions nbprof wraps for a run (note_wrapped)
_WRAPPED_ORIGINALS: set[tuple[str, int, str]] = set()
# the profile of the code outside every action
OUTSIDE_ACTIONS = ""


def another_profiler_active() -> str | None:
    """Describe the profiler or tracer that holds the profiling hook, or None if it is free."""
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:  # Python 3.12+: cProfile claims sys.monitoring's PROFILER_ID
        tool = monitoring.get_tool(monitoring.PROFILER_ID)
        if tool is not None:
            return f"another profiling tool ({tool}) is already active"
    hook = sys.getprofile()
    if hook is not None:
        owner = getattr(hook, "__self__", hook)
        return f"another profiler is already active ({type(owner).__name__})"
    return None


class CProfileSession(Collector):
    """``begin()``, run the code, ``end()``; then ``result()`` (and ``raw``) is cProfile's stats
    dict, without nbprof's own frames.

    Python runs one profile function per thread (3.12+: one ``sys.monitoring`` profiler), so a
    profiler the code starts itself (a ``cProfile.Profile().enable()``, Lightning's advanced
    profiler, ``profile.Profile``, ``sys.setprofile``) replaces nbprof's, silently: on 3.11 the
    report then held only the calls before it, on 3.12+ the other one's ``enable()`` raised
    "Another profiling tool is already active" in the user's code. :class:`ProfilerHookWatch` sees
    them start (every one: before 3.12 through the audit event Python raises for any profile
    function, a C extension's too; from 3.12 only another cProfile can take cProfile's place):
    nbprof's cProfile ends there, the other one starts as it would without nbprof, and
    ``takeover`` says when. At the end the other one is left running if it still is.

    With actions reported (``begin_action`` / ``end_action``, see the module doc): ``by_action``
    holds each action's stats dict (``OUTSIDE_ACTIONS``: the code outside them),
    ``action_counts`` how many times each began, and ``raw`` their merge; nbprof's switches
    between its own profiles are not another profiler.
    """

    def __init__(self, lines: bool = False, shell: Any = None) -> None:
        self.profiler: Any = None  # the live cProfile.Profile; a MergedProfile once actions ran
        # --lines: hits and time per line of the user's code, followed beside cProfile
        self.lines: PythonLineRecorder | None = PythonLineRecorder(UserCode(shell)) if lines else None
        self.raw: dict[Any, Any] = {}
        self.by_action: dict[str, dict[Any, Any]] = {}
        self.action_counts: dict[str, int] = {}
        self._profiles: dict[str, cProfile.Profile] = {}  # per action, OUTSIDE_ACTIONS included
        self._open: list[str] = []  # the open actions, innermost last
        self._current: cProfile.Profile | None = None  # the enabled one
        self._running = False
        self._yielded = False
        self._own = False
        self._disabled = False
        self._began_at = 0.0
        self._watch = ProfilerHookWatch(self)

    def begin(self) -> None:
        busy = another_profiler_active()
        if busy:
            raise ProfilerBusyError(f"cannot start cProfile: {busy}; stop it first (e.g. its .disable())")
        # recorded before enable(): an interrupt right after enable() must still find it to stop
        self.profiler = self._current = cProfile.Profile()
        self._profiles = {OUTSIDE_ACTIONS: self.profiler}
        self._running = True
        self._watch.install()  # before enable(): nothing of it is recorded
        self._began_at = time.perf_counter()
        self._own = True  # nbprof's own enable() sets the profile function: not another profiler
        try:
            if self.lines is not None:  # before cProfile: starting it is not among the cell's calls
                self.lines.start()
            self.profiler.enable()
        except ValueError as e:  # Python 3.12+: "Another profiling tool is already active"
            self._stop_lines()
            self._watch.remove()
            self.profiler, self._current, self._running = None, None, False
            raise ProfilerBusyError(f"cannot start cProfile: {e}") from None
        except BaseException:
            self._stop_lines()
            self._watch.remove()
            self.profiler, self._current, self._running = None, None, False
            raise
        finally:
            self._own = False

    def step(self) -> None:
        """cProfile records every call, with no notion of steps: nothing to do (so a loop that
        calls ``nbprof.step()`` can be profiled with ``%%cprofile`` too)."""

    def toggle_cuda(self, on: bool) -> None:
        """cProfile records no CUDA activity: nothing to pause or resume."""

    def begin_action(self, name: str) -> None:
        """From now on, calls go to ``name``'s profile (see the module doc)."""
        if not self.live():
            return
        self._open.append(name)
        self.action_counts[name] = self.action_counts.get(name, 0) + 1
        self._switch(name)

    def end_action(self, name: str) -> None:
        """Calls go back to the enclosing action's profile (or the one outside every action)."""
        if not self.live() or name not in self._open:
            return
        at = len(self._open) - 1 - self._open[::-1].index(name)
        del self._open[at]
        self._switch(self._open[-1] if self._open else OUTSIDE_ACTIONS)

    def owns(self, profiler: Any) -> bool:
        """``profiler`` is one of this session's own profiles (enabling it is no takeover)."""
        return any(profiler is p for p in self._profiles.values())

    def _switch(self, name: str) -> None:
        profile = self._profiles.get(name)
        if profile is None:
            profile = self._profiles[name] = cProfile.Profile()
        if profile is self._current:
            return
        self._own = True  # nbprof's own disable() / enable(): not another profiler
        try:
            if self._current is not None:
                self._current.disable()
            self._current = profile
            profile.enable()
        finally:
            self._own = False

    def live(self) -> bool:
        """nbprof's cProfile is recording (started, not ended, not replaced)."""
        return self._running and not self._yielded and not self._own

    def hook_changing(self) -> None:
        """The thread's profile function is about to be replaced (Python < 3.12's audit event),
        by someone else unless nbprof is starting or stopping its own. Python refuses to set a
        profile function from inside this event ("Cannot install a profile function while
        another profile function is being installed"), so nbprof's cProfile is not disabled
        here: the new function simply replaces it; ``end`` disables it, keeping the other's."""
        if self.live() and threading.get_ident() == self._watch.thread:
            self._yield("sys.setprofile", time.perf_counter())

    def yield_to(self, by: str) -> None:
        """Another cProfile is starting (``by``: how): stop nbprof's first, so that its stats end
        there (the frames still running are closed at this moment). Before 3.12 another
        thread's profile function is its own: only this thread's counts."""
        if not self.live() or self._current is None:
            return
        if _SETPROFILE_REPLACES and threading.get_ident() != self._watch.thread:
            return
        now = time.perf_counter()
        self._yielded = True
        self._current.disable()  # first: what follows is nbprof's, not the cell's
        self._disabled = True
        self._yield(by, now)

    def _yield(self, by: str, now: float) -> None:
        self._yielded = True
        self.takeover = Takeover(by=by, at_s=now - self._began_at, sites=code_sites((_NBPROF_DIR,)))

    def end(self) -> None:
        if not self._running or self.profiler is None:
            return
        current = self._current if self._current is not None else self.profiler
        self._own = True  # nbprof's own disable() clears the profile function
        try:
            if not self._yielded:
                # no other call first: cProfile would record it among the cell's calls
                current.disable()
            else:
                assert self.takeover is not None
                self.takeover.still_running = _hook_owner(current) is not None
                if not self._disabled:  # replaced through sys.setprofile: still enabled underneath
                    _disable_keeping_the_others(current)
        finally:
            self._stop_lines()  # after cProfile: stopping it is not among the cell's calls
            self._running = False
            self._own = False
            self._current = None
            self._open = []
            self._watch.remove()
        if len(self._profiles) == 1:
            # its stats as create_stats makes them, without create_stats' disable() first: the
            # profiler is off already, and before 3.12 disable() clears the thread's profile
            # function whoever set it (a hook the cell set and left running would be lost)
            self.profiler.snapshot_stats()
            self.raw = without_own_frames(raw_stats(self.profiler))
            return
        names = list(self._profiles)
        raws = raw_stats_of([self._profiles[n] for n in names])
        self.by_action = {n: without_own_frames(r) for n, r in zip(names, raws)}
        self.raw = merge_raw(self.by_action.values())
        self.profiler = MergedProfile(self.raw, self._profiles)

    def _stop_lines(self) -> None:
        if self.lines is not None:
            self.lines.stop()

    def result(self) -> dict[Any, Any]:
        return self.raw


class MergedProfile:
    """What ``result.profiler`` is when a run recorded actions: the merged stats as pstats reads
    a profile (``pstats.Stats(result.profiler)``, ``print_stats``, ``dump_stats``), and each
    action's own ``cProfile.Profile`` in ``profiles`` (``OUTSIDE_ACTIONS``: outside them)."""

    def __init__(self, raw: dict[Any, Any], profiles: dict[str, cProfile.Profile]) -> None:
        self._raw = raw
        self.stats = dict(raw)
        self.profiles = profiles

    def create_stats(self) -> None:
        """pstats calls it before reading ``stats``, then empties ``stats`` (it takes them over):
        a fresh copy each time, so the profile reads, prints and dumps as often as a live one."""
        self.stats = dict(self._raw)

    def print_stats(self, sort: Any = -1) -> None:
        import pstats

        pstats.Stats(self).strip_dirs().sort_stats(sort).print_stats()  # type: ignore[arg-type]

    def dump_stats(self, file: str) -> None:
        import marshal

        with open(file, "wb") as f:
            marshal.dump(self._raw, f)


def _hook_owner(ours: cProfile.Profile) -> str | None:
    """What holds the profiling hook now that nbprof's cProfile yielded it: another profiler
    (its type or sys.monitoring tool name), or None."""
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:  # 3.12+: cProfile holds sys.monitoring's PROFILER_ID
        tool = monitoring.get_tool(monitoring.PROFILER_ID)
        return None if tool is None else str(tool)
    hook = sys.getprofile()
    if hook is None or hook is ours:
        return None
    return type(getattr(hook, "__self__", hook)).__name__


def _disable_keeping_the_others(ours: cProfile.Profile) -> None:
    """Stop nbprof's cProfile, whose ``disable`` clears the thread's profile function whoever set
    it (Python < 3.12), and give the other profiler its hook back."""
    hook = sys.getprofile()
    ours.disable()
    if hook is None or hook is ours:
        return
    if isinstance(hook, _lsprof.Profiler):
        hook.enable()
    else:
        sys.setprofile(hook)


# Before Python 3.12 every profile function (cProfile's, profile.Profile's, sys.setprofile's, a C
# extension's) is the thread's one, and setting one raises the audit event "sys.setprofile" first;
# from 3.12 cProfile profiles through sys.monitoring, a sys.setprofile hook runs beside it, and a
# second cProfile cannot start at all ("Another profiling tool is already active").
_SETPROFILE_REPLACES = sys.version_info < (3, 12)
_watched: "CProfileSession | None" = None  # the session the audit hook stands for
_audit_hook_added = False


def _audit(event: str, args: Any) -> None:
    """sys.addaudithook's hook (added once a process: audit hooks cannot be removed); a no-op
    unless a ``%%cprofile`` session records. Kept minimal: it runs at every audited event."""
    if event == "sys.setprofile":
        session = _watched
        if session is not None:
            session.hook_changing()


class ProfilerHookWatch:
    """While installed, another profiler starting stops nbprof's cProfile first
    (``CProfileSession.yield_to``): ``cProfile.Profile.enable`` (any cProfile, Lightning's
    advanced profiler's too), and before Python 3.12 anything that sets the thread's profile
    function (``profile.Profile``, ``sys.setprofile``, C extensions), seen through the audit event
    Python raises first: a wrapper around ``sys.setprofile`` would itself be a Python frame whose
    return the new profile function sees (``profile.Profile`` then fails with "Bad return")."""

    def __init__(self, session: CProfileSession) -> None:
        self._session = session
        self.thread = 0
        self._installed: tuple[Any, bool, Any] | None = None  # (what was there, held by the class, wrapper)

    def install(self) -> None:
        global _watched, _audit_hook_added
        if self._installed is not None:
            return
        self.thread = threading.get_ident()
        session = self._session
        enable_before = cProfile.Profile.enable  # _lsprof's, or someone's own override

        def enable(prof: Any, *args: Any, **kwargs: Any) -> Any:
            if not session.owns(prof):  # nbprof's per-action profiles are its own
                session.yield_to("cProfile.Profile.enable")
            return enable_before(prof, *args, **kwargs)

        enable.__doc__ = enable_before.__doc__
        had = "enable" in vars(cProfile.Profile)
        cProfile.Profile.enable = enable  # type: ignore[method-assign,assignment]
        self._installed = (enable_before, had, enable)
        if _SETPROFILE_REPLACES:
            _watched = session
            if not _audit_hook_added:
                sys.addaudithook(_audit)
                _audit_hook_added = True

    def remove(self) -> None:
        global _watched
        if _watched is self._session:
            _watched = None
        if self._installed is None:
            return
        before, had, wrapper = self._installed
        self._installed = None
        if vars(cProfile.Profile).get("enable") is not wrapper:
            return  # replaced again since: leave it
        if had:
            cProfile.Profile.enable = before  # type: ignore[method-assign]
        else:
            del cProfile.Profile.enable


def raw_stats(profiler: cProfile.Profile) -> dict[Any, Any]:
    """cProfile's raw stats, as ``create_stats`` makes them, but one row per code object.

    pstats keys a function by ``(file, first line, name)``: two code objects with the same key
    (two list comprehensions, generator expressions or lambdas on one line; a function defined
    again in a re-run cell) share one row, and ``create_stats`` does not even add them up: the
    last one read overwrites the others while the edges of their callees still name the key, so
    a comprehension with 60 % of a cell's time disappears from the table, the flame view and the
    callers (measured on Python 3.11). nbprof holds the live profiler, whose ``getstats()`` gives
    every code object apart: those that would share a key are told apart by the column they start
    at ("<listcomp> at col 5"), every other key is pstats' own."""
    return raw_stats_of([profiler])[0]


def raw_stats_of(profilers: list[cProfile.Profile]) -> list[dict[Any, Any]]:
    """``raw_stats`` of several profiles of one run (one per action), each code object named the
    same in all of them (names told apart over the union), so that their stats merge by key."""
    all_entries = [profiler.getstats() for profiler in profilers]
    codes: dict[tuple[str, int, str], list[Any]] = {}
    for entries in all_entries:
        for entry in entries:
            code = entry.code
            if not isinstance(code, str):
                same = codes.setdefault((code.co_filename, code.co_firstlineno, code.co_name), [])
                if not any(c is code for c in same):
                    same.append(code)
    names: dict[int, tuple[str, int, str]] = {}
    for (filename, line, name), same in codes.items():
        if len(same) == 1:
            continue
        where = [_where_on_the_line(code) for code in same]
        if "" in where or len(set(where)) < len(same):  # one without a column, or the same column: their order
            where = [f"#{i + 1}" for i in range(len(same))]
        for code, at in zip(same, where):
            names[id(code)] = (filename, line, f"{name} {at}")

    def label(code: Any) -> tuple[str, int, str]:
        if isinstance(code, str):  # a builtin
            return ("~", 0, code)
        return names.get(id(code)) or (code.co_filename, code.co_firstlineno, code.co_name)

    return [_snapshot(entries, label) for entries in all_entries]


def _snapshot(entries: Any, label: Any) -> dict[Any, Any]:
    """cProfile.Profile.snapshot_stats, keyed by ``label(code)``."""
    stats: dict[Any, Any] = {}
    callers_of: dict[int, dict[Any, Any]] = {}
    for entry in entries:
        callers: dict[Any, Any] = {}
        callers_of[id(entry.code)] = callers
        nc = entry.callcount
        stats[label(entry.code)] = (nc - entry.reccallcount, nc, entry.inlinetime, entry.totaltime, callers)
    for entry in entries:
        caller = label(entry.code)
        for sub in entry.calls or ():
            of_callee = callers_of.get(id(sub.code))
            if of_callee is None:
                continue
            nc, cc, tt, ct = sub.callcount, sub.callcount - sub.reccallcount, sub.inlinetime, sub.totaltime
            if caller in of_callee:
                p_nc, p_cc, p_tt, p_ct = of_callee[caller]
                nc, cc, tt, ct = nc + p_nc, cc + p_cc, tt + p_tt, ct + p_ct
            of_callee[caller] = (nc, cc, tt, ct)
    return stats


def merge_raw(raws: Any) -> dict[Any, Any]:
    """Several raw stats dicts of one run -> one, added up as ``pstats.Stats.add`` does: each
    function's four numbers, and each caller edge's."""
    out: dict[Any, Any] = {}
    for raw in raws:
        for key, (cc, nc, tt, ct, callers) in raw.items():
            have = out.get(key)
            if have is None:
                out[key] = (cc, nc, tt, ct, dict(callers))
                continue
            h_cc, h_nc, h_tt, h_ct, h_callers = have
            for caller, edge in callers.items():
                old = h_callers.get(caller)
                if old is None:
                    h_callers[caller] = edge
                elif isinstance(edge, tuple):
                    h_callers[caller] = tuple(a + b for a, b in zip(old, edge))
                else:  # profile.Profile's files: a call count per caller
                    h_callers[caller] = old + edge
            out[key] = (h_cc + cc, h_nc + nc, h_tt + tt, h_ct + ct, h_callers)
    return out


def _where_on_the_line(code: Any) -> str:
    """Where a code object starts on its first line ("at col 5", 1-based as editors count): the
    first position there past column 0 (its first instruction, RESUME, is at column 0), from its
    positions (Python 3.11+); "" where there are none."""
    positions = getattr(code, "co_positions", None)
    for line, _, col, _ in positions() if positions is not None else ():
        if line == code.co_firstlineno and col:
            return f"at col {col + 1}"
    return ""


def _is_own(key: tuple[str, int, str], own_files: dict[str, bool]) -> bool:
    filename, _, func = key
    if filename == "~":
        return func in _OWN_BUILTINS
    own = own_files.get(filename)
    if own is None:  # once per file: abspath is most of this function's cost
        own = own_files[filename] = os.path.abspath(filename).startswith(_NBPROF_DIR + os.sep)
    return own


def note_wrapped(original: Any) -> None:
    """Say that ``original`` is a library function nbprof wraps for a run (``collect.data_loading``):
    a wrapper's call to it is the profiled code's call; any other call a wrapper makes is nbprof's."""
    code = getattr(original, "__code__", None)
    if code is not None:
        _WRAPPED_ORIGINALS.add((code.co_filename, code.co_firstlineno, code.co_name))


def without_own_frames(raw: dict[Any, Any]) -> dict[Any, Any]:
    """Take nbprof's own work out of cProfile's raw stats.

    nbprof's functions go. Of what they call, two kinds are the profiled code and stay: what the
    frames the run started from call (the cell, the statement of ``%cprofile stmt``: those keep
    their numbers and lose only the edge from nbprof, top-level functions of the profile), and the
    library function a wrapper nbprof put in place for the run calls through (``collect.data_loading``'s
    around DataLoader's ``_next_data``, named by :func:`note_wrapped`): the wrapper is spliced out,
    its callers' edges going straight to the original (shared by call count when it had several
    callers), so ``__next__ -> _next_data`` stays one tree. Everything else nbprof's frames call is
    nbprof's work: builtins (``time.time_ns``) and, when the profiled code reached the nbprof frame
    (a wrapper, nbprof's API), library functions too (a ``WeakKeyDictionary``'s ``__setitem__``, a
    ``tempfile.mkdtemp``). A function only nbprof called goes, with what it called in turn; one the
    cell also called loses the numbers on nbprof's edges (cProfile keeps callers one level deep, so
    what that function called on nbprof's behalf stays among its callees).
    """
    own_files: dict[str, bool] = {}
    own = {k for k in raw if _is_own(k, own_files)}
    if not own:
        return dict(raw)
    reached = _reached_from_profiled_code(raw, own)

    def nbprofs_call(caller: Any, key: Any) -> bool:
        return caller in own and (key[0] == "~" or (caller in reached and key not in _WRAPPED_ORIGINALS))

    changed = True
    while changed:
        changed = False
        for key, (_, _, _, _, callers) in raw.items():
            if key not in own and callers and all(nbprofs_call(c, key) for c in callers):
                own.add(key)
                if any(c in reached for c in callers):
                    reached.add(key)
                changed = True
    out = {}
    for key, (cc, nc, tt, ct, callers) in raw.items():
        if key in own:
            continue
        kept: dict[Any, Any] = {}
        for caller, edge in callers.items():
            if caller not in own:
                _add_edge(kept, caller, edge)
            elif nbprofs_call(caller, key):  # nbprof's calls out of its totals
                e_nc, e_cc, e_tt, e_ct = edge
                cc, nc, tt, ct = cc - e_cc, nc - e_nc, tt - e_tt, ct - e_ct
            else:  # the user's code nbprof ran: from the wrapper's own callers, if it had some
                for outer, share in _outer_callers(raw, caller, own):
                    _add_edge(kept, outer, tuple(v * share for v in edge) if share != 1.0 else edge)
        out[key] = (cc, nc, tt, ct, kept)
    return out


def _reached_from_profiled_code(raw: dict[Any, Any], own: set[Any]) -> set[Any]:
    """nbprof's frames that the profiled code called (wrappers, nbprof's API), and the nbprof frames
    those called; the others are the frames the run started from (their calls are the cell)."""
    reached = {k for k in own if any(c not in own for c in raw[k][4])}
    rest = own - reached
    changed = True
    while changed and rest:
        changed = False
        for key in list(rest):
            if any(c in reached for c in raw[key][4]):
                reached.add(key)
                rest.discard(key)
                changed = True
    return reached


def _outer_callers(raw: dict[Any, Any], wrapper: Any, own: set[Any]) -> list[tuple[Any, float]]:
    """The profiled code that called nbprof's ``wrapper``, each with its share of the calls."""
    if wrapper[0] == "~":
        return []
    outer = [(c, e) for c, e in raw[wrapper][4].items() if c not in own and isinstance(e, tuple)]
    calls = sum(e[0] for _, e in outer)
    if not calls:
        return []
    return [(c, 1.0 if len(outer) == 1 else e[0] / calls) for c, e in outer]


def _add_edge(callers: dict[Any, Any], caller: Any, edge: Any) -> None:
    have = callers.get(caller)
    callers[caller] = edge if have is None else tuple(a + b for a, b in zip(have, edge))


def stats_table(raw: dict[Any, Any]) -> pd.DataFrame:
    """cProfile's raw stats -> the stats table (what pstats prints).

    One pass over the raw dict, columns built as lists / numpy arrays and handed to pandas once
    (no row tuples, no ``astype`` afterwards): well under a millisecond for a small cell, a few
    ms for thousands of functions, less than pstats takes to sort and print the same."""
    keys = list(raw)
    n = len(keys)
    values = list(raw.values())
    filenames: Any
    functions: Any
    if n:
        filenames, linenos, functions = map(list, zip(*keys))
        primitive_l, ncalls_l, tottime_l, cumtime_l, _ = zip(*values)
    else:  # text columns of no rows: what strings give (pandas 3's "str"), not float64
        filenames = functions = np.array([], dtype=str)
        linenos = []
        primitive_l = ncalls_l = tottime_l = cumtime_l = ()
    primitive = np.fromiter(primitive_l, dtype=np.int64, count=n)
    ncalls = np.fromiter(ncalls_l, dtype=np.int64, count=n)
    tottime = np.fromiter(tottime_l, dtype=np.float64, count=n)
    cumtime = np.fromiter(cumtime_l, dtype=np.float64, count=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        # pstats divides tottime by ncalls and cumtime by primitive calls
        tt_per = np.where(ncalls > 0, tottime / np.maximum(ncalls, 1), 0.0)
        ct_per = np.where(primitive > 0, cumtime / np.maximum(primitive, 1), 0.0)
    return pd.DataFrame(
        {
            "function": functions,
            "filename": filenames,
            "lineno": np.fromiter(linenos, dtype=np.int64, count=n),
            "ncalls": ncalls,
            "primitive_calls": primitive,
            "tottime_s": tottime,
            "cumtime_s": cumtime,
            "tottime_per_call_s": tt_per,
            "cumtime_per_call_s": ct_per,
        },
        columns=list(STATS_COLUMNS),
    )


def edges_table(raw: dict[Any, Any]) -> pd.DataFrame:
    """cProfile's raw stats -> every caller -> callee edge with its own numbers (what
    ``pstats.print_callers/print_callees`` print)."""
    caller_fn: list[str] = []
    caller_file: list[str] = []
    caller_line: list[int] = []
    callee_fn: list[str] = []
    callee_file: list[str] = []
    callee_line: list[int] = []
    e_nc: list[int] = []
    e_cc: list[int] = []
    e_tt: list[float] = []
    e_ct: list[float] = []
    for callee, value in raw.items():
        callers = value[4]
        if not callers:
            continue
        k = len(callers)
        callee_fn += [callee[2]] * k
        callee_file += [callee[0]] * k
        callee_line += [callee[1]] * k
        for caller, edge in callers.items():
            caller_file.append(caller[0])
            caller_line.append(caller[1])
            caller_fn.append(caller[2])
            # an edge is (ncalls, primitive_calls, tottime, cumtime): note the order differs
            # from the stats row's (primitive_calls, ncalls, ...); old profile.py stores a count
            if isinstance(edge, tuple):
                nc, cc, tt, ct = edge
            else:
                nc, cc, tt, ct = edge, edge, 0.0, 0.0
            e_nc.append(nc)
            e_cc.append(cc)
            e_tt.append(tt)
            e_ct.append(ct)
    m = len(e_nc)
    if m == 0:  # no edges: text columns as strings give them (pandas 3's "str"), not object
        caller_fn = caller_file = callee_fn = callee_file = np.array([], dtype=str)  # type: ignore[assignment]
    return pd.DataFrame(
        {
            "caller_function": caller_fn,
            "caller_filename": caller_file,
            "caller_lineno": np.fromiter(caller_line, dtype=np.int64, count=m),
            "callee_function": callee_fn,
            "callee_filename": callee_file,
            "callee_lineno": np.fromiter(callee_line, dtype=np.int64, count=m),
            "ncalls": np.fromiter(e_nc, dtype=np.int64, count=m),
            "primitive_calls": np.fromiter(e_cc, dtype=np.int64, count=m),
            "tottime_s": np.fromiter(e_tt, dtype=np.float64, count=m),
            "cumtime_s": np.fromiter(e_ct, dtype=np.float64, count=m),
        },
        columns=list(EDGE_COLUMNS),
    )


# ------------------------------------------------------------------------------ .prof files

# what people name cProfile's files (python -m cProfile -o, dump_stats, %prun -D, snakeviz's docs)
PROF_SUFFIXES = (".prof", ".pstats", ".cprof", ".profile", ".pstat")


def is_pstats_head(head: bytes) -> bool:
    """The first two bytes of a file are those of a marshalled dict keyed by tuples: what
    ``python -m cProfile -o``, ``pstats.Stats.dump_stats``, ``profile.Profile.dump_stats`` and
    ``%%cprofile --dump`` write (marshal's dict type, with or without its reference flag, then a
    tuple, or the end of an empty dict). No JSON starts so, so a chrome trace is never taken for one."""
    return len(head) >= 2 and head[0] in (0x7B, 0xFB) and head[1] in b"()0\xa8\xa9"


def read_prof_file(path: str) -> dict[Any, Any]:
    """A ``.prof`` file -> cProfile's raw stats dict, as ``pstats.Stats(path)`` reads it (marshal),
    checked to be one: ``{(file, line, function): (primitive calls, calls, tottime, cumtime,
    {caller: (calls, primitive calls, tottime, cumtime)})}`` (``profile.Profile``'s files have a
    call count per caller instead). Whatever is wrong: a one-line TraceError naming the file.

    marshal is not meant for untrusted data (Python's docs); pstats and snakeviz read these files
    with it all the same. Here a file whose first bytes are not a stats dict's is never handed to
    marshal, and from Python 3.13 marshal is told to make no code objects."""
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such file")
    if os.path.isdir(path):
        raise TraceError(f"{path}: is a folder; load_prof reads .prof files (a folder of traces: nbprof.load_trace)")
    try:
        with open(path, "rb") as f:
            head = f.read(2)
            if not is_pstats_head(head):
                raise TraceError(f"{path}: {_not_stats(head)}")
            data = head + f.read()
    except OSError as e:
        raise TraceError(f"{path}: cannot be read ({e.strerror or e})") from None
    try:
        raw = marshal.loads(data, allow_code=False) if sys.version_info >= (3, 13) else marshal.loads(data)  # type: ignore[call-arg,unused-ignore]
    except (EOFError, ValueError, TypeError) as e:
        raise TraceError(f"{path}: not a complete .prof file (marshal: {e}; was it fully written?)") from None
    problem = _stats_problem(raw)
    if problem:
        raise TraceError(f"{path}: not cProfile's stats ({problem})")
    return raw


_WHAT_PROF_IS = "not a .prof file (cProfile's stats: python -m cProfile -o, dump_stats, %%cprofile --dump)"


def _not_stats(head: bytes) -> str:
    """What a file that is no stats dict seems to be, from its first bytes."""
    if not head:
        return "the file is empty, " + _WHAT_PROF_IS
    if head == b"\x1f\x8b" or head.lstrip()[:1] in (b"{", b"["):
        return "a chrome trace (JSON), not a .prof file: use nbprof.load_trace"
    return _WHAT_PROF_IS


def _is_key(key: Any) -> bool:
    return (isinstance(key, tuple) and len(key) == 3 and isinstance(key[0], str) and isinstance(key[1], int)
            and isinstance(key[2], str))


def _numbers(values: Any) -> bool:
    return all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values)


def _stats_problem(raw: Any) -> str | None:
    """Why ``raw`` is not a stats dict the tables can be built from (None: it is one). Every
    function and edge is looked at: the tables and the call tree assume these shapes."""
    if not isinstance(raw, dict):
        return f"it holds a {type(raw).__name__}, not a dict of functions"
    for key, value in raw.items():
        if not _is_key(key):
            return f"a key is {key!r:.60}, not (file, line, function)"
        if not (isinstance(value, tuple) and len(value) == 5 and _numbers(value[:4]) and isinstance(value[4], dict)):
            return f"{key[0]}:{key[1]}({key[2]}) has {value!r:.60}, not (calls, calls, tottime, cumtime, callers)"
        for caller, edge in value[4].items():
            if not _is_key(caller) or not (_numbers((edge,)) or (isinstance(edge, tuple) and len(edge) == 4
                                                                  and _numbers(edge))):
                return f"{key[0]}:{key[1]}({key[2]}) has a caller {caller!r:.60}: {edge!r:.40}"
    return None
