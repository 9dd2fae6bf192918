"""What torch.compile did during one profiled cell: its structured log, its counters, and the
fused kernels made visible to the profiler.

The profiler's trace holds compilation as ranges (``... (dynamo_timed)`` and the phases' chromium
events), but not why Dynamo broke a graph or recompiled a frame, nor which source lines a fused
kernel came from. Those are in torch's *structured trace*: ``torch._logging.trace_structured``
writes one record per event (``dynamo_start`` with the user's stack, the artifacts
``dynamo_graph_break_reason`` and ``recompile_reasons``, ``compilation_metrics`` per compiled
frame, the generated code, the FX graph cache's hits and misses) to the ``torch.__trace`` logger
whenever that logger has a handler. ``TORCH_TRACE=dir`` installs a file handler and tlparse reads
that file; :class:`CompileWatch` installs its own handler for the cell's duration and keeps the
records nbprof reads, so the Compile view holds what tlparse shows, from the same records.

Kernel by kernel: Inductor's C++ kernels are one opaque ``## Call CompiledFxGraph ##`` range
unless ``torch._inductor.config.cpp.enable_kernel_profile`` was on when they were generated (each
kernel then records itself: ``graph_0_cpp_fused_gelu_0``); and where torch has provenance
tracking (``config.trace.provenance_tracking_level``, torch 2.8+), it logs each kernel's source
stack. Both are turned on for the cell and restored after it. Both are read at code generation:
code compiled before the cell keeps what it was compiled with (the view says so).

Nothing here imports dynamo or inductor: a cell that compiles nothing pays for a logging handler.
Settings read when inductor's config is first imported are set through their environment
variables (``TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE``, ``INDUCTOR_PROVENANCE``) while the cell runs.
"""

from __future__ import annotations

import linecache
import logging
import os
import re
import sys
from typing import Any

__all__ = ["CompileWatch", "KEPT_METRICS", "KEPT_ARTIFACTS", "log_files"]

TRACE_LOGGER = "torch.__trace"

# compilation_metrics fields kept (the record has ~100; these are the ones the Compile view reads)
KEPT_METRICS = (
    "compile_id", "co_name", "co_filename", "co_firstlineno", "frame_key", "cache_size",
    "accumulated_cache_size", "guard_count", "shape_env_guard_count", "graph_op_count", "graph_node_count",
    "graph_input_count", "entire_frame_compile_time_s", "backend_compile_time_s", "inductor_compile_time_s",
    "code_gen_time_s", "dynamo_time_before_restart_s", "fail_type", "fail_reason", "fail_user_frame_filename",
    "fail_user_frame_lineno", "recompile_reason", "restart_reasons", "dynamo_cumulative_compile_time_us",
    "aot_autograd_cumulative_compile_time_us", "inductor_cumulative_compile_time_us",
    "inductor_code_gen_cumulative_compile_time_us", "triton_compile_time_us", "compile_time_autotune_time_us",
    "duration_us", "start_time_us", "start_time", "is_forward", "is_runtime", "num_graph_breaks",
    "inductor_fx_local_cache_hit_count", "inductor_fx_local_cache_miss_count",
    "aotautograd_local_cache_hit_count", "aotautograd_local_cache_miss_count", "has_guarded_code",
    "structured_logging_overhead_s",  # what the structured log cost the compilation (our handler's price)
)
# artifacts kept, by name (payload kept for the first group only: the others are cache keys and
# pickles, tens of kB each, of which only the name matters)
KEPT_ARTIFACTS = ("dynamo_graph_break_reason", "recompile_reasons",
                  "inductor_provenance_tracking_kernel_stack_traces")
CACHE_ARTIFACTS = ("fx_graph_cache_hit", "fx_graph_cache_miss", "fx_graph_cache_bypass",
                   "aotautograd_cache_hit", "aotautograd_cache_miss", "aotautograd_cache_bypass")
_RESUME = re.compile(r"^torch_dynamo_resume_in_(\w+)_at_(\d+)$")
_CONTEXT = ("frame_id", "frame_compile_id", "attempt", "compiled_autograd_id")

# (environment variable, inductor config attribute path, value while the cell runs)
_INDUCTOR_SETTINGS = (
    ("TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE", ("cpp", "enable_kernel_profile"), True),
    ("INDUCTOR_PROVENANCE", ("trace", "provenance_tracking_level"), 1),  # torch 2.9+
    ("INDUCTOR_PROVENANCE", ("trace", "provenance_tracking"), True),  # torch 2.7-2.8's name
)
_ENV_ON = {"TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE": "1", "INDUCTOR_PROVENANCE": "1"}


