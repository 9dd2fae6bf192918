"""Run a cell under a profiler exactly as it would run without the magic.

IPython turns a ``%%magic`` cell into one call, ``run_cell_magic(name, line, body)``, which is
synchronous: inside it, top-level ``await`` cannot run on the kernel's event loop, and the body's
line numbers are shifted by one. So for ``%%torchprof`` and ``%%cprofile`` we take another way:

1. an input transformer (IPython's "cleanup" stage, before magics are handled) replaces the
   ``%%torchprof ...`` line with a marker on the same line, the string ``"%%torchprof ..."``
   (so line numbers stay those of the cell and a traceback shows the magic line as typed), and
   leaves the body to IPython's usual transforms (``!cmd``, ``%magic``);
2. an AST transformer finds the marker and wraps the cell's code::

       try:
           __nbprof__.begin("torchprof", "<flags>")   # starts the profiler
           <the cell's statements>
           __nbprof__.keep(<last expression>)         # if the cell ends with an expression
       finally:
           __nbprof__.end()                           # stops it, whatever happened
       __nbprof__.kept()                              # the value, displayed as the cell's result

   ``__nbprof__`` is this module, put in the user namespace (hidden from ``%who``) by the
   transformer itself, so ``%reset`` cannot lose it; calling it adds no ``__import__`` calls
   to a cProfile profile.

3. IPython then runs it as any cell: in the user namespace, with top-level await on the
   kernel's loop, its exceptions shown as usual; after the cell (``post_run_cell``) the report
   is displayed, below the cell's own output and traceback.

The registered magic functions remain for the line form (``%torchprof stmt``) and for callers of
``run_cell_magic``; they run the code synchronously (``run_sync``).
"""

from __future__ import annotations

import ast
import os
import re
import sys
import time
from typing import Any

from .errors import NbprofError

__all__ = ["rewrite_cell", "CellWrapper", "begin", "end", "keep", "kept", "show_pending", "run_sync", "active",
           "set_active"]

NAMESPACE_NAME = "__nbprof__"
_MAGIC_LINE = re.compile(r"^%%(torchprof|cprofile)(?:[ \t]+(?P<flags>.*?))?[ \t]*$")


class _State:
    active: Any = None  # the Run in progress
    pending: list[Any] = []  # reports to show after the cell
    value: Any = None
    has_value = False


_state = _State()


def active() -> Any:
    """The run in progress (used by nbprof.step / cuda_collection), or None."""
    return _state.active


def set_active(run: Any) -> None:
    """Make ``run`` the run in progress (or none), for runners outside a cell (the CLI)."""
    _state.active = run


# ----------------------------------------------------------------------------------- transforms


def rewrite_cell(lines: list[str]) -> list[str]:
    """Input transformer: ``%%torchprof flags`` on the first line -> the marker statement.

    Cells whose flags do not parse are left alone: IPython then calls the registered magic,
    which reports the problem as a one-line UsageError and does not run the cell.
    """
    if not lines:
        return lines
    m = _MAGIC_LINE.match(lines[0].rstrip("\r\n"))
    if not m:
        return lines
    magic, flags = m.group(1), (m.group("flags") or "")
    if flags.endswith("?"):  # help: %%torchprof?
        return lines
    from .magics import check_cell_flags

    if not check_cell_flags(magic, flags):
        return lines
    return [repr(lines[0].rstrip("\r\n").strip()) + "\n"] + lines[1:]


