"""%%torchprof and %%cprofile: flags in, options out; the run itself is ``nbprof._cell``.

Flags are declared with IPython's ``magic_arguments``, so ``%%torchprof?`` lists them all. Every
bad flag is a one-line ``UsageError`` that names the valid choices, raised before the cell runs.
Loading the extension imports neither torch nor plotly.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from . import settings
from .errors import NbprofError, OptionError
from .settings import PythonOptions, TorchOptions

__all__ = ["ProfileMagics", "parse_flags", "check_cell_flags", "load", "unload"]


@magics_class
class ProfileMagics(Magics):
    @magic_arguments()
    @argument("--cuda", dest="cuda", action="store_true", default=None,
              help="Record CUDA kernels, copies and streams (default: on when CUDA is available, "
                   "unless the controls panel turned it off).")
    @argument("--no-cuda", dest="cuda", action="store_false", help="Record the CPU only.")
    @argument("--memory", dest="memory", action="store_true", default=None,
              help="Record allocations: memory per operator and the memory curve.")
    @argument("--no-memory", dest="memory", action="store_false", help="Do not record allocations.")
    @argument("--shapes", dest="shapes", action="store_true", default=None,
              help="Record input shapes (for --group-by shape).")
    @argument("--no-shapes", dest="shapes", action="store_false", help="Do not record input shapes.")
    @argument("--stack", dest="stack", action="store_true", default=None,
              help="Record Python stacks (for --group-by stack).")
    @argument("--no-stack", dest="stack", action="store_false", help="Do not record Python stacks.")
    @argument("--flops", action="store_true", default=False, help="Estimate FLOPs of matmuls and convolutions.")
    @argument("--sort", metavar="KEY", default=None,
              help="Sort tables by this column (self_cpu_us, cpu_total_us, self_device_us, device_total_us, "
                   "cpu_mem_bytes, count, ...; torch's names such as self_cuda_time_total work too).")
    @argument("--limit", metavar="N", type=int, default=None, help="Rows to show (0 = all; default 20).")
    @argument("--group-by", dest="group_by", choices=["op", "shape", "stack"], default="op",
              help="Group the table by operator, operator and input shape, or operator and Python stack.")
    @argument("--schedule", metavar="W,WU,A[,R]", default=None,
              help="Record only some steps: wait, warmup, active[, repeat] (call nbprof.step() each step).")
    @argument("--export", metavar="PATH", default=None, help="Also write a chrome trace (.json or .json.gz).")
    @argument("--tensorboard", metavar="DIR", default=None, help="Also write the trace in TensorBoard's layout.")
    @argument("-o", dest="output", metavar="NAME", default=None,
              help="Store the result (a TorchProfile) in this variable.")
    @argument("-q", "--quiet", action="store_true", default=False, help="Do not display the report.")
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

    @magic_arguments()
    @argument("-s", "--sort", metavar="KEY", default=None,
              help="Sort by a pstats key: tottime (default), cumtime, ncalls, pcalls, filename, line, name.")
    @argument("-l", "--limit", metavar="N", type=int, default=None, help="Rows to show (0 = all; default 20).")
    @argument("--dump", metavar="PATH", default=None, help="Also write a .prof file (pstats, snakeviz).")
    @argument("-o", dest="output", metavar="NAME", default=None,
              help="Store the result (a PythonProfile) in this variable.")
    @argument("-q", "--quiet", action="store_true", default=False, help="Do not display the report.")
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
        from . import _cell

        if cell is None:
            flags, statement = split_line(magic, line)
            code = statement
        else:
            flags, code = line, cell
        options = parse_flags(magic, flags, cell=True)
        if not code.strip():
            raise UsageError(f"%{magic}: nothing to profile (usage: %{magic} [flags] statement)")
        return _cell.run_sync(self.shell, magic, options, code)


# ------------------------------------------------------------------------------------ parsing

_FUNCS = {"torchprof": ProfileMagics.torchprof, "cprofile": ProfileMagics.cprofile}
_TOKEN = re.compile(r"""("[^"]*"|'[^']*'|\S+)""")


def _parser(magic: str) -> argparse.ArgumentParser:
    return _FUNCS[magic].parser  # type: ignore[attr-defined]


