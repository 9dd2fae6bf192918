"""%%torchprof and %%cprofile: flags in, options out; and the synchronous path of the line magics.

A ``%%torchprof`` cell normally never calls these magic functions: the input transformer in
``nbprof._cell`` rewrites it so that IPython runs it as any cell. The registered functions serve
the line form (``%torchprof stmt``), callers of ``run_cell_magic``, and cells whose flags do not
parse (the magic then reports the problem); they run the code here and now (``run_sync``).

Flags are declared once in ``nbprof.run.flags`` (shared with the command line) and given to IPython's
``magic_arguments``, so ``%%torchprof?`` lists them all. Every bad flag is a one-line
``UsageError`` that names the valid choices, raised before the code runs. Loading the extension
imports neither torch nor plotly.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import sys
from typing import Any, Callable

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from .run import flags as flagdefs
from .run import runner
from .errors import MissingDependencyError, NbprofError
from .run.flags import Flag
from .settings import PythonOptions, TorchOptions

__all__ = ["ProfileMagics", "MAGIC_FLAGS", "parse_flags", "check_cell_flags", "split_line", "run_sync"]


MAGIC_FLAGS: dict[str, tuple[Flag, ...]] = {magic: flagdefs.magic_flags(magic) for magic in ("torchprof", "cprofile")}


def _with_flags(magic: str) -> Callable[[Any], Any]:
    """``@magic_arguments()`` and one ``@argument`` per flag of ``MAGIC_FLAGS[magic]``, in order."""

    def decorate(func: Any) -> Any:
        for flag in reversed(MAGIC_FLAGS[magic]):  # as if written top-down above the function
            func = argument(*flag.names, **flag.argparse_kwargs())(func)
        return magic_arguments()(func)

    return decorate


@magics_class
class ProfileMagics(Magics):
    @_with_flags("torchprof")
    @no_var_expand
    @line_cell_magic
    def torchprof(self, line: str, cell: str | None = None) -> Any:
        """Profile a cell (or a statement) with torch.profiler and show the report.

        ::

            %%torchprof --cuda --memory
            loss = model(x).sum(); loss.backward()

            %torchprof -o prof model(x)
        """
        return self._run("torchprof", line, cell)

    @_with_flags("cprofile")
    @no_var_expand
    @line_cell_magic
    def cprofile(self, line: str, cell: str | None = None) -> Any:
        """Profile a cell (or a statement) with cProfile and show the report.

        ::

            %%cprofile -s cumtime
            clean(load(path))
        """
        return self._run("cprofile", line, cell)

    def _run(self, magic: str, line: str, cell: str | None) -> Any:
        if cell is None:
            flags, statement = split_line(magic, line)
            code = statement
        else:
            flags, code = line, cell
        options = parse_flags(magic, flags)
        if not code.strip():
            if cell is None:
                raise UsageError(f"%{magic}: nothing to profile (usage: %{magic} [flags] statement)")
            raise UsageError(f"%%{magic}: the cell is empty: nothing to profile")
        return run_sync(self.shell, magic, options, code)


# ------------------------------------------------------------------------------------ parsing

_FUNCS = {"torchprof": ProfileMagics.torchprof, "cprofile": ProfileMagics.cprofile}
_TOKEN = re.compile(r"""("[^"]*"|'[^']*'|\S+)""")


def split_line(magic: str, line: str) -> tuple[str, str]:
    """``"--cuda -o p model(x, -1)"`` -> (``"--cuda -o p"``, ``"model(x, -1)"``).

    Leading tokens that start with "-" are flags (with their values); the statement is the rest
    of the line, untouched (shlex would eat its quotes).
    """
    valued = flagdefs.valued_names(MAGIC_FLAGS[magic])
    expect_value = False
    for m in _TOKEN.finditer(line):
        tok = m.group(0)
        if expect_value:
            expect_value = False
            continue
        if tok.startswith("-") and not re.match(r"^-\d", tok):
            expect_value = tok.split("=", 1)[0] in valued and "=" not in tok
            continue
        return line[: m.start()].strip(), line[m.start():]
    return line.strip(), ""


_PARSED: dict[tuple[str, str], argparse.Namespace] = {}