def _marker_args(node: ast.stmt) -> tuple[str, str] | None:
    """``"%%torchprof --cuda"`` as a cell's first statement -> ("torchprof", "--cuda")."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
        return None
    value = node.value.value
    if not isinstance(value, str):
        return None
    m = _MAGIC_LINE.match(value)
    if not m:
        return None
    return m.group(1), m.group("flags") or ""


def _call(name: str, args: list[ast.expr], where: ast.AST) -> ast.Expr:
    """``__nbprof__.name(*args)`` as a statement, every new node at ``where``'s location.

    The locations are set here, on the few nodes we make, rather than by
    ``ast.fix_missing_locations``, which walks the whole cell (a measurable part of the fixed
    cost of a small profiled cell)."""
    func = ast.Attribute(value=ast.Name(id=NAMESPACE_NAME, ctx=ast.Load()), attr=name, ctx=ast.Load())
    stmt = ast.Expr(ast.Call(func=func, args=args, keywords=[]))
    for node in (stmt, stmt.value, func, func.value, *(a for a in args if isinstance(a, ast.Constant))):
        ast.copy_location(node, where)
    return stmt


class CellWrapper(ast.NodeTransformer):
    """AST transformer: wrap a marked cell in begin / try / finally end (see the module doc)."""

    def __init__(self, shell: Any = None) -> None:
        super().__init__()
        self.shell = shell

    def visit_Module(self, node: ast.Module) -> ast.Module:
        if not node.body:
            return node
        marker = node.body[0]
        args = _marker_args(marker)
        if args is None:
            return node
        if self.shell is not None:
            self.shell.user_ns[NAMESPACE_NAME] = sys.modules[__name__]
            self.shell.user_ns_hidden[NAMESPACE_NAME] = sys.modules[__name__]
        body = node.body[1:]
        tail: list[ast.stmt] = []
        if body and isinstance(body[-1], ast.Expr):
            last = body[-1]
            body[-1] = _call("keep", [last.value], last)
            tail = [_call("kept", [], last)]
        begin_stmt = _call("begin", [ast.Constant(args[0]), ast.Constant(args[1])], marker)
        end_stmt = _call("end", [], body[-1] if body else marker)
        wrapped = ast.copy_location(
            ast.Try(body=[begin_stmt] + body, handlers=[], orelse=[], finalbody=[end_stmt]), marker
        )
        node.body = [wrapped] + tail
        return node


# ----------------------------------------------------------------------------------- the run


class Run:
    """One profiled cell: its options, its collector session, and what to do when it ends."""

    def __init__(self, shell: Any, magic: str, options: Any) -> None:
        self.shell = shell
        self.magic = magic
        self.options = options
        self.error: BaseException | None = None
        self.started = 0.0
        self.wall_s = 0.0
        self._stopped = False
        self._data: Any = None
        from .views.progress import Progress

        self.progress = Progress()
        if magic == "torchprof":
            from .collect.torch_live import TorchSession

            self.session: Any = TorchSession(options, self.progress)
        else:
            from .collect.cprofile import CProfileSession

            self.session = CProfileSession()

    def start(self) -> None:
        self.started = time.perf_counter()
        self.session.start()

    def stop(self) -> None:
        """Stop the profiler. The first thing done at the end of a cell: nothing nbprof does
        afterwards is recorded."""
        if self._stopped:
            return
        self._stopped = True
        self._data = self.session.stop()
        self.wall_s = time.perf_counter() - self.started

    def finish(self, error: BaseException | None) -> Any:
        """Stop the profiler (if not yet), then build the result, store it and queue the report."""
        self.stop()
        self.error = error
        result = self._build(self._data)
        opts = self.options
        if opts.output:
            self.shell.user_ns[opts.output] = result
        self._write_files(result)
        return result

    def _notes(self) -> list[str]:
        notes = list(getattr(self.options, "notes", ()))
        if self.error is not None:
            kind = "was interrupted" if isinstance(self.error, KeyboardInterrupt) else "raised"
            msg = f"{type(self.error).__name__}"
            text = str(self.error).strip().splitlines()[0] if str(self.error).strip() else ""
            if text and not isinstance(self.error, KeyboardInterrupt):
                msg += f": {text[:120]}"
            notes.append(
                f"the cell {kind} ({msg}); this report shows what was recorded until then"
                if kind == "raised"
                else f"the cell {kind}; this report shows what was recorded until then"
            )
        return notes

    def _build(self, data: Any) -> Any:
        opts = self.options
        if self.magic == "torchprof":
            from .collect.chrome_trace import empty_trace
            from .model import TorchProfile

            notes = self._notes() + [f"torch: {w}" for w in self.session.native_warnings()]
            if data is None:
                data = empty_trace()
                if opts.schedule is not None:
                    notes.append("with --schedule, call nbprof.step() once per loop iteration")
            if len(data.events):
                self.progress.stage(f"nesting {len(data.events):,} events")
            meta = dict(
                sort=opts.sort,
                limit=opts.limit,
                group_by=opts.group_by,
                notes=notes,
                wall_s=self.wall_s,
                with_cuda=opts.cuda,
                cell_error=_describe_error(self.error),
                record_shapes=opts.shapes,
                profile_memory=opts.memory,
                with_stack=opts.stack,
                with_flops=opts.flops,
            )
            return TorchProfile.from_trace(data, profiler=self.session.profiler, **meta)
        from .analysis.callgraph import other_threads_suspected
        from .model import PythonProfile

        meta = dict(
            sort=opts.sort,
            limit=opts.limit,
            notes=self._notes(),
            wall_s=self.wall_s,
            cell_error=_describe_error(self.error),
            code_names=_code_names(self.shell, {k[0] for k in (data or {})}),
        )
        profile = PythonProfile(data or {}, meta, profiler=self.session.profiler)
        if sys.version_info >= (3, 12) and other_threads_suspected(profile.stats, profile.edges, self.wall_s):
            profile.meta["notes"].append(
                "other threads ran Python code during this cell: on Python 3.12+ cProfile records their "
                "calls on the cell's stack, so their times (and the flame view) are not reliable"
            )
        return profile

    def _write_files(self, result: Any) -> None:
        opts = self.options
        notes = result.meta.setdefault("notes", [])
        if self.magic == "torchprof":
            if opts.export:
                result.to_chrome_trace(opts.export)
                notes.append(f"trace written to {opts.export}")
            if opts.tensorboard:
                path = _tensorboard_path(opts.tensorboard)
                result.to_chrome_trace(path)
                notes.append(f"trace written to {path} (tensorboard --logdir {opts.tensorboard})")
        elif opts.dump:
            result.dump(opts.dump)
            notes.append(f"profile written to {opts.dump} (snakeviz {opts.dump})")


def _describe_error(error: BaseException | None) -> str | None:
    return None if error is None else type(error).__name__


def _tensorboard_path(folder: str) -> str:
    """TensorBoard's profiler layout: <dir>/<host>_<pid>.<time_ns>.pt.trace.json."""
    import socket

    os.makedirs(folder, exist_ok=True)
    worker = f"{socket.gethostname()}_{os.getpid()}"
    return os.path.join(folder, f"{worker}.{time.time_ns()}.pt.trace.json")


