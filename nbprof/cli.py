"""The command line: profile a script the way ``python -m cProfile`` does, with nbprof's report.

    nbprof torch [options] script.py [args ...]          (or python -m nbprof ...)
    nbprof torch [options] -m package.module [args ...]
    nbprof cprofile [options] script.py [args ...]
    nbprof view [--html OUT] PATH                        a .prof file, a chrome trace or a folder of them,
                                                         or a CUDA memory snapshot (.pickle)

The script runs as ``__main__`` with ``sys.argv = [script, args ...]`` and its folder first on
``sys.path``, as ``python script.py`` would run it. Then nbprof prints the report's text table and
writes the standalone HTML report (``--html PATH``, default ``<script>.nbprof.html``;
``--no-html`` to skip). The flags are the magics' (``nbprof.run.flags``); ``nbprof`` is the same
command, installed with the package. The exit code is the script's: ``sys.exit(n)`` gives n, an exception
prints its traceback and gives 1 (the report of what ran until then is still written), Ctrl-C
gives 130. ``nbprof.step()`` and ``nbprof.cuda_collection()`` work inside the script as in a cell.

``nbprof view PATH`` runs nothing: it reads a profile written before (a ``.prof`` file of
``python -m cProfile -o``, a chrome trace ``.json``/``.json.gz``, a folder of traces, one per
rank, or a CUDA memory snapshot ``_dump_snapshot`` wrote, recognized by its content: a pickle, read
as data), prints its text table and writes its standalone HTML report (``--html OUT``, default PATH
without its suffix + ``.nbprof.html``), as ``load_prof`` / ``load_trace`` / ``load_snapshot`` and
``to_html`` would.
"""

from __future__ import annotations

import argparse
import builtins
import os
import sys
import traceback
import types
from typing import TYPE_CHECKING, Any

from . import settings
from .errors import NbprofError, OptionError
from .run import flags
from .run.flags import Flag

if TYPE_CHECKING:  # pragma: no cover
    from .collect.cprofile import CProfileSession

__all__ = ["main", "build_parser"]

# how the command was typed, for its usage and messages: the console script, or the module
PROG = "nbprof" if os.path.basename(sys.argv[0] or "") in ("nbprof", "nbprof.exe") else "python -m nbprof"

# the subcommands and the profilers (magics) they run; their flags are the magics' (nbprof.run.flags)
PROFILERS = {"torch": "torchprof", "cprofile": "cprofile"}


def _flags(subcommand: str) -> tuple[Flag, ...]:
    return flags.command_line_flags(PROFILERS[subcommand])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Profile a Python script with torch.profiler or cProfile, or open a profile you have "
                    "(a .prof, a trace, a folder of ranks); print nbprof's table and write its HTML report.",
        epilog=f"Examples: {PROG} torch --memory train.py --epochs 1; "
               f"{PROG} cprofile -s cumtime prep.py data.csv; {PROG} view run.prof",
    )
    sub = parser.add_subparsers(dest="profiler", metavar="{torch,cprofile,view}")
    sub.required = True
    helps = {"torch": "Profile with torch.profiler (CPU, and CUDA when available).",
             "cprofile": "Profile with cProfile."}
    for name, text in helps.items():
        p = sub.add_parser(name, help=text, usage=f"{PROG} {name} [options] (script.py | -m module) [args ...]")
        flags.add_flags(p, _flags(name))
    view_parser(sub.add_parser)
    return parser


VIEW_HELP = ("The report of a profile written before: a .prof file (python -m cProfile -o, %%cprofile --dump), "
             "a chrome trace (.json, .json.gz), a folder of traces (one per rank) or a CUDA memory snapshot "
             "(torch.cuda.memory._dump_snapshot's .pickle, read as data: nothing in it runs).")


def view_parser(add: Any) -> argparse.ArgumentParser:
    """``nbprof view``'s parser, a subcommand of the main one (``add``: its ``add_parser``)."""
    p = add("view", help=VIEW_HELP, description=VIEW_HELP + " Prints its text table and writes its HTML report.",
            usage=f"{PROG} view [-s KEY] [-l N] [-q] [--html OUT | --no-html] PATH")
    p.add_argument("path", metavar="PATH", help="a .prof file, a trace file, a folder of trace files or a memory "
                                                "snapshot")
    flags.add_flags(p, flags.VIEW_FLAGS)
    return p


# flags followed by a value, in either subcommand (the value is not the script)
_VALUED = flags.valued_names(_flags("torch")) | flags.valued_names(_flags("cprofile"))


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
    if sys.version_info < (3, 14):
        # the interpreter starts __main__ with an empty __annotations__ (3.8-3.13, checked): a script may read it
        # without annotating anything; 3.14 keeps module annotations lazily (PEP 649/749), not checked there
        namespace["__annotations__"] = {}
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


def _restore_script_root(session: "CProfileSession", code: types.CodeType) -> None:
    """cProfile: the script's ``<module>`` frame is called by nbprof (through ``exec``), and
    nbprof's frames and the calls they make are taken out of the stats; give the script's top
    frame its own numbers back, without callers (as pstats shows a root)."""
    full = getattr(session.profiler, "stats", None)  # None when cProfile never started
    key = (code.co_filename, code.co_firstlineno, code.co_name)
    if not full or key not in full:
        return
    cc, nc, tt, ct, _ = full[key]
    session.raw[key] = (cc, nc, tt, ct, {})


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


# ------------------------------------------------------------------------------------- view

_TRACE_SUFFIXES = (".json", ".json.gz")