def _parse_args(magic: str, flags: str) -> argparse.Namespace:
    """Parse a flag string (argparse), remembering the last few good ones.

    A profiled cell's flags are parsed twice (the input transformer checks them, ``begin``
    uses them) and a re-run cell has the same flags: argparse is ~0.1 ms a time, a real part
    of a small cell's overhead. The cache holds only the parse; defaults and checks that
    depend on the moment (panel, paths, CUDA) are applied afterwards, every time."""
    cached = _PARSED.get((magic, flags))
    if cached is not None:
        return argparse.Namespace(**vars(cached))
    try:
        args = parse_argstring(_FUNCS[magic], flags)
    except UsageError as e:
        msg = str(e).strip().splitlines()[-1] if str(e).strip() else "bad flags"
        msg = re.sub(r"^[^:]*error: ", "", msg)
        if msg.startswith("unrecognized arguments: "):
            msg = flagdefs.unrecognized(msg.split(": ", 1)[1].split(), MAGIC_FLAGS[magic])
        if "unrecognized arguments" in msg or "unexpected" in msg:
            msg += f"; valid flags: {' '.join(flagdefs.flag_names(MAGIC_FLAGS[magic]))}"
        raise UsageError(f"%%{magic}: {msg}") from None
    if len(_PARSED) >= 32:
        _PARSED.clear()
    _PARSED[(magic, flags)] = argparse.Namespace(**vars(args))
    return args


def check_cell_flags(magic: str, flags: str) -> bool:
    """True when the flags parse and the magic can run; never raises, never imports torch."""
    try:
        args = _parse_args(magic, flags)
        if magic == "torchprof":
            flagdefs.torch_options(args)
            if "torch" not in sys.modules and importlib.util.find_spec("torch") is None:
                return False
        else:
            flagdefs.python_options(args)
    except (UsageError, NbprofError):
        return False
    return True


def parse_flags(magic: str, flags: str) -> TorchOptions | PythonOptions:
    """Flags -> options with defaults applied (panel, then built-ins). Raises UsageError."""
    args = _parse_args(magic, flags)
    try:
        return flagdefs.run_options(magic, args)
    except MissingDependencyError as e:  # already says what to install, and for which magic
        raise UsageError(str(e)) from None
    except NbprofError as e:
        raise UsageError(f"%%{magic}: {e}") from None


# ------------------------------------------------------------------------ the synchronous path


def run_sync(shell: Any, magic: str, options: Any, code: str) -> Any:
    """Run ``code`` under a profiler here and now (line magic, or a direct run_cell_magic call).

    Returns the value of a final expression (IPython displays it) and displays the report.
    """
    __tracebackhide__ = True  # noqa: F841
    if runner.active() is not None:
        raise UsageError("a profiled cell is already running; profiles cannot nest")
    run = runner.new_run(magic, options, shell)
    compiled = _compile(shell, code)  # syntax errors surface before the profiler starts
    # read the namespaces now: IPython's properties would otherwise be profiled
    namespaces = (shell.user_global_ns, shell.user_ns)
    value = None
    error: BaseException | None = None
    try:
        run.begin()
    except NbprofError as e:
        raise UsageError(str(e)) from None
    try:
        value = _execute(compiled, *namespaces)
    except BaseException as e:
        error = e
        raise
    finally:
        try:
            result = run.finish_or_warn(error)
            if result is not None and not options.quiet:
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
    # numbered as the cell that runs it, the latest IPython compiled (its table then names the
    # statement "In [n]", not "In [0]"; execution_count is n or n + 1 by then, by IPython version)
    compiled = getattr(shell.compile, "_filename_map", None) or {}
    number = next(reversed(compiled.values()), 0) if isinstance(compiled, dict) else 0
    filename = shell.compile.cache(code, number) if hasattr(shell.compile, "cache") else "<nbprof>"
    body = compile(tree, filename, "exec")
    expr = compile(last, filename, "eval") if last is not None else None
    return body, expr


def _execute(compiled: tuple[Any, Any], user_global_ns: dict, user_ns: dict) -> Any:
    body, expr = compiled
    exec(body, user_global_ns, user_ns)
    if expr is not None:
        return eval(expr, user_global_ns, user_ns)
    return None
