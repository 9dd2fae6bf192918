"""The command line: profile a script the way ``python -m cProfile`` does, with nbprof's report.

    python -m nbprof torch [options] script.py [args ...]
    python -m nbprof torch [options] -m package.module [args ...]
    python -m nbprof cprofile [options] script.py [args ...]

The script runs as ``__main__`` with ``sys.argv = [script, args ...]`` and its folder first on
``sys.path``, as ``python script.py`` would run it. Then nbprof prints the report's text table and
writes the standalone HTML report (``-o/--html PATH``, default ``<script>.nbprof.html``;
``--no-html`` to skip). The exit code is the script's: ``sys.exit(n)`` gives n, an exception
prints its traceback and gives 1 (the report of what ran until then is still written), Ctrl-C
gives 130. ``nbprof.step()`` and ``nbprof.cuda_collection()`` work inside the script as in a cell.
"""

from __future__ import annotations

import argparse
import builtins
import os
import sys
import traceback
import types
from typing import Any

from .errors import NbprofError, OptionError

__all__ = ["main", "build_parser"]

PROG = "python -m nbprof"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-s", "--sort", metavar="KEY", default=None, help="Sort the table by this column.")
    p.add_argument("-l", "--limit", metavar="N", type=int, default=None, help="Rows to show (0 = all; default 20).")
    p.add_argument("-o", "--html", metavar="PATH", default=None,
                   help="Write the standalone HTML report here (default: <script>.nbprof.html).")
    p.add_argument("--no-html", dest="no_html", action="store_true", help="Do not write the HTML report.")
    p.add_argument("-q", "--quiet", action="store_true", help="Do not print the report's table.")
    p.add_argument("-m", dest="module", metavar="MODULE", default=None,
                   help="Run a module as a script (like python -m MODULE); the arguments after it go to it.")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Profile a Python script with torch.profiler or cProfile; print nbprof's table and write "
                    "its HTML report.",
        epilog="Examples: python -m nbprof torch --memory train.py --epochs 1; "
               "python -m nbprof cprofile -s cumtime prep.py data.csv",
    )
    sub = parser.add_subparsers(dest="profiler", metavar="{torch,cprofile}")
    sub.required = True
    t = sub.add_parser("torch", help="Profile with torch.profiler (CPU, and CUDA when available).",
                       usage=f"{PROG} torch [options] (script.py | -m module) [args ...]")
    t.add_argument("--cuda", dest="cuda", action="store_true", default=None,
                   help="Record CUDA activity (default: when CUDA is available).")
    t.add_argument("--no-cuda", dest="cuda", action="store_false", help="Record the CPU only.")
    t.add_argument("--memory", action="store_true", help="Record allocations.")
    t.add_argument("--shapes", action="store_true", help="Record input shapes.")
    t.add_argument("--stack", action="store_true", help="Record Python stacks.")
    t.add_argument("--flops", action="store_true", help="Estimate FLOPs of matmuls and convolutions.")
    t.add_argument("--group-by", dest="group_by", choices=["op", "shape", "stack"], default="op",
                   help="Group the table by operator, operator and input shape, or operator and stack.")
    t.add_argument("--schedule", metavar="W,WU,A[,R]", default=None,
                   help="Record only some steps: wait, warmup, active[, repeat] (the script calls nbprof.step()).")
    t.add_argument("--export", metavar="PATH", default=None, help="Also write a chrome trace (.json or .json.gz).")
    t.add_argument("--tensorboard", metavar="DIR", default=None, help="Also write the trace in TensorBoard's layout.")
    _common(t)
    c = sub.add_parser("cprofile", help="Profile with cProfile.",
                       usage=f"{PROG} cprofile [options] (script.py | -m module) [args ...]")
    c.add_argument("--dump", metavar="PATH", default=None, help="Also write a .prof file (pstats, snakeviz).")
    _common(c)
    return parser


_VALUED = {"-s", "--sort", "-l", "--limit", "-o", "--html", "--group-by", "--schedule", "--export",
           "--tensorboard", "--dump"}


