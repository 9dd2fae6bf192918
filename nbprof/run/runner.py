"""One profiled run, whoever starts it: a cell (``_cell.begin`` / ``end``), a line magic or a
direct ``run_cell_magic`` call (``magics.run_sync``), or a script (``cli.main``).

The sequence is written once, here::

    run = new_run("torchprof", options, shell)
    run.begin()          # the run becomes active, THEN its collector starts
    ... the code ...     # nbprof.step() / cuda_collection() reach the active run's collector
    run.stop()           # first thing after the code: nothing nbprof does afterwards is recorded
    result = run.finish_or_warn(error)   # the result, its notes, -o NAME, --export / --dump files

The run is active before its collector starts, so an interrupt that lands right after the
profiler starts still finds the run (the cell's ``finally: end()`` stops it); if starting fails,
the run is no longer active and no profiler is left running. ``stop`` stops the collector first
and only then measures the wall time, reads the trace and builds anything.

While the run is active, the training frameworks the user imported report their named actions
to its collector (Lightning's default profiler: ``integrations/lightning_actions.py``), and the
DataLoaders the code iterates are watched, their worker processes recorded
(``collect/data_loading.py``): both set up before the collector starts, undone after it stops,
so none of it is in the profile.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from ..collect.collector import Collector
from .flags import make_folder_of
from ..format import plural

if TYPE_CHECKING:  # pragma: no cover
    from ..collect.collector import Takeover
    from ..collect.cprofile import CProfileSession
    from ..collect.torch_live import TorchSession

__all__ = ["Run", "TorchRun", "PythonRun", "new_run", "active", "discard_active", "warn", "takeover_note", "torch_profile"]

_active: "Run | None" = None  # the run in progress, if any (at most one: profiles cannot nest)


def active() -> "Run | None":
    """The run in progress (``nbprof.step()`` and ``cuda_collection()`` talk to it), or None."""
    return _active


def discard_active() -> None:
    """Stop a run that is still active but was never ended, without building its result.

    Only a cell whose ``finally`` never ran could leave one (it should not happen); a new cell
    must not start a second profiler on top of it."""
    global _active
    stale, _active = _active, None
    if stale is not None:
        try:
            stale.collector.end()
        except BaseException:
            pass
        finally:
            stale._undo_marks()
            stale._collect_loaders()


class Run(ABC):
    """One profile: its options, its collector, and what to do when it ends.

    ``what`` names the profiled code in the notes ("the cell raised ...", "the script raised ...").
    """

    def __init__(self, options: Any, shell: Any = None, what: str = "cell") -> None:
        from ..views.progress import Progress

        self.shell = shell
        self.options = options
        self.what = what
        self.error: BaseException | None = None
        self.started = 0.0
        self.wall_s = 0.0
        self._stopped = False
        self._read_error: Exception | None = None  # reading the recorded profile failed (stop)
        self._data: Any = None
        self.progress = Progress()
        self.collector: Collector = self._collector()
        self._unmark: Any = None  # undoes integrations.lightning_actions.mark_actions
        self._loaders: Any = None  # the DataLoaders' watch (collect.data_loading) until it is collected
        self.data_loading: Any = None  # what it recorded (a DataLoadingRecord; None: no DataLoader ran)
        self._loader_error: str | None = None

    @abstractmethod
    def _collector(self) -> Collector:
        """The profiler this kind of run records with (not started)."""

    def begin(self) -> None:
        """Make this the active run, then start profiling. If starting fails (another profiler
        is running, an interrupt), the run is not active, no profiler is left running, and the
        error propagates (``NbprofError``: a one-line message for the user)."""
        global _active
        # active before it starts: an interrupt landing right after the profiler starts must
        # still find the run, whose end stops it
        _active = self
        self.started = time.perf_counter()
        try:
            from ..integrations.lightning_actions import mark_actions

            # before the profiler starts (and undone after it stops): nbprof's own work stays
            # out of the profile
            self._unmark = mark_actions(self.collector)
            from ..collect.data_loading import DataLoaderWatch

            self._loaders = DataLoaderWatch(self.shell)
            self._loaders.install()
            self.collector.begin()
        except BaseException:
            _active = None
            try:
                self.collector.end()
            finally:
                self._undo_marks()
                self._collect_loaders()
            raise

    def _undo_marks(self) -> None:
        unmark, self._unmark = self._unmark, None
        try:
            if unmark is not None:
                unmark()
        finally:
            if self._loaders is not None:
                self._loaders.remove()

    def _collect_loaders(self) -> None:
        """The DataLoader workers' records (after the profiler stopped and the wall time was
        taken: a live worker gets a moment to write its functions); their folder is removed.
        A problem reading them is a note, never the code's outcome."""
        loaders, self._loaders = self._loaders, None
        if loaders is None:
            return
        try:
            loaders.remove()
            record = loaders.collect()
        except Exception as e:
            self._loader_error = f"{type(e).__name__}: {e}"[:200]
            return
        self.data_loading = None if record.empty else record

    def stop(self) -> None:
        """Stop the profiler. The first thing done at the end of the code: nothing nbprof does
        afterwards is recorded. The run is no longer active."""
        global _active
        if self._stopped:
            return
        self._stopped = True
        if _active is self:
            _active = None
        try:
            self.collector.end()  # stops the profiler first, whatever reading it then does
            self._data = self.collector.result()
        except Exception as e:
            # reading what was recorded failed: the code's own outcome (its value, its exception)
            # stands; ``finish`` turns this into one line instead of the report
            self._read_error = e
        finally:
            self._undo_marks()
        self.wall_s = time.perf_counter() - self.started
        self._collect_loaders()

    def finish(self, error: BaseException | None) -> Any:
        """Stop the profiler (if not yet), then build the result, store it (``-o NAME``) and
        write the files the flags asked for."""
        self.stop()
        self.error = error
        if error is not None:  # the code's own traceback, without nbprof's DataLoader wrappers
            from ..collect.data_loading import without_wrapper_frames

            without_wrapper_frames(error)
        if self._read_error is not None:
            raise self._read_error
        result = self._build(self._data)
        name = self.options.output
        if name:
            self.shell.user_ns[name] = result
        self._write_files(result)
        if getattr(self.options, "quiet", False):
            # what nbprof did with the flags (CUDA missing, an option turned on) is a note of the
            # report; with no report shown it is said here instead: once either way. So is a
            # report that covers only part of the run: never partial without a word
            for note in [*getattr(self.options, "notes", ()), *self._takeover_notes()]:
                warn(note)
        return result

    def finish_or_warn(self, error: BaseException | None) -> Any | None:
        """``finish``, but a problem building the result is a one-line warning and None: it must
        never replace the code's own exception (an interrupt still propagates)."""
        try:
            return self.finish(error)
        except Exception as e:
            self.progress.done()
            warn(f"could not build the report: {type(e).__name__}: {e}")
            return None

    @abstractmethod
    def _build(self, data: Any) -> Any:
        """The collector's result -> the result object (TorchProfile / PythonProfile)."""

    @abstractmethod
    def _write_files(self, result: Any) -> None:
        """Write the files the flags asked for, each with a note in the report."""

    #: what the run's profiler is called in a note about another one taking over
    profiler_name = "profiler"

    def _loading_notes(self) -> list[str]:
        """What the report says about the DataLoader workers' records: one line per worker whose
        functions are missing, and why (``analysis.data_loading.record_notes``)."""
        if self.data_loading is None:
            return []
        from ..analysis.data_loading import record_notes

        return record_notes(self.data_loading, self.what)

    def _takeover_notes(self) -> list[str]:
        """One line when another profiler took over in the middle of the run: who, when, what
        this report covers, where the other one's results are."""
        t = self.collector.takeover
        if t is None:
            return []
        return [takeover_note(t, self.profiler_name, self.what, self.wall_s, self.shell)]

    def _notes(self) -> list[str]:
        notes = list(getattr(self.options, "notes", ())) + self._takeover_notes()
        if self._loader_error is not None:
            notes.append(f"the DataLoader workers' records could not be read ({self._loader_error})")
        if self.error is not None:
            kind = "was interrupted" if isinstance(self.error, KeyboardInterrupt) else "raised"
            msg = f"{type(self.error).__name__}"
            text = str(self.error).strip().splitlines()[0] if str(self.error).strip() else ""
            if text and not isinstance(self.error, KeyboardInterrupt):
                msg += f": {text[:120]}"
            notes.append(
                f"the {self.what} {kind} ({msg}); this report shows what was recorded until then"
                if kind == "raised"
                else f"the {self.what} {kind}; this report shows what was recorded until then"
            )
        return notes