def _code_names(shell: Any, filenames: set[str]) -> dict[str, str]:
    """Notebook cells are compiled from temporary files; name them "In [n]" as IPython does."""
    mapping = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
    out = {}
    for f in filenames:
        n = mapping.get(f)
        if n is not None:
            out[f] = f"In [{n}]"
        elif f.startswith("<ipython-input-"):
            m = re.match(r"<ipython-input-(\d+)-", f)
            if m:
                out[f] = f"In [{m.group(1)}]"
    return out


# ------------------------------------------------------------------------- called from the cell


def begin(magic: str, flags: str) -> None:
    """Start profiling (first statement of a wrapped cell)."""
    __tracebackhide__ = True  # noqa: F841  (IPython hides this frame in tracebacks)
    from IPython import get_ipython
    from IPython.core.error import UsageError

    from .magics import parse_flags

    shell = get_ipython()
    _state.pending.clear()
    _state.has_value, _state.value = False, None
    if _state.active is not None:  # a run that never ended (should not happen): stop it now
        stale, _state.active = _state.active, None
        try:
            stale.session.stop()
        except BaseException:
            pass
    options = parse_flags(magic, flags, cell=True)
    run = Run(shell, magic, options)
    # active before it starts: an interrupt landing right after the profiler starts must still
    # find the run in end(), which stops it
    _state.active = run
    try:
        run.start()
    except NbprofError as e:
        _state.active = None
        raise UsageError(str(e)) from None
    except BaseException:
        _state.active = None
        run.session.stop()
        raise