def _flag_names(magic: str) -> list[str]:
    names: list[str] = []
    for action in _parser(magic)._actions:
        names += [o for o in action.option_strings if o not in ("-h", "--help")]
    return names


def _takes_value(magic: str) -> set[str]:
    out = set()
    for action in _parser(magic)._actions:
        if action.nargs != 0:
            out.update(action.option_strings)
    return out


def split_line(magic: str, line: str) -> tuple[str, str]:
    """``"--cuda -o p model(x, -1)"`` -> (``"--cuda -o p"``, ``"model(x, -1)"``).

    Leading tokens that start with "-" are flags (with their values); the statement is the rest
    of the line, untouched (shlex would eat its quotes).
    """
    valued = _takes_value(magic)
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
        if "unrecognized arguments" in msg or "unexpected" in msg:
            msg += f"; valid flags: {' '.join(_flag_names(magic))}"
        raise UsageError(f"%%{magic}: {msg}") from None
    if len(_PARSED) >= 32:
        _PARSED.clear()
    _PARSED[(magic, flags)] = argparse.Namespace(**vars(args))
    return args


def _check_path(flag: str, path: str, suffixes: tuple[str, ...] | None = None) -> str:
    path = os.path.expanduser(path.strip("\"'"))
    if suffixes and not path.endswith(suffixes):
        raise OptionError(f"{flag} {path}: the file must end with {' or '.join(suffixes)}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise OptionError(f"{flag} {path}: the folder {folder} does not exist")
    return path


def _check_name(name: str | None) -> str | None:
    if name is not None and not name.isidentifier():
        raise OptionError(f"-o {name}: not a valid variable name")
    return name


def _check_limit(limit: int | None) -> int:
    if limit is None:
        return settings.DEFAULT_LIMIT
    if limit < 0:
        raise OptionError(f"--limit {limit}: must be 0 (all rows) or a positive number of rows")
    return limit


def _parse_schedule(text: str | None) -> tuple[int, int, int, int] | None:
    if text is None:
        return None
    parts = text.split(",")
    try:
        nums = [int(p) for p in parts]
    except ValueError:
        nums = []
    if len(nums) not in (3, 4) or any(n < 0 for n in nums) or nums[2] < 1:
        raise OptionError(
            f"--schedule {text}: expected wait,warmup,active[,repeat] as whole numbers, active >= 1 (e.g. 1,1,3)"
        )
    if len(nums) == 3:
        nums.append(1)
    return tuple(nums)  # type: ignore[return-value]


def _torch_options(args: argparse.Namespace) -> TorchOptions:
    return TorchOptions(
        cuda=bool(args.cuda),  # resolved later (needs torch): see resolve_cuda
        memory=bool(args.memory),
        shapes=bool(args.shapes),
        stack=bool(args.stack),
        flops=bool(args.flops),
        sort=settings.resolve_torch_sort(args.sort) if args.sort else None,
        limit=_check_limit(args.limit),
        group_by=args.group_by,
        schedule=_parse_schedule(args.schedule),
        export=_check_path("--export", args.export, (".json", ".json.gz")) if args.export else None,
        tensorboard=os.path.expanduser(args.tensorboard) if args.tensorboard else None,
        output=_check_name(args.output),
        quiet=bool(args.quiet),
    )


def _python_options(args: argparse.Namespace) -> PythonOptions:
    return PythonOptions(
        sort=settings.resolve_python_sort(args.sort) if args.sort else "tottime_s",
        limit=_check_limit(args.limit),
        dump=_check_path("--dump", args.dump) if args.dump else None,
        output=_check_name(args.output),
        quiet=bool(args.quiet),
    )


def check_cell_flags(magic: str, flags: str) -> bool:
    """True when the flags parse and the magic can run; never raises, never imports torch."""
    try:
        args = _parse_args(magic, flags)
        if magic == "torchprof":
            _torch_options(args)
            if "torch" not in sys.modules and importlib.util.find_spec("torch") is None:
                return False
        else:
            _python_options(args)
    except (UsageError, NbprofError):
        return False
    return True


def parse_flags(magic: str, flags: str, cell: bool = True) -> TorchOptions | PythonOptions:
    """Flags -> options with defaults applied (panel, then built-ins). Raises UsageError."""
    args = _parse_args(magic, flags)
    try:
        if magic == "cprofile":
            return _python_options(args)
        options = _torch_options(args)
    except NbprofError as e:
        raise UsageError(f"%%{magic}: {e}") from None
    return _apply_panel(options, args)


def _apply_panel(options: TorchOptions, args: argparse.Namespace) -> TorchOptions:
    """Fill what the flags left open from the controls panel, then built-ins; check CUDA."""
    from dataclasses import replace

    from .collect.torch_live import cuda_available, import_torch

    try:
        import_torch()
    except NbprofError as e:
        raise UsageError(str(e)) from None
    panel = settings.panel
    memory = args.memory if args.memory is not None else panel.memory
    shapes = args.shapes if args.shapes is not None else panel.shapes
    stack = args.stack if args.stack is not None else panel.stack
    available = cuda_available()
    wanted = args.cuda if args.cuda is not None else panel.cuda
    notes: list[str] = []
    if wanted is None:
        cuda = available
    elif wanted and not available:
        cuda = False
        message = "CUDA is not available here: profiling the CPU only"
        if args.cuda:  # asked for by flag: say so right away, in one line
            print(f"nbprof: --cuda: {message}", file=sys.stderr)
        notes.append(message)
    else:
        cuda = bool(wanted)
    options = replace(options, cuda=cuda, memory=bool(memory), shapes=bool(shapes), stack=bool(stack),
                      notes=tuple(notes))
    _check_sort_is_collected(options)
    return options


# the columns a run fills only with these options on (device columns also need CUDA)
_SORT_NEEDS = {
    "self_device_us": ("cuda",),
    "device_total_us": ("cuda",),
    "device_avg_us": ("cuda",),
    "self_device_mem_bytes": ("memory", "cuda"),
    "device_mem_bytes": ("memory", "cuda"),
    "self_cpu_mem_bytes": ("memory",),
    "cpu_mem_bytes": ("memory",),
    "flops": ("flops",),
}


def _recorded(column: str, options: TorchOptions) -> bool:
    return all(getattr(options, need) for need in _SORT_NEEDS.get(column, ()))


def _check_sort_is_collected(options: TorchOptions) -> None:
    """``--sort`` by a column this run will not fill is a mistake: say so before the cell runs."""
    if options.sort is None or _recorded(options.sort, options):
        return
    needs = " ".join(f"--{n}" for n in _SORT_NEEDS[options.sort])
    valid = [k for k, v in settings.TORCH_SORT_KEYS.items() if k == v and _recorded(k, options)]
    raise UsageError(
        f"%%torchprof: --sort {options.sort}: this run does not record it (needs {needs}); "
        f"sort by one of: {', '.join(valid)}"
    )


# -------------------------------------------------------------------------- extension hooks


def load(shell: Any) -> None:
    from ._cell import CellWrapper, rewrite_cell, show_pending

    shell.register_magics(ProfileMagics)
    cleanup = shell.input_transformers_cleanup
    if rewrite_cell not in cleanup:
        cleanup.append(rewrite_cell)
    if not any(isinstance(t, CellWrapper) for t in shell.ast_transformers):
        shell.ast_transformers.append(CellWrapper(shell))
    try:
        shell.events.unregister("post_run_cell", show_pending)
    except ValueError:
        pass
    shell.events.register("post_run_cell", show_pending)


def unload(shell: Any) -> None:
    from ._cell import CellWrapper, rewrite_cell, show_pending

    for kind in ("line", "cell"):
        table = shell.magics_manager.magics[kind]
        for name in ("torchprof", "cprofile"):
            table.pop(name, None)
    cleanup = shell.input_transformers_cleanup
    while rewrite_cell in cleanup:
        cleanup.remove(rewrite_cell)
    shell.ast_transformers[:] = [t for t in shell.ast_transformers if not isinstance(t, CellWrapper)]
    from ._cell import NAMESPACE_NAME

    shell.user_ns.pop(NAMESPACE_NAME, None)
    shell.user_ns_hidden.pop(NAMESPACE_NAME, None)
    try:
        shell.events.unregister("post_run_cell", show_pending)
    except ValueError:
        pass