class TorchRun(Run):
    """``%%torchprof`` / ``python -m nbprof torch``: torch.profiler -> :class:`TorchProfile`."""

    collector: "TorchSession"
    profiler_name = "torch"

    def _collector(self) -> Collector:
        from ..collect.torch_live import TorchSession

        return TorchSession(self.options, self.progress, self.shell)

    def _build(self, data: Any) -> Any:
        opts = self.options
        notes = self._notes() + [f"torch: {w}" for w in self.collector.native_warnings()]
        empty_reason = None
        if opts.schedule is not None:
            profiler = self.collector.profiler
            schedule_notes, empty_reason = _schedule_notes(opts.schedule, int(getattr(profiler, "step_num", 0) or 0),
                                                           len(self.collector.cycles), self.what)
            notes += schedule_notes
        compile_log = self.collector.compile.result()
        if data is not None and self.collector.lines is not None:
            try:
                data.meta.line_data, data.meta.sources = _finish_lines(self.collector.lines)
                notes += data.meta.line_data["notes"]  # in the report too (no line tracer: why)
            except Exception as e:  # the profile stands without its lines, and says so
                notes.append(f"--lines: could not place the operators on lines ({type(e).__name__}: {e})"[:300])
        mps = self.collector.mps.result
        if mps is not None:
            notes.append(mps_note(self.what))
        no_cupti = bool(opts.cuda and self.collector.cuda_without_cupti)
        if no_cupti:
            notes.append(NO_CUPTI_NOTE)
        history = self.collector.history  # --snapshot
        snapshot = None
        if history is not None:
            notes += history.notes
            snapshot = history.result
        return torch_profile(data, profiler=self.collector.profiler, options=opts, notes=notes + self._loading_notes(),
                             wall_s=self.wall_s, error=self.error, shell=self.shell, progress=self.progress,
                             compile_log=compile_log, empty_reason=empty_reason, mps=mps, cuda_without_cupti=no_cupti,
                             snapshot=snapshot, data_loading=self.data_loading)

    def _write_files(self, result: Any) -> None:
        opts = self.options
        notes = result.meta.notes
        if opts.export:
            make_folder_of(opts.export)
            result.to_chrome_trace(opts.export)
            notes.append(f"trace written to {opts.export}")
        if opts.tensorboard:
            path = _tensorboard_path(opts.tensorboard)
            result.to_chrome_trace(path)
            notes.append(f"trace written to {path} (tensorboard --logdir {opts.tensorboard})")