def keep(value: Any) -> None:
    _state.value, _state.has_value = value, True


def kept() -> Any:
    value = _state.value
    _state.value, _state.has_value = None, False
    return value


def end() -> None:
    """Stop profiling (the ``finally`` of a wrapped cell) and queue the report."""
    __tracebackhide__ = True  # noqa: F841
    run, _state.active = _state.active, None
    if run is None:
        return
    run.stop()
    error = sys.exc_info()[1]
    try:
        result = run.finish(error)
    except KeyboardInterrupt:
        # the profiler is stopped (finish stops it first); building the report was interrupted
        run.progress.done()
        _warn("report cancelled (interrupted while building it)")
        raise
    except Exception as e:  # never let a report problem replace the cell's own exception
        run.progress.done()
        _warn(f"could not build the report: {type(e).__name__}: {e}")
        return
    if not run.options.quiet:
        _state.pending.append((result, run.progress))
    else:
        run.progress.done()


def show_pending(*_: Any) -> None:
    """post_run_cell hook: display the reports of the cell that just ran."""
    reports, _state.pending = list(_state.pending), []
    if not reports:
        return
    from IPython.display import display

    for result, progress in reports:
        progress.stage("drawing the report")
        try:
            display(result)
        finally:
            progress.done()


def _warn(message: str) -> None:
    print(f"nbprof: {message}", file=sys.stderr)


# ------------------------------------------------------------------------ the synchronous path


def run_sync(shell: Any, magic: str, options: Any, code: str) -> Any:
    """Run ``code`` under a profiler here and now (line magic, or a direct run_cell_magic call).

    Returns the value of a final expression (IPython displays it) and displays the report.
    """
    __tracebackhide__ = True  # noqa: F841
    from IPython.core.error import UsageError

    if _state.active is not None:
        raise UsageError("a profiled cell is already running; profiles cannot nest")
    run = Run(shell, magic, options)
    compiled = _compile(shell, code)  # syntax errors surface before the profiler starts
    # read the namespaces now: IPython's properties would otherwise be profiled
    namespaces = (shell.user_global_ns, shell.user_ns)
    value = None
    error: BaseException | None = None
    _state.active = run
    try:
        run.start()
    except NbprofError as e:
        _state.active = None
        raise UsageError(str(e)) from None
    except BaseException:
        _state.active = None
        run.session.stop()
        raise
    try:
        value = _execute(compiled, *namespaces)
    except BaseException as e:
        error = e
        raise
    finally:
        _state.active = None
        try:
            result = run.finish(error)
        except Exception as e:
            _warn(f"could not build the report: {type(e).__name__}: {e}")
        else:
            if not options.quiet:
                from IPython.display import display

                run.progress.stage("drawing the report")
                display(result)
        finally:
            run.progress.done()
    return value


def _compile(shell: Any, code: str) -> tuple[Any, Any]:
    source = shell.transform_cell(code)
    tree = shell.compile.ast_parse(source)
    tree = shell.transform_ast(tree)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    filename = shell.compile.cache(code) if hasattr(shell.compile, "cache") else "<nbprof>"
    body = compile(tree, filename, "exec")
    expr = compile(last, filename, "eval") if last is not None else None
    return body, expr


def _execute(compiled: tuple[Any, Any], user_global_ns: dict, user_ns: dict) -> Any:
    body, expr = compiled
    exec(body, user_global_ns, user_ns)
    if expr is not None:
        return eval(expr, user_global_ns, user_ns)
    return None
