"""Every flag of ``%%torchprof`` / ``%%cprofile`` and of ``python -m nbprof``, declared once.

The magics (through IPython's ``magic_arguments``, so ``%%torchprof?`` lists every flag with its
help) and the command line (argparse) are both built from the tables below, and both turn what
was typed into options with the same validators (``run_options``): a flag, a default, a short
form or a check cannot differ between a cell and a script. A profiler's flags are the same in its
magic and its subcommand (``-s``/``--sort``, ``-l``/``--limit`` included); ``-q`` is everywhere;
only what has no meaning on the other side is one front end's own: ``-o NAME`` (a variable) in the
magics, ``--html``, ``--no-html`` and ``-m`` on the command line. ``markdown_table()`` is the one
table of them that the docs show (docs/reference/flags.md; ``python -m nbprof.run.flags`` prints it, a
test keeps the two equal).

Errors are ``OptionError`` with a one-line message that names the flag and what it accepts; the
magics prefix it with ``%%torchprof:`` and raise it as a ``UsageError``, the command line prints
it and exits with 2. Nothing here imports torch, except ``resolve_torch`` (CUDA is asked of torch).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, replace
from typing import Any

from .. import settings
from ..errors import OptionError
from ..settings import PythonOptions, TorchOptions

__all__ = [
    "Flag",
    "TORCH_FLAGS",
    "PYTHON_FLAGS",
    "PROFILER_FLAGS",
    "QUIET_FLAG",
    "OUTPUT_FLAG",
    "COMMAND_LINE_FLAGS",
    "VIEW_FLAGS",
    "magic_flags",
    "markdown_table",
    "make_folder_of",
    "add_flags",
    "flag_names",
    "unrecognized",
    "valued_names",
    "run_options",
    "command_line_flags",
    "torch_options",
    "python_options",
    "resolve_torch",
    "check_limit",
    "check_schedule",
    "check_path",
    "check_folder",
    "check_name",
]


@dataclass(frozen=True)
class Flag:
    """One flag, as ``ArgumentParser.add_argument`` takes it."""

    names: tuple[str, ...]  # as typed: ("-s", "--sort")
    help: str
    dest: str | None = None  # None: argparse's (from the long name)
    action: str | None = None  # "store_true" / "store_false"; None: the flag takes a value
    default: Any = None
    metavar: str | None = None
    type: Any = None
    choices: tuple[str, ...] | None = None
    hidden: bool = False  # accepted, left out of --help and the docs (a deprecated spelling)

    @property
    def takes_value(self) -> bool:
        return self.action is None

    def argparse_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"help": argparse.SUPPRESS if self.hidden else self.help, "default": self.default}
        for key in ("dest", "action", "metavar", "type", "choices"):
            value = getattr(self, key)
            if value is not None:
                kwargs[key] = list(value) if key == "choices" else value
        return kwargs


# A switch with default None means "not typed": the controls panel decides (settings.Panel).
TORCH_FLAGS: tuple[Flag, ...] = (
    Flag(("--cuda",), dest="cuda", action="store_true", default=None,
         help="Record CUDA kernels, copies and streams (default: on when CUDA is available, "
              "unless the controls panel turned it off)."),
    Flag(("--no-cuda",), dest="cuda", action="store_false", help="Record the CPU only."),
    Flag(("--memory",), dest="memory", action="store_true", default=None,
         help="Record allocations: memory per operator and the memory curve."),
    Flag(("--no-memory",), dest="memory", action="store_false", help="Do not record allocations."),
    Flag(("--shapes",), dest="shapes", action="store_true", default=None,
         help="Record input shapes (for --group-by shape)."),
    Flag(("--no-shapes",), dest="shapes", action="store_false", help="Do not record input shapes."),
    Flag(("--stack",), dest="stack", action="store_true", default=None,
         help="Record Python stacks (for --group-by stack)."),
    Flag(("--no-stack",), dest="stack", action="store_false", help="Do not record Python stacks."),
    Flag(("--flops",), action="store_true", default=None, help="Estimate FLOPs of matmuls and convolutions."),
    Flag(("--lines",), action="store_true", default=False,
         help="Line by line: each operator, its kernels and its memory on the line of your code that ran it "
              "(p.lines()). Records Python stacks too (--stack) and traces the lines of your own code."),
    Flag(("--modules",), action="store_true", default=None,
         help="Record nn.Module calls (torch's with_modules and its Python tracer): p.modules() and the Modules tab."),
    Flag(("--snapshot",), action="store_true", default=False,
         help="CUDA only: record the CUDA caching allocator's history around the code (every allocation and free "
              "with its Python stack) and take a memory snapshot at its end: the Memory snapshot tab, "
              "p.snapshot()."),
    Flag(("-s", "--sort"), metavar="KEY",
         help="Sort tables by this column (self_cpu_us, cpu_total_us, self_device_us, device_total_us, "
              "cpu_mem_bytes, count, ...; torch's names such as self_cuda_time_total work too)."),
    Flag(("-l", "--limit"), metavar="N", type=int, help="Rows to show (0 = all; default 20)."),
    Flag(("--group-by",), dest="group_by", choices=("op", "shape", "stack"), default="op",
         help="Group the table by operator, operator and input shape, or operator and Python stack."),
    Flag(("--schedule",), metavar="W,WU,A[,R]",
         help="Record only some steps: wait W, warm up WU, record A, repeat R times (R defaults to 1; 0 = "
              "until the loop ends); call nbprof.step() each step. The report merges every cycle and notes "
              "when fewer steps ran than the schedule records."),
    Flag(("--export",), metavar="PATH",
         help="Also write a chrome trace (.json or .json.gz; Perfetto, chrome://tracing); its folder is created."),
    Flag(("--tensorboard",), metavar="DIR",
         help="Also write the trace in TensorBoard's layout (tensorboard --logdir DIR); the folder is created."),
)

PYTHON_FLAGS: tuple[Flag, ...] = (
    Flag(("-s", "--sort"), metavar="KEY",
         help="Sort by a pstats key: tottime (default), cumtime, ncalls, pcalls, filename, line, name."),
    Flag(("-l", "--limit"), metavar="N", type=int, help="Rows to show (0 = all; default 20)."),
    Flag(("--dump",), metavar="PATH", help="Also write a .prof file (pstats, snakeviz); its folder is created."),
    Flag(("--lines",), action="store_true", default=False,
         help="Also count hits and time per line of your code (the cell, functions from other cells, your own "
              "files; not libraries): p.lines() and the Source tab. Slows Python code down (about as much as "
              "line_profiler)."),
)

# keyed by magic name; the command line's "torch" subcommand is "torchprof" here
PROFILER_FLAGS: dict[str, tuple[Flag, ...]] = {"torchprof": TORCH_FLAGS, "cprofile": PYTHON_FLAGS}

# everywhere: the magics show no report, the command line prints no table
QUIET_FLAG = Flag(("-q", "--quiet"), action="store_true", default=False,
                  help="Do not show the report (the command line still writes its HTML report unless --no-html).")

# the magics only: a variable has no meaning on the command line
OUTPUT_FLAG = Flag(("-o",), dest="output", metavar="NAME",
                   help="Keep the result (a TorchProfile or PythonProfile) in this variable.")

# the command line only: its files and what it runs
COMMAND_LINE_FLAGS: tuple[Flag, ...] = (
    Flag(("--html",), metavar="PATH",
         help="Write the standalone HTML report here (default: the script's path with .nbprof.html for .py); "
              "its folder is created."),
    Flag(("--no-html",), dest="no_html", action="store_true", default=False, help="Do not write the HTML report."),
    Flag(("-m",), dest="module", metavar="MODULE",
         help="Run a module as a script (like python -m MODULE); the arguments after it go to it."),
    # before --html, -o was the report's path here, and in the magics the result's variable; -o
    # PATH still works, with a note (cli.main), so that scripts written for it keep working
    Flag(("-o",), dest="html_o", metavar="PATH", hidden=True, help="Deprecated spelling of --html PATH."),
)


# ``nbprof view PATH``: the report of a file already written (nothing runs: the table's order and rows, the files)
VIEW_FLAGS: tuple[Flag, ...] = (
    Flag(("-s", "--sort"), metavar="KEY",
         help="Sort the table by this key: pstats' for a .prof file (tottime, cumtime, ncalls, ...), torch's for "
              "a trace (self_cpu_us, cpu_total_us, count, ...)."),
    PYTHON_FLAGS[1],  # -l/--limit N
    QUIET_FLAG,
    replace(COMMAND_LINE_FLAGS[0], help="Write the standalone HTML report here (default: PATH without its "
                                        "suffix, with .nbprof.html); its folder is created."),
    COMMAND_LINE_FLAGS[1],
)


def magic_flags(magic: str) -> tuple[Flag, ...]:
    """``%%torchprof`` / ``%%cprofile``: the profiler's flags, ``-o NAME`` and ``-q``."""
    return PROFILER_FLAGS[magic] + (OUTPUT_FLAG, QUIET_FLAG)