class _Records(logging.Handler):
    """Keeps the structured-trace records the Compile view reads, compacted as they come."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[dict[str, Any]] = []
        self.strings: dict[int, str] = {}  # torch interns file names: id -> name

    def emit(self, record: logging.LogRecord) -> None:
        try:
            kept = _compact(getattr(record, "metadata", None), getattr(record, "payload", None), self.strings)
        except Exception:  # a record of a shape nbprof does not know is left out, never raised
            return
        if kept is not None:
            self.records.append(kept)


def _compact(meta: Any, payload: Any, strings: dict[int, str]) -> dict[str, Any] | None:
    if not isinstance(meta, dict):
        return None
    context = {k: meta[k] for k in _CONTEXT if meta.get(k) is not None}
    if "str" in meta:
        text, number = meta["str"]
        strings[int(number)] = str(text)
        return None
    if "dynamo_start" in meta:
        return {"event": "dynamo_start", **context, "stack": list(meta["dynamo_start"].get("stack") or [])}
    if "compilation_metrics" in meta:
        m = meta["compilation_metrics"] or {}
        kept = {k: _plain(m.get(k)) for k in KEPT_METRICS if m.get(k) is not None}
        resume = _RESUME.match(str(m.get("co_name") or ""))
        if resume:  # a graph break's resume function: the line it breaks at, as the source says it
            kept["resume_code"] = linecache.getline(str(m.get("co_filename") or ""), int(resume.group(2))).strip()
        return {"event": "compilation_metrics", **context, "metrics": kept}
    if "artifact" in meta:
        name = str((meta["artifact"] or {}).get("name", ""))
        if name in KEPT_ARTIFACTS:
            return {"event": name, **context, "payload": payload if isinstance(payload, str) else None}
        if name in CACHE_ARTIFACTS:
            return {"event": name, **context}
        return None
    if "inductor_output_code" in meta:
        info = meta["inductor_output_code"] or {}
        return {"event": "inductor_output_code", **context, "filename": str(info.get("filename") or ""),
                "lines": _code_comments(payload if isinstance(payload, str) else "")}
    if "dynamo_output_graph" in meta:
        return {"event": "dynamo_output_graph", **context,
                "lines": _graph_lines(payload if isinstance(payload, str) else "")}
    return None


def _plain(v: Any) -> Any:
    """A metrics value as JSON holds it (sets become sorted lists)."""
    if isinstance(v, (set, frozenset)):
        return sorted(map(str, v))
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def _code_comments(code: str) -> list[str]:
    """Of Inductor's generated code, the wrapper's lines that say what each kernel call fused
    (``# Source Nodes: [...], Original ATen: [...]``, "Topologically Sorted" in newer torch) and
    the statement after each: the kernels' C++/Triton source is left out (most of the bytes)."""
    lines = code.splitlines()
    out = []
    for i, line in enumerate(lines):
        if _RECORDED_AS.search(line):  # the name a C++ kernel records itself under (graph_<n>_cpp_...)
            out.append(line.strip())
        elif "Source Nodes:" in line and "Original ATen:" in line:
            out.append(line.strip())
            for nxt in lines[i + 1:i + 4]:  # the statement it describes (buffers may be allocated first)
                out.append(nxt.strip())
    return out


_RECORDED_AS = re.compile(r'(?:RECORD_FUNCTION|RecordFunctionHandle \w+)\("(graph_\d+_\w+)"')


def _graph_lines(graph: str) -> list[str]:
    """Of Dynamo's output graph (``print_readable``), each node's ``# File: path:line in fn, code:``
    comment and the node's own line: which source line each FX node came from."""
    lines = graph.splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.strip().startswith("# File:"):
            out.append(line.strip())
            if i + 1 < len(lines):
                out.append(lines[i + 1].strip())
    return out


class CompileWatch:
    """One cell's torch.compile activity: ``begin()`` before the profiler starts, ``end()`` after
    it stops, then ``result()``: a JSON-able dict (``records``, ``counters``, ``torch``), or None
    when nothing was compiled and no compiled code ran."""

    def __init__(self) -> None:
        self._handler: _Records | None = None
        self._level: int | None = None
        self._env: dict[str, str | None] = {}
        self._config: list[tuple[Any, str, Any]] = []
        self._counters: dict[str, dict[str, int]] = {}
        self._result: dict[str, Any] | None = None

    def begin(self) -> None:
        """Start watching; never raises (the profiler is already running: a failure here only
        leaves the Compile view without the log)."""
        try:
            self._begin()
        except Exception:
            self.end()

    def end(self) -> None:
        """Stop watching and restore what ``begin`` changed; never raises (it runs in the
        profile's cleanup, which must not hide the cell's own exception)."""
        try:
            self._end()
        except Exception:
            self._handler = None
            self._result = None

    def _begin(self) -> None:
        logger = logging.getLogger(TRACE_LOGGER)
        self._handler = _Records()
        self._level = logger.level
        logger.addHandler(self._handler)
        logger.setLevel(logging.DEBUG)  # torch sets it so at its logging setup; a bare logger may not be
        self._counters = _counters()
        self._turn_on_inductor_settings()

    def _end(self) -> None:
        if self._handler is None:
            self._restore_inductor_settings()
            return
        logger = logging.getLogger(TRACE_LOGGER)
        handler, self._handler = self._handler, None
        logger.removeHandler(handler)
        if self._level is not None:
            logger.setLevel(self._level)
        self._restore_inductor_settings()
        after = _counters()
        counters = {group: diff for group, values in after.items()
                    if (diff := {k: v - self._counters.get(group, {}).get(k, 0) for k, v in values.items()
                                 if v != self._counters.get(group, {}).get(k, 0)})}
        records = handler.records
        _remember(records)
        if not any(r.get("event") in _CODE_EVENTS for r in records):
            # compiled code that runs in later cells: what its compilation said of its kernels
            records = [{**r, "earlier": True} for r in _EARLIER] + records
        strings = {**_interned(), **handler.strings}
        for r in records:
            for frame in r.get("stack", ()):
                f = frame.get("filename")
                if isinstance(f, int):
                    frame["filename"] = strings.get(f, "?")
        if not records and not counters:
            self._result = None
            return
        import torch

        self._result = {"records": records, "counters": counters, "torch": str(torch.__version__),
                        "kernel_profile": self._kernel_profile}

    def result(self) -> dict[str, Any] | None:
        return self._result

    # -- inductor's settings for the cell ---------------------------------------------------------

    _kernel_profile = False  # whether the cell's compiled C++ kernels record themselves

    def _turn_on_inductor_settings(self) -> None:
        config = sys.modules.get("torch._inductor.config")
        self._config = []
        self._env = {}
        for env, path, value in _INDUCTOR_SETTINGS:
            if config is not None:  # already read its environment: set the attribute
                holder = getattr(config, path[0], None)
                if holder is not None and hasattr(holder, path[1]):
                    self._config.append((holder, path[1], getattr(holder, path[1])))
                    try:
                        setattr(holder, path[1], value)
                    except Exception:
                        self._config.pop()
            elif env not in self._env:  # inductor imported during the cell reads these
                self._env[env] = os.environ.get(env)
                if env not in os.environ:
                    os.environ[env] = _ENV_ON[env]
        self._kernel_profile = True

    def _restore_inductor_settings(self) -> None:
        for holder, name, old in reversed(self._config):
            try:
                setattr(holder, name, old)
            except Exception:
                pass
        config = sys.modules.get("torch._inductor.config")
        for env, path, on in _INDUCTOR_SETTINGS:
            if env not in self._env or self._env[env] is not None:
                continue
            # inductor's config was imported during the cell and read our value: its default back
            holder = getattr(config, path[0], None) if config is not None else None
            if holder is not None and hasattr(holder, path[1]):
                try:
                    setattr(holder, path[1], type(on)(0))  # False / 0: the default without the variable
                except Exception:
                    pass
        for env, old in self._env.items():
            if old is None:
                os.environ.pop(env, None)
        self._config, self._env = [], {}


# The records that describe generated code (which source lines and ATen ops each kernel came
# from), kept for the process's later cells: a model compiled in one cell runs in the next ones.
# The latest _EARLIER_MAX of them (a few kB each: comment lines, not code).
_CODE_EVENTS = ("dynamo_output_graph", "inductor_output_code", "inductor_provenance_tracking_kernel_stack_traces")
_EARLIER: list[dict[str, Any]] = []
_EARLIER_MAX = 400


def _remember(records: list[dict[str, Any]]) -> None:
    _EARLIER.extend(r for r in records if r.get("event") in _CODE_EVENTS)
    del _EARLIER[:-_EARLIER_MAX]


def _counters() -> dict[str, dict[str, int]]:
    """Dynamo's counters (``torch._dynamo.utils.counters``) as plain dicts; empty while Dynamo is
    not imported (a cell that imports it starts from zero)."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None) if utils is not None else None
    if not counters:
        return {}
    out: dict[str, dict[str, int]] = {}
    for group, values in list(counters.items()):
        try:
            out[str(group)] = {str(k): int(v) for k, v in list(values.items())}
        except (TypeError, ValueError):
            continue
    return out


def _interned() -> dict[int, str]:
    """torch's table of interned file names (records before the cell interned some of them)."""
    structured = sys.modules.get("torch._logging.structured")
    table = getattr(structured, "INTERN_TABLE", None) if structured is not None else None
    return {int(v): str(k) for k, v in (table or {}).items()}


_FILE_NAMES = (re.compile(r'File "(.+?)", line \d+'), re.compile(r"# File: (.+?):\d+ in "),
               re.compile(r"Graph break(?: in user code)? at (.+?):\d+"))


def log_files(log: dict[str, Any] | None) -> set[str]:
    """Every source file a compile log names (compiled frames, graph breaks, kernels' source lines)."""
    if not log:
        return set()
    files: set[str] = set()
    for r in log.get("records") or []:
        f = (r.get("metrics") or {}).get("co_filename")
        if f:
            files.add(str(f))
        texts = [r.get("payload") or ""] + list(r.get("lines") or [])
        for text in texts:
            for pattern in _FILE_NAMES:
                files.update(pattern.findall(str(text)))
    return files
