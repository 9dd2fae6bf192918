"""Run a cell under a profiler exactly as it would run without the magic.

IPython turns a ``%%magic`` cell into one call, ``run_cell_magic(name, line, body)``, which is
synchronous: inside it, top-level ``await`` cannot run on the kernel's event loop, and the body's
line numbers are shifted by one. So for ``%%torchprof`` and ``%%cprofile`` we take another way:

1. an input transformer (IPython's "cleanup" stage, before magics are handled) replaces the
   ``%%torchprof ...`` line with a marker on the same line, the string ``"%%torchprof ..."``
   (so line numbers stay those of the cell; the source kept for tracebacks gets the magic line
   back as typed), and
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
``run_cell_magic``; they run the code synchronously (``magics.run_sync``). Both paths run the
profile through ``nbprof.run.runner``; the flags are read by ``nbprof.magics``.
"""

from __future__ import annotations

import ast
import itertools
import re
import sys
from typing import Any

from .run import runner
from .errors import NbprofError
from .magics import check_cell_flags, parse_flags

__all__ = ["rewrite_cell", "CellWrapper", "begin", "end", "keep", "kept", "show_pending", "NAMESPACE_NAME"]

NAMESPACE_NAME = "__nbprof__"
_MAGIC_LINE = re.compile(r"^%%(torchprof|cprofile)(?:[ \t]+(?P<flags>.*?))?[ \t]*$")


class _State:
    pending: list[Any] = []  # reports to show after the cell
    value: Any = None
    has_value = False


_state = _State()


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
    if not check_cell_flags(magic, flags):
        return lines
    return [repr(lines[0].rstrip("\r\n").strip()) + "\n"] + lines[1:]


# IPython's completeness check (``TransformerManager.check_complete``: terminal IPython's Enter,
# a kernel's is_complete_request for jupyter console and qtconsole) runs the cleanup transforms
# before it looks for a ``%%`` line, except those marked ``has_side_effects``. Run there, this one
# would turn ``%%torchprof`` into a finished statement, and Enter would run an empty cell. Skipped
# there, the cell stays a cell magic to the check, which asks for lines up to a blank one, as for
# ``%%time``; the cell itself is still rewritten when it runs (``transform_cell``).
rewrite_cell.has_side_effects = True  # type: ignore[attr-defined]


def _show_magic_line_as_typed(shell: Any, typed: str) -> None:
    """Put the magic line back, as typed, in the source IPython keeps for tracebacks.

    IPython caches the transformed cell in ``linecache`` (under the cell's file name) before
    the AST transformers run, so a traceback's context would show line 1 as our marker, the
    string literal ``'%%torchprof -o p'``. The cell being transformed is the latest cached one
    whose first line is that literal; only that line is changed (the line count stays, and
    Python never reads this copy again: the code is compiled already). Not in ``%xmode
    Verbose``: it parses this source to show each line's variables, and ``%%torchprof -o p`` is
    not Python (measured: the variables vanish), so there the literal stays."""
    import linecache

    if getattr(getattr(shell, "InteractiveTB", None), "mode", None) == "Verbose":
        return
    names = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
    marker = repr(typed)

    def shown_as_typed(name: Any) -> bool:
        entry = linecache.cache.get(name)
        if entry is None or len(entry) != 4 or not entry[2]:
            return False
        size, mtime, lines, fullname = entry
        if lines[0].rstrip("\r\n") != marker:
            return False
        linecache.cache[name] = (size, mtime, [typed + "\n"] + list(lines[1:]), fullname)
        return True

    # the latest cells first, not a copy of the session's table: a new cell's file is the last one
    if any(shown_as_typed(name) for name in itertools.islice(reversed(names), 8)):
        return
    # a cell run again unchanged in a kernel: ipykernel names a cell's file by its source, so the
    # file keeps its first place in the table however many cells ran since. Every file still
    # showing this marker is a profiled cell of ours; each is put right (a walk of the whole table
    # only when the latest files miss)
    for name in names:
        shown_as_typed(name)


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
            _show_magic_line_as_typed(self.shell, marker.value.value)  # type: ignore[attr-defined]
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


# ------------------------------------------------------------------------- called from the cell


def begin(magic: str, flags: str) -> None:
    """Start profiling (first statement of a wrapped cell)."""
    __tracebackhide__ = True  # noqa: F841  (IPython hides this frame in tracebacks)
    from IPython import get_ipython
    from IPython.core.error import UsageError

    shell = get_ipython()
    _state.pending.clear()
    _state.has_value, _state.value = False, None
    runner.discard_active()  # a run that never ended (should not happen): stop it now
    options = parse_flags(magic, flags)
    run = runner.new_run(magic, options, shell)
    try:
        run.begin()
    except NbprofError as e:
        raise UsageError(str(e)) from None


def keep(value: Any) -> None:
    _state.value, _state.has_value = value, True


def kept() -> Any:
    value = _state.value
    _state.value, _state.has_value = None, False
    return value


def end() -> None:
    """Stop profiling (the ``finally`` of a wrapped cell) and queue the report."""
    __tracebackhide__ = True  # noqa: F841
    run = runner.active()
    if run is None:
        return
    run.stop()
    error = sys.exc_info()[1]
    try:
        result = run.finish_or_warn(error)  # never lets a report problem replace the cell's exception
    except KeyboardInterrupt:
        # the profiler is stopped (stop came first); building the report was interrupted
        run.progress.done()
        runner.warn("report cancelled (interrupted while building it)")
        raise
    if result is None:
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