def _kind_of(path: str) -> str:
    """"prof", "trace", "folder" or "snapshot" for what ``nbprof view`` reads; an OptionError otherwise."""
    from .loading import is_prof_file, is_snapshot_file

    if not os.path.exists(path):
        raise OptionError(f"{path}: no such file or folder")
    if os.path.isdir(path):
        return "folder"
    if is_prof_file(path):
        return "prof"
    if is_snapshot_file(path):
        return "snapshot"
    if path.lower().endswith(_TRACE_SUFFIXES):
        return "trace"
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as e:
        raise OptionError(f"{path}: cannot be read ({e.strerror or e})") from None
    if head[:2] == b"\x1f\x8b" or head.lstrip()[:1] in (b"{", b"["):
        return "trace"
    raise OptionError(f"{path}: neither a .prof file (cProfile's stats), a chrome trace (.json, .json.gz), "
                      "a folder of traces nor a memory snapshot (.pickle)")


def _default_html(path: str) -> str:
    """``run.prof`` -> ``run.nbprof.html``, ``trace.json.gz`` -> ``trace.nbprof.html``, a folder
    ``ranks/`` -> ``ranks.nbprof.html`` beside it."""
    from .collect.cprofile import PROF_SUFFIXES
    from .collect.snapshot import SNAPSHOT_SUFFIXES

    base = path.rstrip("/" + os.sep) or path
    for suffix in _TRACE_SUFFIXES[::-1] + PROF_SUFFIXES + SNAPSHOT_SUFFIXES[::-1]:
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
            break
    return base + ".nbprof.html"


def view(argv: list[str]) -> int:
    """``nbprof view PATH``: print the report's text, write its HTML; 2 for a path it cannot read."""
    args = build_parser().parse_args(["view", *argv])
    path = args.path
    try:
        kind = _kind_of(path)
        if kind == "snapshot" and args.sort:
            raise OptionError(f"--sort {args.sort}: a memory snapshot's tables have one order (biggest first)")
        resolve = settings.resolve_python_sort if kind == "prof" else settings.resolve_torch_sort
        sort = resolve(args.sort) if args.sort else None
        limit = flags.check_limit(args.limit)
        out = None if args.no_html else flags.check_path("--html", args.html or _default_html(path), (".html", ".htm"))
    except NbprofError as e:
        print(f"{PROG} view: {e}", file=sys.stderr)
        return 2
    from . import loading

    try:
        result = (loading.load_prof(path) if kind == "prof" else loading.load_snapshot(path) if kind == "snapshot"
                  else loading.load_trace(path))
    except NbprofError as e:
        print(f"{PROG} view: {e}", file=sys.stderr)
        return 2
    if sort is not None:  # the table's order and rows, in the text and in the HTML report alike
        result.meta.sort = sort
    if limit is not None and kind != "snapshot":
        result.meta.limit = limit
    try:
        if not args.quiet:
            print(result.report().text())
            sys.stdout.flush()
        if out is None:
            return 0
        try:
            flags.make_folder_of(out)
            result.to_html(out)
        except (OSError, NbprofError) as e:
            print(f"{PROG} view: could not write {out}: {e}", file=sys.stderr)
            return 1
        print(f"nbprof: report written to {out}", file=sys.stderr)
        return 0
    finally:
        close = getattr(result, "close", None)  # a folder of ranks: its timeline's workers
        if close is not None:
            close()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["view"]:  # reads a file; nothing runs (no script, no profiler flags)
        return view(argv[1:])
    parser = build_parser()
    ours, script, module, script_args = _split(argv)
    args, unknown = parser.parse_known_args(ours)
    if unknown:  # argparse's message, with the nearest flag of a mistyped one
        parser.error(flags.unrecognized(unknown, _flags(args.profiler)))
    if script is None and module is None and args.module is None:
        parser.error(f"{args.profiler}: give a script to run (script.py [args ...]) or -m module")
    module = module or args.module
    if args.html_o is not None:  # the old spelling: still works
        print(f"{PROG}: -o {args.html_o}: write --html {args.html_o} (-o names the result's variable in the "
              "magics; here it is deprecated)", file=sys.stderr)
        if args.html is not None:
            parser.error("-o and --html both give the report's path: keep --html")
    if script is not None and not os.path.exists(script):
        print(f"{PROG}: {script}: no such file", file=sys.stderr)
        return 2
    magic = PROFILERS[args.profiler]
    try:
        options = flags.run_options(magic, args)
    except NbprofError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2

    from .run import runner

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
    run = runner.new_run(magic, options, what="script")
    error: BaseException | None = None
    try:
        run.begin()  # also makes nbprof.step() / cuda_collection() in the script reach this run
    except NbprofError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    try:
        _execute(code, namespace)
    except BaseException as e:  # SystemExit and KeyboardInterrupt too: the report is still written
        error = e
    finally:
        run.stop()
    if isinstance(run, runner.PythonRun):
        _restore_script_root(run.collector, code)
    if error is not None and not isinstance(error, SystemExit):
        _print_traceback(error)
    status = _exit_code(error)
    result = run.finish_or_warn(None if isinstance(error, SystemExit) else error)
    if result is None:
        return status or 1
    result.meta.script = target
    result.meta.argv = [target] + script_args
    sys.stdout.flush()
    if not args.quiet:
        print(result.report().text())
    if not args.no_html:
        default = (os.path.splitext(script)[0] if script is not None else str(module)) + ".nbprof.html"
        out = args.html or args.html_o or default
        try:
            flags.make_folder_of(out)
            result.to_html(out)
            print(f"nbprof: report written to {out}", file=sys.stderr)
        except OSError as e:
            print(f"nbprof: could not write {out}: {e}", file=sys.stderr)
            return status or 1
    return status