def command_line_flags(magic: str) -> tuple[Flag, ...]:
    """``python -m nbprof torch|cprofile``: the profiler's flags, ``-q`` and the command line's own."""
    return PROFILER_FLAGS[magic] + (QUIET_FLAG,) + COMMAND_LINE_FLAGS


# -------------------------------------------------------------------------------- the docs' table

WHERE_LEGEND = (
    "**where**: *torch* is `%%torchprof`, `%torchprof` and `nbprof torch`; *cProfile* is `%%cprofile`, "
    "`%cprofile` and `nbprof cprofile`; *magics* the four magics; *command line* `nbprof` (or "
    "`python -m nbprof`)."
)


def _spelled(flag: Flag) -> str:
    value = flag.metavar or ("{" + ",".join(flag.choices) + "}" if flag.choices else "")
    return ", ".join(f"`{name} {value}`" if value else f"`{name}`" for name in flag.names)


def markdown_table() -> str:
    """Every flag, one row each (a switch and its ``--no-`` form share one; a flag that is the
    same for both profilers too): the docs' table (docs/reference/flags.md), built from the declarations above."""
    rows: list[list[str]] = []  # [flags, where, meaning]
    index: dict[tuple[str, str], int] = {}

    def add(flag: Flag, where: str) -> None:
        if flag.hidden:
            return
        spelled = _spelled(flag)
        if flag.names[0].startswith("--no-") and rows and rows[-1][0] == f"`--{flag.names[0][5:]}`":
            rows[-1][0] += f" / {spelled}"  # --memory / --no-memory: the positive form's meaning
            return
        key = (spelled, flag.help)
        if key in index:  # the same flag, the same meaning, for the other profiler too
            rows[index[key]][1] = "torch, cProfile"
            return
        index[key] = len(rows)
        rows.append([spelled, where, flag.help.replace("|", "\\|")])

    for flag in TORCH_FLAGS:
        add(flag, "torch")
    for flag in PYTHON_FLAGS:
        add(flag, "cProfile")
    add(OUTPUT_FLAG, "magics")
    add(QUIET_FLAG, "everywhere")
    for flag in COMMAND_LINE_FLAGS:
        add(flag, "command line")
    lines = [WHERE_LEGEND, "", "| flag | where | meaning |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def add_flags(parser: argparse.ArgumentParser, flags: tuple[Flag, ...]) -> None:
    for flag in flags:
        parser.add_argument(*flag.names, **flag.argparse_kwargs())


def flag_names(flags: tuple[Flag, ...]) -> list[str]:
    return [name for flag in flags for name in flag.names]


def unrecognized(words: list[str], flags: tuple[Flag, ...]) -> str:
    """argparse's "unrecognized arguments: ..." with the nearest flag of a mistyped one
    ("--memroy (did you mean --memory?)")."""
    import difflib

    names = flag_names(flags)
    out = []
    for word in words:
        # 0.7: a transposed or dropped letter scores 0.83 and up ("--srot", "--stak"); a word that
        # shares little more than the dashes with a flag is no typo of it ("--bogus" and "--modules": 0.625)
        near = difflib.get_close_matches(word.split("=", 1)[0], names, n=1, cutoff=0.7) if word.startswith("-") else []
        out.append(f"{word} (did you mean {near[0]}?)" if near else word)
    return "unrecognized arguments: " + " ".join(out)


def valued_names(flags: tuple[Flag, ...]) -> set[str]:
    """The names of the flags that take a value (the next word is the value, not code)."""
    return {name for flag in flags if flag.takes_value for name in flag.names}


# ---------------------------------------------------------------------------------- validators


def check_limit(limit: int | None) -> int:
    if limit is None:
        return settings.DEFAULT_LIMIT
    if limit < 0:
        raise OptionError(f"--limit {limit}: must be 0 (all rows) or a positive number of rows")
    return limit


def check_schedule(text: str | None) -> tuple[int, int, int, int] | None:
    if text is None:
        return None
    try:
        nums = [int(p) for p in text.split(",")]
    except ValueError:
        nums = []
    if len(nums) not in (3, 4) or any(n < 0 for n in nums) or nums[2] < 1:
        raise OptionError(
            f"--schedule {text}: expected wait,warmup,active[,repeat] as whole numbers, active >= 1 (e.g. 1,1,3)"
        )
    if len(nums) == 3:
        nums.append(1)
    return tuple(nums)  # type: ignore[return-value]


def check_path(flag: str, path: str, suffixes: tuple[str, ...] | None = None) -> str:
    """A file to write: ``~`` expanded, the suffix checked, its folder there or possible to make
    (``make_folder_of`` makes it when the file is written). Checked now, so that a path that
    cannot be written fails before the code runs rather than after a long profile."""
    path = os.path.expanduser(path.strip("\"'"))
    if suffixes and not path.endswith(suffixes):
        raise OptionError(f"{flag} {path}: the file must end with {' or '.join(suffixes)}")
    if os.path.isdir(path):
        raise OptionError(f"{flag} {path}: is a folder; give a file name")
    problem = _unwritable_folder(os.path.dirname(os.path.abspath(path)))
    if problem:
        raise OptionError(f"{flag} {path}: {problem}")
    return path


def check_folder(flag: str, folder: str) -> str:
    """A folder to write into, made when it is written (``--tensorboard DIR``); checked as ``check_path``."""
    folder = os.path.expanduser(folder.strip("\"'"))
    problem = _unwritable_folder(os.path.abspath(folder))
    if problem:
        raise OptionError(f"{flag} {folder}: {problem}")
    return folder


def _unwritable_folder(folder: str) -> str | None:
    """Why files cannot be written into ``folder`` (made if missing), or None: the nearest part of
    it that exists must be a folder this process can write into."""
    existing = folder
    while not os.path.exists(existing):
        parent = os.path.dirname(existing)
        if parent == existing:
            break
        existing = parent
    if not os.path.isdir(existing):
        return f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"cannot write into {existing} (permission denied)"
    return None


def make_folder_of(path: str) -> None:
    """Make the folder a file is about to be written into (a flag's path: ``check_path`` said it can be)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)


def check_name(name: str | None) -> str | None:
    if name is not None and not name.isidentifier():
        raise OptionError(f"-o {name}: not a valid variable name")
    return name


# ------------------------------------------------------------------------------ flags -> options


def torch_options(args: argparse.Namespace) -> TorchOptions:
    """The typed flags, checked; switches not typed stay False until ``resolve_torch``. Imports
    no torch (the magic's input transformer checks a cell's flags with it)."""
    return TorchOptions(
        cuda=bool(args.cuda),  # resolved by resolve_torch (needs torch)
        memory=bool(args.memory),
        shapes=bool(args.shapes),
        stack=bool(args.stack),
        flops=bool(args.flops),
        modules=bool(args.modules),
        lines=bool(getattr(args, "lines", False)),
        snapshot=bool(getattr(args, "snapshot", False)),
        sort=settings.resolve_torch_sort(args.sort) if args.sort else None,
        limit=check_limit(args.limit),
        group_by=args.group_by,
        schedule=check_schedule(args.schedule),
        export=check_path("--export", args.export, (".json", ".json.gz")) if args.export else None,
        tensorboard=check_folder("--tensorboard", args.tensorboard) if args.tensorboard else None,
        # the magics' -o NAME and -q; the command line has neither (it writes files, its -q is its own)
        output=check_name(getattr(args, "output", None)),
        quiet=bool(getattr(args, "quiet", False)),
    )


def python_options(args: argparse.Namespace) -> PythonOptions:
    return PythonOptions(
        sort=settings.resolve_python_sort(args.sort) if args.sort else "tottime_s",
        limit=check_limit(args.limit),
        dump=check_path("--dump", args.dump) if args.dump else None,
        lines=bool(getattr(args, "lines", False)),
        output=check_name(getattr(args, "output", None)),
        quiet=bool(getattr(args, "quiet", False)),
    )


def resolve_torch(options: TorchOptions, args: argparse.Namespace) -> TorchOptions:
    """Fill what the flags left open from the controls panel, then built-ins; check CUDA; turn
    on what ``--group-by`` and ``--sort`` need (``_turn_on_what_the_view_needs``). Each change
    made here is a note of the run, said once: in the report, or on stderr where no report is
    shown (``-q``; ``runner.Run.finish``). Imports torch (MissingDependencyError)."""
    from ..collect.torch_live import cuda_available, import_torch

    import_torch()
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
        notes.append("CUDA is not available here: profiling the CPU only")
    else:
        cuda = bool(wanted)
    if options.lines:
        # the lines come from torch's Python tracer (with_stack) and nbprof's line tracer
        if args.stack is False:
            raise OptionError("--lines records Python stacks (--stack), but --no-stack was given: drop one of them")
        if options.schedule is not None:
            raise OptionError("--lines cannot be combined with --schedule: profile the steps you want without it")
        stack = True
    snapshot = options.snapshot
    if snapshot and not available:  # the cell still runs, profiled as asked; said once
        snapshot = False
        notes.append("--snapshot: CUDA is not available here, so there is no CUDA allocator history to record "
                     "(the rest of the report is there)")
    options = replace(options, cuda=cuda, memory=bool(memory), shapes=bool(shapes), stack=bool(stack),
                      snapshot=snapshot)
    return _turn_on_what_the_view_needs(options, args, available, notes)


def run_options(magic: str, args: argparse.Namespace) -> TorchOptions | PythonOptions:
    """Parsed flags -> the options of one run, defaults applied (panel, then built-ins)."""
    if magic == "cprofile":
        return python_options(args)
    return resolve_torch(torch_options(args), args)


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

# what each grouping records: --group-by shape needs --shapes, --group-by stack needs --stack
_GROUP_NEEDS = {"shape": "shapes", "stack": "stack"}


def _turn_on_what_the_view_needs(options: TorchOptions, args: argparse.Namespace, cuda_here: bool,
                                 notes: list[str]) -> TorchOptions:
    """One policy for a view that needs a recording option (``--group-by shape`` needs
    ``--shapes``, ``--sort flops`` needs ``--flops``, ...): the option is turned on, with a note
    that says so. Only what cannot be turned on is an error, before the code runs: an option
    the same line turned off (``--no-shapes --group-by shape``) or CUDA where there is none."""
    wanted: list[tuple[str, str]] = []  # (option, the flag that needs it)
    group_need = _GROUP_NEEDS.get(options.group_by)
    if group_need:
        wanted.append((group_need, f"--group-by {options.group_by}"))
    if options.sort is not None:
        wanted += [(need, f"--sort {options.sort}") for need in _SORT_NEEDS.get(options.sort, ())]
    turned_on: dict[str, str] = {}
    for need, by in wanted:
        if getattr(options, need) or need in turned_on:
            continue
        if getattr(args, need, None) is False:  # typed --no-<need> on the same line
            raise OptionError(f"{by} needs --{need}, but --no-{need} was given: drop one of them")
        if need == "cuda" and not cuda_here:
            valid = [k for k, v in settings.TORCH_SORT_KEYS.items()
                     if k == v and all(n != "cuda" for n in _SORT_NEEDS.get(k, ()))]
            raise OptionError(f"{by}: CUDA is not available here, so this run cannot record it; "
                              f"sort by one of: {', '.join(valid)}")
        turned_on[need] = by
    if turned_on:
        on = lambda need: getattr(options, need) or need in turned_on  # noqa: E731
        options = replace(options, cuda=on("cuda"), memory=on("memory"), shapes=on("shapes"), stack=on("stack"),
                          flops=on("flops"))
        notes.append("; ".join(f"{by}: recording --{need} too" for need, by in turned_on.items()))
    return replace(options, notes=tuple(notes))


if __name__ == "__main__":  # python -m nbprof.run.flags: the table docs/reference/flags.md shows
    print(markdown_table())