def _split(argv: list[str]) -> tuple[list[str], str | None, str | None, list[str]]:
    """``[profiler, options..., script, args...]`` -> (nbprof's part, script, module, script args).

    nbprof's options end at the first word that is not an option (the script) or at ``-m NAME``;
    everything after belongs to the script, dashes included."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if i == 0 and not tok.startswith("-"):  # the subcommand
            out.append(tok)
        elif tok == "-m":
            if i + 1 >= len(argv):
                out.append(tok)  # argparse reports the missing name
                return out, None, None, []
            return out, None, argv[i + 1], argv[i + 2:]
        elif tok == "--":
            if i + 1 < len(argv):
                return out, argv[i + 1], None, argv[i + 2:]
            return out, None, None, []
        elif tok.startswith("-"):
            out.append(tok)
            if tok in _VALUED and i + 1 < len(argv):
                out.append(argv[i + 1])
                i += 1
        else:
            return out, tok, None, argv[i + 1:]
        i += 1
    return out, None, None, []


def _schedule(text: str | None) -> tuple[int, int, int, int] | None:
    if text is None:
        return None
    try:
        nums = [int(p) for p in text.split(",")]
    except ValueError:
        nums = []
    if len(nums) not in (3, 4) or any(n < 0 for n in nums) or nums[2] < 1:
        raise OptionError(f"--schedule {text}: expected wait,warmup,active[,repeat] as whole numbers, active >= 1")
    if len(nums) == 3:
        nums.append(1)
    return tuple(nums)  # type: ignore[return-value]


def _limit(n: int | None) -> int:
    from .settings import DEFAULT_LIMIT

    if n is None:
        return DEFAULT_LIMIT
    if n < 0:
        raise OptionError(f"--limit {n}: must be 0 (all rows) or a positive number of rows")
    return n


def _options(args: argparse.Namespace) -> Any:
    from . import settings

    if args.profiler == "cprofile":
        return settings.PythonOptions(
            sort=settings.resolve_python_sort(args.sort) if args.sort else "tottime_s",
            limit=_limit(args.limit),
            dump=args.dump,
        )
    from .collect.torch_live import cuda_available, import_torch

    import_torch()
    available = cuda_available()
    notes: list[str] = []
    if args.cuda is None:
        cuda = available
    elif args.cuda and not available:
        cuda = False
        notes.append("CUDA is not available here: profiling the CPU only")
        print("nbprof: --cuda: CUDA is not available here: profiling the CPU only", file=sys.stderr)
    else:
        cuda = bool(args.cuda)
    export = args.export
    if export and not export.endswith((".json", ".json.gz")):
        raise OptionError(f"--export {export}: the file must end with .json or .json.gz")
    return settings.TorchOptions(
        cuda=cuda,
        memory=args.memory,
        shapes=args.shapes,
        stack=args.stack,
        flops=args.flops,
        sort=settings.resolve_torch_sort(args.sort) if args.sort else None,
        limit=_limit(args.limit),
        group_by=args.group_by,
        schedule=_schedule(args.schedule),
        export=export,
        tensorboard=args.tensorboard,
        notes=tuple(notes),
    )


# ------------------------------------------------------------------------------------ running


def _load_target(script: str | None, module: str | None) -> tuple[types.CodeType, dict[str, Any], str]:
    """The code to run as ``__main__``, its globals and its ``sys.argv[0]`` (as ``python script.py``
    and ``python -m module`` would set them)."""
    import importlib.util

    if script is not None:
        path = script
        spec = None
    else:
        assert module is not None
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError) as e:
            raise OptionError(f"-m {module}: {e}") from None
        if spec is not None and spec.submodule_search_locations is not None:  # a package: its __main__
            spec = importlib.util.find_spec(f"{module}.__main__")
        if spec is None or not spec.origin or not os.path.isfile(spec.origin):
            raise OptionError(f"-m {module}: no module by that name (or it has no source file to run)")
        path = spec.origin
    with open(path, "rb") as f:
        source = f.read()
    code = compile(source, path, "exec", dont_inherit=True)
    namespace: dict[str, Any] = {"__name__": "__main__", "__file__": path, "__builtins__": builtins,
                                 "__spec__": spec, "__package__": spec.parent if spec else None,
                                 "__cached__": None, "__loader__": spec.loader if spec else None}
    return code, namespace, path


def _execute(code: types.CodeType, namespace: dict[str, Any]) -> None:
    """Run ``code`` as the ``__main__`` module (restored afterwards)."""
    module = types.ModuleType("__main__")
    module.__dict__.update(namespace)
    saved_main = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    finally:
        if saved_main is not None:
            sys.modules["__main__"] = saved_main


def _restore_script_root(session: Any, code: types.CodeType) -> None:
    """cProfile: the script's ``<module>`` frame is called by nbprof (through ``exec``), and
    nbprof's frames and the calls they make are taken out of the stats; give the script's top
    frame its own numbers back, without callers (as pstats shows a root)."""
    profiler = getattr(session, "profiler", None)
    full = getattr(profiler, "stats", None)
    raw = getattr(session, "raw", None)
    key = (code.co_filename, code.co_firstlineno, code.co_name)
    if not full or raw is None or key not in full:
        return
    cc, nc, tt, ct, _ = full[key]
    raw[key] = (cc, nc, tt, ct, {})


def _exit_code(error: BaseException | None) -> int:
    if error is None:
        return 0
    if isinstance(error, SystemExit):
        code = error.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    if isinstance(error, KeyboardInterrupt):
        return 130
    return 1


def _print_traceback(error: BaseException) -> None:
    """The script's traceback, without nbprof's own frames on top."""
    tb = error.__traceback__
    here = os.path.abspath(__file__)
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) == here:
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb, file=sys.stderr)


def write_html(result: Any, path: str) -> str:
    """The standalone HTML report: ``result.to_html(path)`` where the profile has it, else the
    static report in a minimal page."""
    to_html = getattr(result, "to_html", None)
    if callable(to_html):
        to_html(path)
        return path
    from .format import esc

    title = f"nbprof: {os.path.basename(str(result.meta.get('script', 'profile')))}"
    body = result.report().html()
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{esc(title)}</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:1.5em}table.nbprof-table td,"
        "table.nbprof-table th{padding:2px 8px;border-bottom:1px solid #eee}</style>"
        f"</head><body>\n{body}\n</body></html>\n"
    )
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    ours, script, module, script_args = _split(argv)
    args = parser.parse_args(ours)
    if script is None and module is None and args.module is None:
        parser.error(f"{args.profiler}: give a script to run (script.py [args ...]) or -m module")
    module = module or args.module
    if script is not None and not os.path.exists(script):
        print(f"{PROG}: {script}: no such file", file=sys.stderr)
        return 2
    try:
        options = _options(args)
    except NbprofError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2

    from . import _cell

    target = script if script is not None else module
    try:
        code, namespace, path = _load_target(script, module)
    except NbprofError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except (OSError, SyntaxError, ValueError) as e:
        print(f"{PROG}: {target}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    sys.argv[:] = [path] + script_args
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)) if script is not None else os.getcwd())
    magic = "torchprof" if args.profiler == "torch" else "cprofile"
    run = _cell.Run(None, magic, options)
    error: BaseException | None = None
    try:
        run.start()
    except NbprofError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    _cell.set_active(run)  # so nbprof.step() / cuda_collection() reach this run
    try:
        _execute(code, namespace)
    except BaseException as e:  # SystemExit and KeyboardInterrupt too: the report is still written
        error = e
    finally:
        _cell.set_active(None)
        run.stop()
    if magic == "cprofile":
        _restore_script_root(run.session, code)
    if error is not None and not isinstance(error, SystemExit):
        _print_traceback(error)
    status = _exit_code(error)
    try:
        result = run.finish(None if isinstance(error, SystemExit) else error)
    except Exception as e:
        print(f"nbprof: could not build the report: {type(e).__name__}: {e}", file=sys.stderr)
        return status or 1
    result.meta["script"] = target
    result.meta["argv"] = [target] + script_args
    result.meta["notes"] = [n.replace("the cell ", "the script ", 1) for n in result.meta.get("notes", [])]
    sys.stdout.flush()
    if not args.quiet:
        print(result.report().text())
    if not args.no_html:
        default = (os.path.splitext(script)[0] if script is not None else str(module)) + ".nbprof.html"
        out = args.html or default
        try:
            write_html(result, out)
            print(f"nbprof: report written to {out}", file=sys.stderr)
        except OSError as e:
            print(f"nbprof: could not write {out}: {e}", file=sys.stderr)
            return status or 1
    return status