def _finish_lines(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """--lines: the collected tree and line record -> the profile's ``line_data`` and ``sources``
    (``analysis.lines``); the cells and files shown keep only the text of those with a line."""
    from ..analysis.lines import finish_line_data

    began = time.perf_counter()
    data = finish_line_data(raw)
    data["collect_s"] = raw["walk_s"] + (time.perf_counter() - began)
    data["line_events"] = int(len(raw["tracer"]["time"]))
    files = set(data["frames"]["file"])
    return data, {f: text for f, text in raw["sources"].items() if f in files}


# what torch records on Apple's MPS device, and on a CUDA build without CUPTI: said once, in the report
def mps_note(what: str = "cell") -> str:
    return (f"the {what} used Apple's MPS device, where torch.profiler records the ops' host side only (no MPS "
            f"kernels, no device time): an op that waits for the device (.item(), a copy to the CPU) shows the "
            f"device's work as its own CPU time; the {what}'s MPS device time and memory in the summary are "
            f"measured around it (torch.mps events and memory counters)")


NO_CUPTI_NOTE = ("this torch was built without CUPTI (torch 2.4-2.6 on Windows): torch timed the ops' CUDA work "
                 "with CUDA events, so its own table (p.profiler.key_averages()) has CUDA times, but the trace "
                 "has no kernels, so this report shows no device time")


def torch_profile(data: Any, *, profiler: Any, options: Any, notes: list[str], wall_s: float | None,
                  error: BaseException | None = None, shell: Any = None, progress: Any = None,
                  compile_log: Any = None, empty_reason: str | None = None, mps: Any = None,
                  cuda_without_cupti: bool = False, snapshot: Any = None, data_loading: Any = None) -> Any:
    """The :class:`TorchProfile` of what a torch profiler recorded (``data``: the events table
    read from its kineto results; None: nothing), as ``%%torchprof`` and ``nbprof.from_profiler``
    build it: ``options`` (:class:`~nbprof.settings.TorchOptions`) say what was recorded and how
    the report is shown."""
    from ..collect.chrome_trace import empty_trace
    from ..model import TorchProfile

    if data is None:
        data = empty_trace()
    if len(data.events) and progress is not None:
        progress.stage(f"nesting {plural(len(data.events), 'event')}")
    meta = dict(
        sort=options.sort,
        limit=options.limit,
        group_by=options.group_by,
        notes=notes,
        empty_reason=empty_reason,
        wall_s=wall_s,
        with_cuda=options.cuda,
        cell_error=_describe_error(error),
        record_shapes=options.shapes,
        profile_memory=options.memory,
        with_stack=options.stack,
        with_flops=options.flops,
        with_modules=options.modules,
        code_names=_code_names(shell, (_frame_files(data.events) if options.stack else set())
                               | _compile_files(compile_log)),
        compile_log=compile_log,
        mps=mps,
        cuda_without_cupti=cuda_without_cupti,
        snapshot=snapshot,
        data_loading=data_loading,
    )
    return TorchProfile.from_trace(data, profiler=profiler, **meta)


class PythonRun(Run):
    """``%%cprofile`` / ``python -m nbprof cprofile``: cProfile -> :class:`PythonProfile`."""

    collector: "CProfileSession"
    profiler_name = "python"

    def _collector(self) -> Collector:
        from ..collect.cprofile import CProfileSession

        return CProfileSession(lines=self.options.lines, shell=self.shell)

    def _build(self, data: Any) -> Any:
        from ..analysis.callgraph import other_threads_suspected
        from ..meta import PythonMeta
        from ..model import PythonProfile

        opts = self.options
        meta = PythonMeta(
            sort=opts.sort,
            limit=opts.limit,
            notes=self._notes() + self._loading_notes(),
            wall_s=self.wall_s,
            cell_error=_describe_error(self.error),
            code_names=_code_names(self.shell, {k[0] for k in data}),
            data_loading=self.data_loading,
        )
        collector = self.collector
        lines = None
        if collector.lines is not None:
            lines = collector.lines.table()
            meta.with_lines = True
            meta.sources = collector.lines.sources(dict.fromkeys(lines["file"]))
            meta.notes += collector.lines.notes(self.what)  # no line followed, or the code's tracer took over
        profile = PythonProfile(data, meta, profiler=collector.profiler, by_action=collector.by_action,
                                action_counts=collector.action_counts, lines=lines)
        if collector.by_action:
            meta.notes.append(
                f"calls grouped by the {len(collector.action_counts)} actions they ran under (the Actions tab, "
                "p.actions()): a function that was running when an action began (Trainer.fit, the loops) is timed "
                "until then, its own time after that is in no action")
        if sys.version_info >= (3, 12) and other_threads_suspected(profile.stats, profile.edges, self.wall_s):
            profile.meta.notes.append(
                f"other threads ran Python code during this {self.what}: on Python 3.12+ cProfile records "
                f"their calls on the {self.what}'s stack, so their times (and the flame view) are not reliable"
            )
        return profile

    def _write_files(self, result: Any) -> None:
        opts = self.options
        if opts.dump:
            make_folder_of(opts.dump)
            result.dump(opts.dump)
            result.meta.notes.append(f"profile written to {opts.dump} (snakeviz {opts.dump})")


_RUNS: dict[str, type[Run]] = {"torchprof": TorchRun, "cprofile": PythonRun}


def new_run(magic: str, options: Any, shell: Any = None, what: str = "cell") -> Run:
    """The run for ``magic`` ("torchprof" or "cprofile"), not started yet."""
    return _RUNS[magic](options, shell, what)


def warn(message: str) -> None:
    """nbprof's own one-line messages, on stderr (not mixed into the profiled code's output)."""
    print(f"nbprof: {message}", file=sys.stderr)


def _schedule_notes(schedule: tuple[int, int, int, int], steps: int, cycles: int,
                    what: str = "cell") -> tuple[list[str], str | None]:
    """What a ``--schedule`` run recorded, when it is not what the schedule says: no step at all
    (``nbprof.step()`` never called, or the cell ended before the first active step: torch then
    records only the empty step the last call began), fewer active steps than asked, no warmup
    (torch's own warning, said here once), several cycles merged into one report. Also, when no
    active step ran, why the profile is empty (``meta.empty_reason``): the code did run its work."""
    wait, warmup, active, repeat = schedule
    text = ",".join(map(str, schedule))
    notes = []
    if warmup == 0:
        notes.append(f"--schedule {text}: no warmup step, so the first recorded step also holds the profiler's "
                     "start-up (torch warns it can skew results); a warmup of 1 avoids it")
    if steps == 0:
        return notes + ["with --schedule, call nbprof.step() once per loop iteration: it was not called, "
                        "so no step was recorded"], "nbprof.step() was never called, so --schedule recorded no step"
    period = wait + warmup + active
    n_cycles = repeat if repeat > 0 else steps // period + 1
    wanted = [c * period + wait + warmup + k for c in range(n_cycles) for k in range(active)]
    ran = sum(1 for i in wanted if i < steps)  # step i ran when the nbprof.step() that ends it did
    empty_reason = None
    if ran == 0:
        notes.append(f"--schedule {text}: recording starts at step {wait + warmup} (after {wait} wait and {warmup} "
                     f"warmup steps) but the {what} ran {plural(steps, 'step')} (nbprof.step() calls): "
                     "no active step ran, so nothing it did was recorded; run more steps or lower wait/warmup")
        empty_reason = (f"--schedule {text} records from step {wait + warmup} on, and the {what} ran "
                        f"{plural(steps, 'step')}, so no active step came (see the note)")
    elif repeat > 0 and ran < len(wanted):
        notes.append(f"--schedule {text}: {ran} of its {len(wanted)} active steps ran "
                     f"(the {what} ran {plural(steps, 'step')})")
    if cycles > 1:
        notes.append(f"{cycles} cycles of --schedule merged into this report (result.profiler, torch's own, "
                     "holds only the last one)")
    return notes, empty_reason


def takeover_note(t: "Takeover", profiler: str, what: str, wall_s: float, shell: Any = None) -> str:
    """The report's line about another profiler that took over mid-run (``collect.collector.Takeover``)."""
    from ..format import fmt_s

    if profiler == "torch":
        ours, who, rule = "nbprof's torch session", "another torch profiler", "torch runs one profiler at a time"
    else:
        ours, who, rule = "nbprof's cProfile", "another Python profiler", "Python runs one profiler per thread"
    if t.at_s is None:
        by = f" ({t.by})" if t.by else ""
        if profiler == "torch":
            return (f"{ours} was ended during the {what} by code nbprof could not see{by}: torch kept nothing of "
                    "the part it was recording, so this report leaves it out")
        return (f"{who}{by} replaced {ours} during the {what}, nbprof could not see when ({rule}): this report "
                "covers only the calls made before it")
    site = _site_text(t.sites, shell)
    verb = "ended" if profiler == "torch" else "replaced"
    text = (f"{who} ({t.by}{', ' + site if site else ''}) started {fmt_s(t.at_s)} into the {what} and {verb} "
            f"{ours} ({rule}): this report covers the {fmt_s(t.at_s)} before it")
    after = wall_s - t.at_s
    if after >= 0.0005:
        text += f", not the {fmt_s(after)} after"
    if t.still_running:
        text += f"; it was still running when the {what} ended"
    if t.read_error:
        text += f"; nbprof could not read its own part ({t.read_error})"
    other = t.other() if t.other is not None else None
    if other is not None and profiler == "torch":
        name = _user_name(shell, other)
        if name:
            text += f"; its own results: nbprof.from_profiler({name})" + (" once it stops" if t.still_running else "")
        else:
            text += "; nbprof.from_profiler(prof) reads its results from the torch.profiler.profile that ran it"
    return text


def _site_text(sites: list[tuple[str, int, str]], shell: Any) -> str:
    """Where the other profiler was started: the innermost code outside the profiler ("In [4]
    line 3", "accelerate/accelerator.py:3578 in profile"), and the cell it came from."""
    if not sites:
        return ""
    names = _code_names(shell, {f for f, _, _ in sites})

    def one(site: tuple[str, int, str]) -> str:
        filename, line, function = site
        if filename in names:
            return f"{names[filename]} line {line}"
        return f"{_library_path(filename)}:{line} in {function}"

    text = one(sites[0])
    if sites[0][0] not in names:
        cell = next((s for s in sites[1:] if s[0] in names), None)
        if cell is not None:
            text += f", from {one(cell)}"
    return text


def _library_path(filename: str) -> str:
    """A file as its package names it: ".../site-packages/accelerate/accelerator.py" ->
    "accelerate/accelerator.py"; elsewhere its last two parts."""
    from ..format import short_path

    path = filename.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    return short_path(filename).removeprefix("…/")


def _user_name(shell: Any, obj: Any) -> str | None:
    """How the user's namespace reaches ``obj``: a name (the ``prof`` of ``with ... as prof``) or
    a framework object's ``profiler`` attribute, two deep at most (``wrapper.profiler.profiler``)."""
    import types

    ns = getattr(shell, "user_ns", None) or {}
    items = [(name, value) for name, value in list(ns.items()) if not name.startswith("_")]
    for name, value in items:
        if value is obj:
            return name
    for name, value in items:
        if isinstance(value, (types.ModuleType, type, types.FunctionType)):
            continue
        path, inner = name, value
        for _ in range(2):
            try:
                inner = getattr(inner, "profiler", None)
            except Exception:
                break
            if inner is None:
                break
            path += ".profiler"
            if inner is obj:
                return path
    return None


def _describe_error(error: BaseException | None) -> str | None:
    return None if error is None else type(error).__name__


def _tensorboard_path(folder: str) -> str:
    """TensorBoard's profiler layout: <dir>/<host>_<pid>.<time_ns>.pt.trace.json."""
    import socket

    os.makedirs(folder, exist_ok=True)
    worker = f"{socket.gethostname()}_{os.getpid()}"
    return os.path.join(folder, f"{worker}.{time.time_ns()}.pt.trace.json")


def _frame_files(events: Any) -> set[str]:
    """The files of the Python frames a ``--stack`` profile recorded (the cells among them are
    named by ``_code_names``)."""
    from ..analysis.stacks import frame_file
    from ..events import KIND_CODE

    frames = events["name"][events["kind"].cat.codes.to_numpy() == KIND_CODE["python"]]
    return {f for f in map(frame_file, frames.astype(str).unique()) if f is not None}


def _compile_files(log: Any) -> set[str]:
    """The source files torch.compile's log names (the cells among them are named by ``_code_names``)."""
    from ..collect.compile_state import log_files

    return log_files(log)


def _code_names(shell: Any, filenames: set[str]) -> dict[str, str]:
    """Notebook cells are compiled from temporary files; name them "In [n]" as IPython does.

    A file name is looked up as recorded first, then as the same path written another way
    (:func:`_path_key`): on Windows IPython's table holds ``C:\\Users\\...\\ipykernel_<pid>\\<hash>.py``
    while a trace may write ``C:/Users/.../ipykernel_<pid>/<hash>.py``, with another case for the
    drive."""
    mapping = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
    by_key: dict[str, Any] | None = None
    out = {}
    for f in filenames:
        n = mapping.get(f)
        if n is None and not f.startswith("<"):
            if by_key is None:
                by_key = _keyed(mapping)
            same = by_key.get(_path_key(f))
            n = None if same is None else mapping.get(same)
        if n is not None:
            out[f] = f"In [{n}]"
        elif f.startswith("<ipython-input-"):
            m = re.match(r"<ipython-input-(\d+)-", f)
            if m:
                out[f] = f"In [{m.group(1)}]"
    return out


# IPython's table of the session's cells (file name -> cell number) keyed by _path_key, with the
# table and how many of its entries are keyed: the table only grows (a cell per entry; a cell run
# again updates its number in place, so the key maps to the file name and its number is read from
# the table), so each run keys only the cells added since the last one: a long session's thousands
# of cells keyed again each run cost milliseconds a run.
_keyed_cells: tuple[Any, int, str | None, dict[str, str]] = (None, 0, None, {})


def _keyed(mapping: dict[str, Any]) -> dict[str, str]:
    """``{_path_key(file): file}`` over IPython's ``mapping`` (file name -> cell number)."""
    global _keyed_cells
    table, done, last, by_key = _keyed_cells
    if table is not mapping or done > len(mapping) or (last is not None and last not in mapping):
        done, by_key = 0, {}  # another shell's table, or entries taken out (IPython never does)
    if done < len(mapping):
        for k in itertools.islice(mapping, done, None):
            by_key[_path_key(k)] = k
        _keyed_cells = (mapping, len(mapping), next(reversed(mapping)), by_key)
    return by_key


def _path_key(path: str) -> str:
    """A path as one key however it is written: ``/`` for ``\\``; a Windows path (``C:/``,
    ``\\\\server\\share``) case-folded, as Windows compares them; macOS's ``/private/var/...`` (what
    ``/var``, a link, resolves to) as ``/var/...``, where ipykernel's cells are (``$TMPDIR``)."""
    key = path.replace("\\", "/")
    if re.match(r"^([A-Za-z]:/|//)", key):
        key = key.casefold()
    elif key.startswith(("/private/var/", "/private/tmp/")):
        key = key[len("/private"):]
    return key
