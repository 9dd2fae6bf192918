"""One place for defaults: built-ins, then the controls panel, then the magic's flags.

A flag the user typed always wins; a flag left out takes the panel's value (``nbprof.controls()``),
and the panel starts from the built-ins below. Defaults cost little: no shapes, memory or stacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import OptionError

__all__ = [
    "TorchOptions",
    "PythonOptions",
    "Panel",
    "panel",
    "resolve_torch_sort",
    "resolve_python_sort",
    "TORCH_SORT_KEYS",
    "PYTHON_SORT_KEYS",
    "DEFAULT_LIMIT",
]

DEFAULT_LIMIT = 20

# Columns of key_averages() one can sort by, plus torch's own names for them.
TORCH_SORT_KEYS = {
    "self_cpu_us": "self_cpu_us",
    "cpu_total_us": "cpu_total_us",
    "cpu_avg_us": "cpu_avg_us",
    "self_device_us": "self_device_us",
    "device_total_us": "device_total_us",
    "device_avg_us": "device_avg_us",
    "self_cpu_mem_bytes": "self_cpu_mem_bytes",
    "cpu_mem_bytes": "cpu_mem_bytes",
    "self_device_mem_bytes": "self_device_mem_bytes",
    "device_mem_bytes": "device_mem_bytes",
    "flops": "flops",
    "count": "count",
    "name": "name",
    # torch's key_averages().table(sort_by=...) names
    "self_cpu_time_total": "self_cpu_us",
    "cpu_time_total": "cpu_total_us",
    "cpu_time": "cpu_avg_us",
    "self_cuda_time_total": "self_device_us",
    "self_device_time_total": "self_device_us",
    "cuda_time_total": "device_total_us",
    "device_time_total": "device_total_us",
    "cuda_time": "device_avg_us",
    "device_time": "device_avg_us",
    "self_cpu_memory_usage": "self_cpu_mem_bytes",
    "cpu_memory_usage": "cpu_mem_bytes",
    "self_cuda_memory_usage": "self_device_mem_bytes",
    "self_device_memory_usage": "self_device_mem_bytes",
    "cuda_memory_usage": "device_mem_bytes",
    "device_memory_usage": "device_mem_bytes",
}

# pstats' sort keys (and our column names) -> the stats table's columns
PYTHON_SORT_KEYS = {
    "tottime": "tottime_s",
    "time": "tottime_s",
    "cumtime": "cumtime_s",
    "cumulative": "cumtime_s",
    "ncalls": "ncalls",
    "calls": "ncalls",
    "pcalls": "primitive_calls",
    "filename": "filename",
    "file": "filename",
    "module": "filename",
    "line": "lineno",
    "name": "function",
    "nfl": "function",
    "stdname": "function",
    "tottime_s": "tottime_s",
    "cumtime_s": "cumtime_s",
    "tottime_per_call_s": "tottime_per_call_s",
    "cumtime_per_call_s": "cumtime_per_call_s",
    "primitive_calls": "primitive_calls",
    "function": "function",
    "lineno": "lineno",
}


def resolve_torch_sort(key: str) -> str:
    try:
        return TORCH_SORT_KEYS[key]
    except KeyError:
        ours = [k for k, v in TORCH_SORT_KEYS.items() if k == v]
        raise OptionError(f"unknown sort key {key!r}; choose one of: {', '.join(ours)}") from None


def resolve_python_sort(key: str) -> str:
    try:
        return PYTHON_SORT_KEYS[key]
    except KeyError:
        keys = ["tottime", "cumtime", "ncalls", "pcalls", "filename", "line", "name"]
        raise OptionError(f"unknown sort key {key!r}; choose one of: {', '.join(keys)}") from None


@dataclass
class Panel:
    """What the controls panel says about the next runs (None: not set, use the built-in)."""

    cuda: bool | None = None
    memory: bool = False
    shapes: bool = False
    stack: bool = False


panel = Panel()


@dataclass(frozen=True)
class TorchOptions:
    """Everything one %%torchprof run was asked for, after defaults are applied."""

    cuda: bool = False
    memory: bool = False
    shapes: bool = False
    stack: bool = False
    flops: bool = False
    modules: bool = False  # nn.Module calls: with_modules, and the Python tracer that records them
    lines: bool = False  # line by line (TorchProfile.lines()): implies stack
    snapshot: bool = False  # CUDA: the allocator's history around the run, a memory snapshot at its end
    sort: str | None = None  # a key_averages column; None: device time if any, else CPU time
    limit: int = DEFAULT_LIMIT
    group_by: str = "op"
    schedule: tuple[int, int, int, int] | None = None  # wait, warmup, active, repeat
    export: str | None = None
    tensorboard: str | None = None
    output: str | None = None
    quiet: bool = False
    notes: tuple[str, ...] = field(default=())  # warnings raised while resolving (e.g. no CUDA)


@dataclass(frozen=True)
class PythonOptions:
    """Everything one %%cprofile run was asked for."""

    sort: str = "tottime_s"
    limit: int = DEFAULT_LIMIT
    dump: str | None = None
    lines: bool = False  # hits and time per line of the user's code (collect.python_line_recorder)
    output: str | None = None
    quiet: bool = False
