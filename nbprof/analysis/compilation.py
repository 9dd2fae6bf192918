"""torch.compile in a profile: where compile time went, why Dynamo broke graphs and recompiled,
and which fused kernel came from which source line.

Two sources, read together:

- **the trace** (every profile, live or loaded): torch wraps each compile step in a range,
  ``"<key> (dynamo_timed)"`` (``torch._dynamo.utils.dynamo_timed``; a ``record_function`` in torch
  2.4, a ``cpu_op`` since), and since about 2.6 also in a range named for its phase
  (``entire_frame_compile``, ``backend_compile``, ``inductor_compile``, ``code_gen``, ...: the
  chromium events tlparse draws). :func:`compile_range_mask` finds them; they are not operators
  (the operators table leaves them out, ``docs/differences.md``). A *compile unit* is one
  outermost compile range: a frame's compilation, or a backward graph compiled at the first
  ``backward()``. Each compile range's exclusive time (its time minus its compile-range
  children) goes to the phase its name says (:data:`PHASE_RULES`), else to its parent's: so a
  unit's phases add up to the unit's time, whatever names a torch version adds.
- **the structured log** (a live ``%%torchprof``: ``collect.compile_state``; ``meta.compile_log``):
  Dynamo's ``compilation_metrics`` per compiled frame (its function, file and line, the failed
  guard that made it recompile), ``dynamo_graph_break_reason`` artifacts (the reason and the
  user's line), the caches' hits and misses, the generated code's comments and Inductor's
  provenance (each kernel's source lines). The same records tlparse reads from ``TORCH_TRACE``.

Fused kernels: Inductor's C++ kernels record themselves as ``graph_<n>_cpp_fused_<ops>_<k>``
when they were generated with ``config.cpp.enable_kernel_profile`` (nbprof turns it on for the
cell), Triton kernels are device kernels ``triton_<kind>_fused_<ops>_<k>``; the ops a kernel
fused are in its name (Inductor names kernels by the ATen ops they fuse) and, where the code says
more, in its ``Original ATen`` comment.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..events import KIND_CODE, category_map, category_mask, values_at
from ..format import plural

__all__ = ["Compilation", "compilation", "compile_range_mask", "compile_units", "PHASES", "PHASE_COLUMNS",
           "PHASE_RULES", "kernel_ops", "is_inductor_kernel", "cell_location", "op_times"]

TIMED_SUFFIX = " (dynamo_timed)"

# The phases of a compilation, in pipeline order, and their column in the frames table.
PHASE_COLUMNS = {
    "Dynamo tracing": "dynamo_us",
    "AOT autograd": "aot_autograd_us",
    "Inductor lowering": "inductor_us",
    "Inductor codegen": "codegen_us",
    "C++ / Triton compile": "compile_code_us",
    "Autotuning": "autotune_us",
    "Cache lookup": "cache_us",
    "Other": "other_us",
}
PHASES = tuple(PHASE_COLUMNS)

# A compile range's phase by its name (the "(dynamo_timed)" suffix taken off), first match wins;
# a name no rule matches is in its parent's phase. Names from torch 2.4 to 2.15.
PHASE_RULES: tuple[tuple[str, str], ...] = (
    (r"autotun|benchmark|select_algorithm", "Autotuning"),
    (r"compile_file|async_compile\.wait|CppCodeCache|CppPythonBindingsCodeCache|cpp_compile|TritonBundler"
     r"|compile_triton|triton_compile|AsyncCompile|load_kernel|CUDACodeCache", "C++ / Triton compile"),
    (r"code_gen|codegen|compile_to_module|compile_to_fn|PyCodeCache|generate", "Inductor codegen"),
    (r"cache|torch_key", "Cache lookup"),
    (r"inductor_compile|compile_fx_inner|fx_codegen_and_compile|GraphLowering|Scheduler|post_grad|pre_grad"
     r"|fake_tensor_prop|lowering|fw_compiler_base|bw_compiler|inference_compiler", "Inductor lowering"),
    (r"backend_compile|call_user_compiler|aot|create_aot_dispatcher_function|joint_graph|min_cut|partition"
     r"|functionaliz", "AOT autograd"),
    (r"entire_frame_compile|compile_inner|compile_attempt|bytecode_tracing|build_guards|^dynamo$|OutputGraph"
     r"|variable_builder|create_proxy|get_fake_value|^gc$|compile_subgraph|InstructionTranslator", "Dynamo tracing"),
)
_RULES = [(re.compile(p), PHASES.index(phase)) for p, phase in PHASE_RULES]

# Phase-named ranges (torch's chromium events) that hold a ``(dynamo_timed)`` range of another name.
_PHASE_EVENTS = frozenset({"dynamo", "entire_frame_compile", "backend_compile", "inductor_compile", "code_gen",
                           "compile_attempt", "aot_collect_metadata", "autotune"})
# A unit that holds one of these is a frame's compilation (Dynamo ran); others are backward graphs
# compiled at the first backward() or compilation outside a frame (runtime autotuning).
# Ranges only compilation makes: counted as compilation in a profile that compiled (they are not
# operators; their aten ops below them are)
_COMPILE_ONLY_RANGES = frozenset({"PythonDispatchMode"})
_FRAME_RANGE = re.compile(r"^(_compile\.(<locals>\.)?compile_inner|entire_frame_compile)( \(dynamo_timed\))?$")
_COMPILE_ID = re.compile(r"compile_id=\[?(\d+/\d+)")
_BACKWARD = re.compile(r"bw_compiler|backward", re.I)

# Inductor's generated kernels: C++ kernels that record themselves, Triton kernels, templates
_CPP_KERNEL = re.compile(r"^(?:graph_\d+_)?(cpp_(?:fused_)?\w+?)$")
_TRITON_KERNEL = re.compile(r"^(triton_(?:poi|red|per|tem|for|unk|helper)_\w+?)(?:\.run)?$")
_OP_CODE = KIND_CODE["op"]
_ANNOTATION_CODE = KIND_CODE["annotation"]
_KERNEL_CODE = KIND_CODE["kernel"]


def is_inductor_kernel(name: str) -> bool:
    """Whether ``name`` is a kernel Inductor generated (C++ or Triton)."""
    name = str(name)
    return bool((name.startswith("graph_") or name.startswith("cpp_")) and "cpp_fused" in name
                or _TRITON_KERNEL.match(name))


def kernel_ops(name: str) -> list[str]:
    """The ATen ops a generated kernel fused, as its name says: ``graph_0_cpp_fused_add_gelu_mul_0``
    -> ``["add", "gelu", "mul"]``; ``triton_poi_fused__to_copy_relu_1`` -> ``["_to_copy", "relu"]``.
    Names cut short by Inductor (``config.kernel_name_max_ops``) list the first ops only."""
    m = re.search(r"fused_(.*?)_\d+$", str(name))
    if not m:
        return []
    tokens: list[str] = []
    underscore = False
    for t in m.group(1).split("_"):
        if not t:  # "__" in the name: the next op's own name starts with "_" (``_to_copy``)
            underscore = True
            continue
        tokens.append("_" + t if underscore else t)
        underscore = False
    ops: list[str] = []
    for op in _rejoin(tokens):
        if op not in ops:
            ops.append(op)
    return ops


# op names that contain "_" and would be split by the joiner (the common ones)
_JOINED = ("native_layer_norm", "native_batch_norm", "threshold_backward", "gelu_backward", "log_softmax",
           "_log_softmax", "_softmax", "_to_copy", "scaled_dot_product", "index_put", "embedding_dense_backward",
           "native_dropout", "clamp_min", "clamp_max", "new_zeros", "new_ones", "full_like", "zeros_like",
           "ones_like", "empty_like", "scatter_add", "index_select", "masked_fill", "avg_pool2d", "max_pool2d",
           "convolution_backward", "sigmoid_backward", "tanh_backward", "mean_backward", "silu_backward",
           "_native_batch_norm_legit_functional", "_native_batch_norm_legit_no_training", "var_mean",
           "embedding_backward", "rsqrt", "hardtanh_backward", "leaky_relu", "leaky_relu_backward",
           "le", "lt", "gt", "ge", "eq", "ne")
# the most pieces one of them splits into (_native_batch_norm_legit_no_training: 6)
_LONGEST_JOINED = max(len(name.lstrip("_").split("_")) for name in _JOINED)


def _rejoin(parts: list[str]) -> list[str]:
    """Join back the pieces of op names with "_" in them (``threshold``, ``backward`` ->
    ``threshold_backward``), longest known name first."""
    out: list[str] = []
    i = 0
    while i < len(parts):
        for span in range(_LONGEST_JOINED, 1, -1):
            joined = "_".join(parts[i:i + span])
            if len(parts[i:i + span]) == span and joined in _JOINED:
                out.append(joined)
                i += span
                break
        else:
            out.append(parts[i])
            i += 1
    return out


# ------------------------------------------------------------------------------------- the trace

def compile_range_mask(events: pd.DataFrame) -> np.ndarray:
    """Which rows of a (tree-built) events table are torch.compile's own ranges: the
    ``(dynamo_timed)`` ones, the phase ranges holding them (a range of the same key or a phase's
    name, directly around one), and the ``<event>_data: compile_id=...`` annotations inside them."""
    n = len(events)
    if n == 0:
        return np.zeros(0, dtype=bool)
    names = events["name"]
    kind = events["kind"].cat.codes.to_numpy()
    cpu = (kind == _OP_CODE) | (kind == _ANNOTATION_CODE)
    mask = category_mask(names, lambda s: s.endswith(TIMED_SUFFIX)) & cpu
    if not mask.any() or "parent" not in events.columns:
        return mask
    parent = events["parent"].to_numpy()
    for _ in range(64):  # each pass goes one level up; compile ranges nest a few dozen deep at most
        child = np.flatnonzero(mask)
        par = parent[child]
        keep = par >= 0
        child, par = child[keep], par[keep]
        keep = ~mask[par] & cpu[par]
        child, par = child[keep], par[keep]
        if not len(par):
            break
        pname = values_at(names, par)
        cname = values_at(names, child)
        hit = np.fromiter(((c == p + TIMED_SUFFIX) or (p in _PHASE_EVENTS) or p.startswith("compile_attempt_")
                           for p, c in zip(pname, cname)), dtype=bool, count=len(par))
        if not hit.any():
            break
        mask[par[hit]] = True
    # the "_data:" annotations inside compile ranges
    inner = category_mask(names, lambda s: "_data: " in s) & cpu
    if inner.any():
        mask |= inner & (compile_ancestor(events, mask) >= 0)
    # the Python dispatcher's ranges: torch turns it on to trace the model (fake tensors), mostly
    # under ATen ops inside compile ranges, a few in compiled code's runtime wrappers: all of them
    # go, so that no operator row holds part of them
    mask |= category_mask(names, lambda s: s in _COMPILE_ONLY_RANGES) & cpu
    return mask


def compile_ancestor(events: pd.DataFrame, mask: np.ndarray) -> np.ndarray:
    """Each row's nearest ancestor among the ``mask`` rows (-1: none), one depth level at a time."""
    n = len(events)
    parent = events["parent"].to_numpy()
    depth = events["depth"].to_numpy()
    anc = np.full(n, -1, dtype=np.int64)
    rows = np.flatnonzero(parent >= 0)
    if not len(rows):
        return anc
    order = rows[np.argsort(depth[rows], kind="stable")]
    d = depth[order]
    bounds = np.flatnonzero(np.r_[True, d[1:] != d[:-1], True])
    for i in range(len(bounds) - 1):  # one vectorized step per depth level (a few dozen)
        at = order[bounds[i]:bounds[i + 1]]
        p = parent[at]
        anc[at] = np.where(mask[p], p, anc[p])
    return anc


def _phase_codes(names: pd.Series, rows: np.ndarray) -> np.ndarray:
    """The phase index each compile range's name says, -1 where it says none."""

    def phase_of(name: str) -> int:
        key = name[: -len(TIMED_SUFFIX)] if name.endswith(TIMED_SUFFIX) else name
        for rule, phase in _RULES:
            if rule.search(key):
                return phase
        return -1

    return category_map(names, phase_of, dtype=np.int64, missing=-1, rows=rows)


def compile_units(events: pd.DataFrame, mask: np.ndarray | None = None) -> pd.DataFrame:
    """One row per compile unit (outermost compile range): ``row, start_us, dur_us, frame_unit``
    (Dynamo compiled a frame in it), ``backward``, ``compile_id`` (from the annotations inside it,
    "" when none says), then one ``<phase>_us`` column per phase (:data:`PHASE_COLUMNS`), which add
    up to ``dur_us``."""
    if mask is None:
        mask = compile_range_mask(events)
    cols = ["row", "start_us", "dur_us", "frame_unit", "backward", "compile_id", *PHASE_COLUMNS.values()]
    rows = np.flatnonzero(mask)
    if not len(rows):
        return pd.DataFrame({c: [] for c in cols})
    n = len(events)
    depth = events["depth"].to_numpy()
    dur = events["dur_us"].to_numpy(dtype=np.float64)
    anc = compile_ancestor(events, mask)
    # a Python dispatcher range outside every compile range is not a compilation of its own; the
    # "_data:" annotations are markers (torch opens them inside the Python dispatcher, where they
    # can outlast their siblings): neither counts time
    loose = category_mask(events["name"], lambda s: s in _COMPILE_ONLY_RANGES, rows=rows) & (anc[rows] < 0)
    marker = category_mask(events["name"], lambda s: "_data: " in s, rows=rows)
    markers = rows[marker]
    rows = rows[~loose & ~marker]
    if not len(rows):
        return pd.DataFrame({c: [] for c in cols})
    up = anc[rows]
    in_compile = up >= 0
    # each compile range's unit (its outermost compile ancestor) and phase (its name's, else its
    # nearest compile ancestor's), one depth level at a time
    root = np.full(n, -1, dtype=np.int64)
    phase = np.full(n, -1, dtype=np.int64)
    named = _phase_codes(events["name"], rows)
    top = rows[~in_compile]
    root[top] = top
    phase[rows] = named
    order = np.argsort(depth[rows], kind="stable")
    inner = rows[order][in_compile[order]]
    inner_depth = depth[inner]
    for d in np.unique(inner_depth):
        at = inner[inner_depth == d]
        root[at] = root[anc[at]]
        unset = at[phase[at] < 0]
        phase[unset] = phase[anc[unset]]
    other = PHASES.index("Other")
    phase[rows[phase[rows] < 0]] = other
    # exclusive time: a range's time minus that of the compile ranges nearest below it
    kids = rows[in_compile]
    children_us = np.bincount(anc[kids], weights=dur[kids], minlength=n)
    exclusive = np.maximum(dur[rows] - children_us[rows], 0.0)
    unit_of = {int(r): i for i, r in enumerate(top)}
    unit = np.array([unit_of[int(r)] for r in root[rows]], dtype=np.int64)
    per = np.bincount(unit * len(PHASES) + phase[rows], weights=exclusive,
                      minlength=len(top) * len(PHASES)).reshape(len(top), len(PHASES))
    names = values_at(events["name"], rows)
    frame_unit = np.zeros(len(top), dtype=bool)
    backward = np.zeros(len(top), dtype=bool)
    ids = [""] * len(top)
    for u, name in zip(unit.tolist(), names.tolist()):
        if _FRAME_RANGE.match(name):
            frame_unit[u] = True
        elif _BACKWARD.search(name):
            backward[u] = True
    # a unit's compile id: the first one its markers name ("compile_file_data: compile_id=0/0")
    marker_root = root[np.maximum(anc[markers], 0)]
    for r, name in zip(marker_root.tolist(), values_at(events["name"], markers).tolist()):
        u = unit_of.get(int(r), -1) if r >= 0 else -1
        if u >= 0 and not ids[u]:
            m = _COMPILE_ID.search(name)
            if m:
                ids[u] = m.group(1)
    out = pd.DataFrame({
        "row": top,
        "start_us": events["start_us"].to_numpy()[top],
        "dur_us": dur[top],
        "frame_unit": frame_unit,
        "backward": backward & ~frame_unit,
        "compile_id": ids,
    })
    for i, col in enumerate(PHASE_COLUMNS.values()):
        out[col] = per[:, i]
    return out.sort_values("start_us", kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------------------- the log

_GRAPH_BREAK_AT = re.compile(r"Graph break(?: in user code)? at (.+):(\d+)")
_FILE_LINE = re.compile(r'File "(.+?)", line (\d+), in (\S+)\n\s*(.*)')
_RESUME = re.compile(r"^torch_dynamo_resume_in_(\w+)_at_(\d+)$")


_KERNEL_CELL = re.compile(r"[/\\]ipykernel_\d+[/\\]\d+\.py$")


def cell_location(filename: str, line: int | None, code_names: dict[str, str]) -> str:
    """Where a line is, as a traceback names it: ``In [4] line 12`` for a notebook cell,
    ``…/models/mlp.py:12`` for a file."""
    from ..format import short_path

    if not filename:
        return ""
    where = code_names.get(filename)
    if where is None:
        m = re.match(r"<ipython-input-(\d+)-", filename)
        where = f"In [{m.group(1)}]" if m else None
    if where is None and _KERNEL_CELL.search(filename):
        # a kernel cell's file is /tmp/ipykernel_<pid>/<hash of the cell's code>.py: what the FX graph
        # cache kept from another process (provenance of a cache hit) names the same cell by its hash
        # (the folder separator "/" or, on Windows, "\\", as _KERNEL_CELL reads either)
        base = re.split(r"[/\\]", filename)[-1]
        where = next((name for f, name in code_names.items() if re.split(r"[/\\]", f)[-1] == base
                      and _KERNEL_CELL.search(f)), None)
    if where is not None:
        return f"{where} line {line}" if line else where
    return f"{short_path(filename)}:{line}" if line else short_path(filename)


def _compile_id(record: dict[str, Any]) -> str:
    f, c = record.get("frame_id"), record.get("frame_compile_id")
    if f is None or c is None:
        return ""
    cid = f"{f}/{c}"
    a = record.get("compiled_autograd_id")
    return f"!{a}/{cid}" if a is not None else cid


def _metrics_id(record: dict[str, Any]) -> str:
    """A ``compilation_metrics`` record's compile id: its metrics', else its context's (one rule for
    every table, so that a frame's breaks, recompiles and time meet under one id)."""
    return str(record["metrics"].get("compile_id") or _compile_id(record))


def _graph_break(payload: str) -> dict[str, Any]:
    """A ``dynamo_graph_break_reason`` artifact: where (file, line, code) and why (its first line)."""
    text = payload or ""
    reason = text
    if "Graph Break Reason:" in text:
        reason = text.split("Graph Break Reason:", 1)[1]
    reason = reason.split("User code traceback:", 1)[0].strip()
    lines = [ln.strip() for ln in reason.splitlines() if ln.strip()]
    # "Encountered graph break when attempting to trace CALL: ..." then the real reason's title
    title = lines[0] if lines else ""
    if title.startswith("Encountered graph break") and len(lines) > 1:
        title = lines[1]
    explanation = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Explanation:")), "")
    filename, line, code = "", None, ""
    user = text.split("User code traceback:", 1)[1] if "User code traceback:" in text else ""
    user = user.split("Traceback (most recent call last)", 1)[0]  # Dynamo's own traceback follows it
    frames = _FILE_LINE.findall(user)
    m = _GRAPH_BREAK_AT.search(text)
    if m:
        filename, line = m.group(1), int(m.group(2))
    if frames:  # the innermost frame of the user's traceback: the line that broke the graph
        f = frames[-1]
        if not filename or (f[0] == filename and int(f[1]) == line):
            filename, line, code = f[0], int(f[1]), f[3].strip()
    return {"filename": filename, "line": line, "code": code, "reason": title, "explanation": explanation,
            "detail": reason}


def _recompile_advice(reason: str) -> str:
    r = reason.lower()
    if "size mismatch" in r or "stride mismatch" in r or "shape" in r:
        return ("input shapes changed: mark the changing dimension dynamic (torch._dynamo.mark_dynamic) or "
                "compile with dynamic=True")
    if "dtype" in r:
        return "an input's dtype changed"
    if "device" in r:
        return "an input's device changed"
    if "requires_grad" in r or "grad_mode" in r or "grad mode" in r:
        return "grad mode or requires_grad changed (e.g. train vs no_grad): compile each mode once"
    if "id_match" in r or "___check_obj_id" in r or "identity" in r:
        return "an object the code reads is a different one (a new module or function each call)"
    if "==" in r or "!=" in r or "equals_match" in r or "constant_match" in r:
        return "a Python value the code reads changed (each value compiles once: pass it as a tensor)"
    if "cache_size_limit" in r or "recompile_limit" in r:
        return "the recompile limit was hit: Dynamo falls back to eager for this frame"
    return ""


def _frame_label(m: dict[str, Any]) -> str:
    name = str(m.get("co_name") or "")
    r = _RESUME.match(name)
    return f"{name} (after the graph break in {r.group(1)} at line {r.group(2)})" if r else name


# ----------------------------------------------------------------------------- generated kernels

_RECORDED_AS = re.compile(r'(?:RECORD_FUNCTION|RecordFunctionHandle \w+)\("(graph_\d+_\w+)"')
# a kernel call: ``cpp_fused_relu_0(...)``, ``extern_kernels.mm(...)``, a Triton kernel's
# ``triton_poi_fused_add_0.run(...)`` (its ".run" is no part of the kernel's name)
_KERNEL_CALL = re.compile(r"^(?:\w+\s*=\s*)?([A-Za-z_]\w*(?:\.(?!run\()[A-Za-z_]\w*)?)(?:\.run)?\(")
_HANDLE = re.compile(r"\[Provenance debug handles\]\s*(\S+?):(\d+)")
_SOURCE_NODES = re.compile(r"Source Nodes: \[(.*?)\], Original ATen: \[(.*?)\]")
_GRAPH_FILE = re.compile(r"# File: (.+?):(\d+) in (\S+), code: (.*)$")
_GRAPH_NODE = re.compile(r"^(\w+)\s*(?::\s*\"[^\"]*\")?\s*=")


def _code_kernels(lines: list[str]) -> dict[str, dict[str, Any]]:
    """From the wrapper code's comment lines (``collect.compile_state``): per called kernel, its
    source nodes and original ATen ops."""
    out: dict[str, dict[str, Any]] = {}
    pending: dict[str, Any] = {}
    for ln in lines:
        m = _SOURCE_NODES.search(ln)
        if m:
            pending = {"nodes": [s.strip() for s in m.group(1).split(",") if s.strip()],
                       "aten": [s.strip() for s in m.group(2).split(",") if s.strip()]}
            continue
        if ln.startswith("#") or not pending:
            continue
        c = _KERNEL_CALL.match(ln)
        if c:
            name = c.group(1)
            if name.startswith(("extern_kernels.", "cpp_", "triton_", "aten.")) or "fused" in name:
                out.setdefault(name, pending)
                pending = {}
    return out


def _graph_sources(lines: list[str]) -> dict[str, tuple[str, int, str]]:
    """From Dynamo's output graph: FX node name -> (file, line, code) of the source line."""
    out: dict[str, tuple[str, int, str]] = {}
    where: tuple[str, int, str] | None = None
    for ln in lines:
        m = _GRAPH_FILE.search(ln)
        if m:
            where = (m.group(1), int(m.group(2)), m.group(4).strip())
            continue
        n = _GRAPH_NODE.match(ln)
        if n and where is not None:
            out.setdefault(n.group(1), where)
    return out


def _provenance(payload: str | None) -> dict[str, list[tuple[str, int, str]]]:
    """Inductor's ``inductor_provenance_tracking_kernel_stack_traces``: kernel -> source lines."""
    try:
        data = json.loads(payload or "{}")
    except (TypeError, ValueError):
        return {}
    out: dict[str, list[tuple[str, int, str]]] = {}
    if not isinstance(data, dict):
        return out
    for key, stacks in data.items():
        name = str(key).rsplit(":", 1)[0]
        places = out.setdefault(name, [])
        for stack in stacks if isinstance(stacks, list) else [stacks]:
            frames = _FILE_LINE.findall(str(stack))
            if frames:
                f = frames[-1]
                place = (f[0], int(f[1]), f[3].strip())
                if place not in places:
                    places.append(place)
    return out


@dataclass
class Compilation:
    """What torch.compile did in a profile (``TorchProfile.compilation()``), as tables.

    - ``frames``: one row per compilation (compile unit): ``compile_id, frame, source, kind``
      ("frame", "recompile", "backward", "other"), ``start_us, compile_us``, one ``<phase>_us``
      column per phase (they add up to ``compile_us``), ``graph_breaks, recompile_reason,
      fx_graph_cache, aot_autograd_cache`` ("hit", "miss", "" when not known), ``guards``;
    - ``phases``: ``phase, compile_us, share`` over every compilation of the profile;
    - ``graph_breaks``: one row per graph break: ``compile_id, frame, source, code, reason,
      explanation``; ``recompiles``: ``compile_id, frame, source, reason, advice``;
    - ``per_frame``: per compiled function: ``frame, source, compiles, recompiles, graph_breaks,
      compile_us``;
    - ``kernels``: the generated kernels that ran: ``name, kind`` ("cpp", "triton", "extern"),
      ``count, total_us, avg_us, share, aten_ops, sources`` (cell lines), ``device``;
    - ``lines``: "by source line": ``source, code, kernels, kernel_us, count`` (a kernel's time is
      split evenly between the lines it fused);
    - ``notes``: what the profile could not say (no structured log in a loaded trace, code
      compiled before the profile without kernel profiling).
    """

    frames: pd.DataFrame
    phases: pd.DataFrame
    graph_breaks: pd.DataFrame
    recompiles: pd.DataFrame
    per_frame: pd.DataFrame
    kernels: pd.DataFrame
    lines: pd.DataFrame
    counters: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    has_log: bool = False
    has_compiled_calls: bool = False  # compiled code ran (its regions are in the trace)

    @property
    def compile_us(self) -> float:
        return float(self.frames["compile_us"].sum()) if len(self.frames) else 0.0

    @property
    def empty(self) -> bool:
        """Nothing compiled and no compiled code ran."""
        return not (len(self.frames) or len(self.kernels) or len(self.graph_breaks) or self.has_compiled_calls)

    def __repr__(self) -> str:
        return (f"<Compilation {plural(len(self.frames), 'compilation')} ({self.compile_us / 1e6:.2f} s), "
                f"{plural(len(self.graph_breaks), 'graph break')}, {plural(len(self.recompiles), 'recompile')}, "
                f"{plural(len(self.kernels), 'kernel')}>")


def compilation(events: pd.DataFrame, log: dict[str, Any] | None, code_names: dict[str, str] | None = None,
                mask: np.ndarray | None = None) -> Compilation:
    """The :class:`Compilation` of a tree-built events table and its structured log (None for a
    loaded trace without one)."""
    code_names = code_names or {}
    if mask is None:
        mask = compile_range_mask(events)
    units = compile_units(events, mask)
    records = list((log or {}).get("records") or [])
    metrics = [r for r in records if r.get("event") == "compilation_metrics"]
    notes: list[str] = []

    def where(filename: str, line: Any) -> str:
        return cell_location(filename, int(line) if line not in (None, "") else None, code_names)

    # -- compilations: the trace's units joined with Dynamo's metrics (same order, or compile id)
    by_id = {_metrics_id(m): m["metrics"] for m in metrics}
    frame_units = units.index[units["frame_unit"]].tolist() if len(units) else []
    matched: dict[int, dict[str, Any]] = {}
    if len(frame_units) == len(metrics):
        matched = {u: m["metrics"] for u, m in zip(frame_units, metrics)}
    else:
        for u in frame_units:
            cid = units.at[u, "compile_id"]
            if cid in by_id:
                matched[u] = by_id[cid]
    caches = _caches(records)
    rows = []
    for u in range(len(units)):
        unit = units.iloc[u]
        m = matched.get(u, {})
        cid = str(m.get("compile_id") or unit["compile_id"] or "")
        if unit["frame_unit"]:
            again = bool(re.search(r"/[1-9]\d*$", cid))  # frame_compile_id > 0: this frame's compilation n+1
            kind = "recompile" if m.get("recompile_reason") or again else "frame"
        else:
            kind = "backward" if unit["backward"] else "other"
        row = {
            "compile_id": cid,
            "frame": _frame_label(m) if m else "",
            "source": where(str(m.get("co_filename") or ""), m.get("co_firstlineno")) if m else "",
            "kind": kind,
            "start_us": float(unit["start_us"]),
            "compile_us": float(unit["dur_us"]),
            **{c: float(unit[c]) for c in PHASE_COLUMNS.values()},
            "graph_breaks": 0,
            "recompile_reason": str(m.get("recompile_reason") or ""),
            "fx_graph_cache": caches.get(cid, {}).get("fx_graph_cache", ""),
            "aot_autograd_cache": caches.get(cid, {}).get("aot_autograd_cache", ""),
            "guards": int(m.get("guard_count") or 0),
        }
        rows.append(row)
    frame_cols = ["compile_id", "frame", "source", "kind", "start_us", "compile_us", *PHASE_COLUMNS.values(),
                  "graph_breaks", "recompile_reason", "fx_graph_cache", "aot_autograd_cache", "guards"]
    frames = pd.DataFrame(rows, columns=frame_cols)
    # backward units named after the frame whose graph they compile
    if len(frames):
        # from the named rows only: the backward unit's own row (same compile id, unnamed, later in
        # time) must not stand for its frame
        named = frames[frames["frame"] != ""]
        known = dict(zip(named["compile_id"], zip(named["frame"], named["source"])))
        for i in frames.index[(frames["kind"] == "backward") & (frames["frame"] == "")]:
            f = known.get(frames.at[i, "compile_id"])
            if f:
                frames.at[i, "frame"], frames.at[i, "source"] = f

    # -- graph breaks and recompiles (the log only)
    breaks = []
    for r in records:
        if r.get("event") == "dynamo_graph_break_reason":
            g = _graph_break(r.get("payload") or "")
            breaks.append({"compile_id": _compile_id(r), "filename": g["filename"], "line": g["line"],
                           "source": where(g["filename"], g["line"]), "code": g["code"], "reason": g["reason"],
                           "explanation": g["explanation"], "detail": g["detail"]})
    if not breaks:
        breaks = _restart_breaks(metrics, where)
    graph_breaks = pd.DataFrame(breaks, columns=["compile_id", "filename", "line", "source", "code", "reason",
                                                 "explanation", "detail"])
    frame_of = {_metrics_id(m): m["metrics"] for m in metrics}
    if len(graph_breaks):
        graph_breaks.insert(1, "frame", [_frame_label(frame_of.get(c, {})) for c in graph_breaks["compile_id"]])
        counts = graph_breaks.groupby("compile_id").size()
        frames["graph_breaks"] = frames["compile_id"].map(counts).fillna(0).astype(int)
    else:
        graph_breaks.insert(1, "frame", pd.Series([], dtype=object))
    recs = []
    for m in metrics:
        mm = m["metrics"]
        reason = str(mm.get("recompile_reason") or "")
        if reason:
            recs.append({"compile_id": _metrics_id(m), "frame": _frame_label(mm),
                         "source": where(str(mm.get("co_filename") or ""), mm.get("co_firstlineno")),
                         "reason": reason, "advice": _recompile_advice(reason)})
    recompiles = pd.DataFrame(recs, columns=["compile_id", "frame", "source", "reason", "advice"])

    # -- per compiled function
    per = []
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for m in metrics:
        mm = m["metrics"]
        key = (str(mm.get("co_name") or ""), where(str(mm.get("co_filename") or ""), mm.get("co_firstlineno")))
        entry = seen.setdefault(key, {"frame": _frame_label(mm), "source": key[1], "compiles": 0, "recompiles": 0,
                                      "graph_breaks": 0, "compile_us": 0.0})
        entry["compiles"] += 1
        entry["recompiles"] += int(bool(mm.get("recompile_reason")))
        cid = _metrics_id(m)
        entry["graph_breaks"] += int((graph_breaks["compile_id"] == cid).sum()) if len(graph_breaks) else 0
        if len(frames):
            entry["compile_us"] += float(frames.loc[frames["compile_id"] == cid, "compile_us"].sum())
    per = list(seen.values())
    per_frame = pd.DataFrame(per, columns=["frame", "source", "compiles", "recompiles", "graph_breaks", "compile_us"])

    # -- phases over the whole profile
    totals = [float(frames[c].sum()) if len(frames) else 0.0 for c in PHASE_COLUMNS.values()]
    whole = sum(totals)
    phases = pd.DataFrame({"phase": list(PHASES), "compile_us": totals,
                           "share": [t / whole if whole > 0 else 0.0 for t in totals]})
    phases = phases[phases["compile_us"] > 0].reset_index(drop=True)

    kernels, lines, compiled_calls = _kernels(events, records, where)
    if log is None and len(frames):
        notes.append("graph breaks, recompiles and the source lines of kernels come from torch's structured log, "
                     "which a live %%torchprof keeps; this profile has only the trace's compile ranges")
    if compiled_calls and not len(kernels):
        notes.append("the compiled code ran as one range per graph (## Call CompiledFxGraph ##): it was compiled "
                     "before this profile, without Inductor's kernel profiling. Compile it inside a %%torchprof "
                     "cell (after torch._dynamo.reset()) to see each fused C++ kernel and its time")
    return Compilation(frames=frames, phases=phases, graph_breaks=graph_breaks.drop(columns=["filename", "line"]),
                       recompiles=recompiles, per_frame=per_frame, kernels=kernels, lines=lines,
                       counters=dict((log or {}).get("counters") or {}), notes=notes, has_log=log is not None,
                       has_compiled_calls=compiled_calls)


def _restart_breaks(metrics: list[dict[str, Any]], where: Any) -> list[dict[str, Any]]:
    """Graph breaks where torch logs no ``dynamo_graph_break_reason`` artifact (torch 2.4): each
    restart reason of a frame's compilation (tlparse's "RestartAnalysis"), at the line its resume
    function is named for (``torch_dynamo_resume_in_forward_at_15``)."""
    resumes: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for m in metrics:
        r = _RESUME.match(str(m["metrics"].get("co_name") or ""))
        if r:
            resumes.setdefault((str(m["metrics"].get("co_filename") or ""), r.group(1)), []).append(
                (int(r.group(2)), str(m["metrics"].get("resume_code") or "")))
    out = []
    for m in metrics:
        mm = m["metrics"]
        reasons = [str(x) for x in (mm.get("restart_reasons") or []) if str(x).strip()]
        filename = str(mm.get("co_filename") or "")
        name = str(mm.get("co_name") or "")
        resume = _RESUME.match(name)
        fn = resume.group(1) if resume else name
        for reason in reasons:
            lines = resumes.get((filename, fn)) or []
            line, code = lines.pop(0) if lines else (None, "")
            title = reason.strip().splitlines()[0]
            out.append({"compile_id": _metrics_id(m), "filename": filename, "line": line,
                        "source": where(filename, line) if line else "", "code": code, "reason": title,
                        "explanation": "", "detail": reason.strip()})
    return out


def _caches(records: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for r in records:
        ev = str(r.get("event") or "")
        for prefix, column in (("fx_graph_cache_", "fx_graph_cache"), ("aotautograd_cache_", "aot_autograd_cache")):
            if ev.startswith(prefix):
                slot = out.setdefault(_compile_id(r), {})
                result = ev[len(prefix):]
                # a frame with several graphs (forward + backward): a miss anywhere is a miss
                if slot.get(column) != "miss":
                    slot[column] = result
    return out


def _kernels(events: pd.DataFrame, records: list[dict[str, Any]],
             where: Any) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    """The generated kernels that ran (C++ kernels recording themselves, Triton kernels on the
    device) and the ATen ops they fused, with their source lines; and the by-line table."""
    kcols = ["name", "kind", "count", "total_us", "avg_us", "share", "aten_ops", "sources", "device"]
    lcols = ["source", "code", "kernels", "kernel_us", "count"]
    names = events["name"]
    # most profiles compiled nothing: one look at the distinct names says so (no pass over the rows)
    if not any(s.startswith(("## Call CompiledFxGraph", "Torch-Compiled Region")) or is_inductor_kernel(s)
               for s in map(str, names.cat.categories)):
        return pd.DataFrame(columns=kcols), pd.DataFrame(columns=lcols), False
    is_call = category_mask(names, lambda s: s.startswith(("## Call CompiledFxGraph", "Torch-Compiled Region")))
    compiled_calls = bool(is_call.any())
    is_kernel = category_mask(names, is_inductor_kernel)
    kind = events["kind"].cat.codes.to_numpy()
    # a C++ kernel is a CPU op; a Triton kernel is device work (its launch, a CPU op of the same name, is not counted)
    rows = np.flatnonzero(is_kernel & (((kind == _OP_CODE) & category_mask(names, lambda s: "cpp_" in s))
                                       | (kind == _KERNEL_CODE)))
    # extern calls (mm, convolution) the compiled code made: ops directly under a CompiledFxGraph call
    parent = events["parent"].to_numpy() if "parent" in events.columns else np.full(len(events), -1)
    is_graph_call = category_mask(names, lambda s: s.startswith("## Call CompiledFxGraph"))
    extern = np.flatnonzero((kind == _OP_CODE) & (parent >= 0) & ~is_kernel
                            & is_graph_call[np.maximum(parent, 0)] & (parent >= 0)
                            & category_mask(names, lambda s: s.startswith("aten::")))
    if not len(rows) and not len(extern):
        return pd.DataFrame(columns=kcols), pd.DataFrame(columns=lcols), compiled_calls
    # what the log knows of each kernel: ops (comments), sources (provenance, or nodes -> graph lines)
    # keyed by the name the kernel runs under: graph_<n>_cpp_... where the generated code says so
    # (the same cpp_fused_add_0 in two graphs is two kernels), else the code's own name
    info: dict[str, dict[str, Any]] = {}
    graph_nodes: dict[str, tuple[str, int, str]] = {}
    recorded_as: dict[str, str] = {}  # the last generated code's kernels: code name -> recorded name
    for r in records:
        ev = r.get("event")
        if ev == "dynamo_output_graph":
            graph_nodes.update(_graph_sources(r.get("lines") or []))
        elif ev == "inductor_output_code":
            lines = r.get("lines") or []
            recorded_as = {m.group(1).split("_", 2)[2]: m.group(1) for m in map(_RECORDED_AS.search, lines) if m}
            for name, k in _code_kernels(lines).items():
                slot = info.setdefault(recorded_as.get(name, name), {"aten": [], "sources": []})
                slot["aten"] = list(dict.fromkeys(slot["aten"] + k["aten"]))
                for node in k["nodes"]:
                    if node in graph_nodes and graph_nodes[node] not in slot["sources"]:
                        slot["sources"].append(graph_nodes[node])
        elif ev == "inductor_provenance_tracking_kernel_stack_traces":  # of the code logged just before
            for name, places in _provenance(r.get("payload")).items():
                slot = info.setdefault(recorded_as.get(name, name), {"aten": [], "sources": []})
                for p in places:
                    if p not in slot["sources"]:
                        slot["sources"].append(p)
    dur = events["dur_us"].to_numpy(dtype=np.float64)
    device = values_at(events["device"])
    kname = values_at(names, rows)
    ename = values_at(names, extern)
    # an extern call on a GPU: the device time of the kernels it launched (its CPU time is the launch)
    on_device = (events["device_total_us"].to_numpy(dtype=np.float64)[extern] if "device_total_us" in events
                 else np.zeros(len(extern)))
    extern_us = np.where(on_device > 0, on_device, dur[extern])
    extern_device = np.where(on_device > 0, "cuda", device[extern])
    frame = pd.DataFrame({
        "name": np.concatenate([kname, ename]).astype(object),
        "kind": ["triton" if n.startswith("triton_") else "cpp" for n in kname] + ["extern"] * len(ename),
        "dur": np.concatenate([dur[rows], extern_us]),
        "device": np.concatenate([device[rows], extern_device]).astype(object),
    })
    g = frame.groupby(["name", "kind", "device"], sort=False).agg(count=("dur", "size"), total_us=("dur", "sum"))
    g = g.reset_index()
    g["avg_us"] = g["total_us"] / g["count"]
    total = float(g["total_us"].sum())
    g["share"] = g["total_us"] / total if total > 0 else 0.0
    ops_col, src_col, places_col = [], [], []
    for name, kk in zip(g["name"], g["kind"]):
        if kk == "extern":
            short = name.split("::", 1)[-1]
            key = f"extern_kernels.{short}"
            k = info.get(key, {"aten": [f"aten.{short}"], "sources": []})
            ops = [f"aten.{short}"]
        else:
            m = _CPP_KERNEL.match(name) or _TRITON_KERNEL.match(name)
            key = name if name in info else (m.group(1) if m else name)
            k = info.get(key, {"aten": [], "sources": []})
            ops = k["aten"] or [f"aten.{o}" for o in kernel_ops(name)]
        places = k["sources"]
        ops_col.append(", ".join(ops))
        src_col.append("; ".join(dict.fromkeys(where(f, ln) for f, ln, _ in places)))
        places_col.append(places)
    g["aten_ops"] = ops_col
    g["sources"] = src_col
    kernels = g[kcols].sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)
    # by source line: each kernel's time split evenly between its lines
    per_line: dict[str, dict[str, Any]] = {}
    for name, t, c, places in zip(g["name"], g["total_us"], g["count"], places_col):
        spots = list(dict.fromkeys((where(f, ln), code) for f, ln, code in places)) or [("(no source line known)", "")]
        for spot, code in spots:
            slot = per_line.setdefault(spot, {"source": spot, "code": code, "kernels": [], "kernel_us": 0.0,
                                              "count": 0})
            slot["kernels"].append(name)
            slot["kernel_us"] += float(t) / len(spots)
            slot["count"] += int(c)
    lines = pd.DataFrame([{**v, "kernels": ", ".join(v["kernels"])} for v in per_line.values()], columns=lcols)
    lines = lines.sort_values("kernel_us", ascending=False, kind="stable").reset_index(drop=True)
    return kernels, lines, compiled_calls


def op_times(averages: pd.DataFrame, kernels: pd.DataFrame | None, metric: str) -> pd.DataFrame:
    """Time per ATen op (``aten::gelu``), what ``compare(eager, compiled)`` puts side by side:
    ``op, time_us, count, sources``.

    Compiled (``kernels``, a ``Compilation.kernels`` table with rows): each generated kernel's time
    split evenly among the ops it fused, an extern call's time its own; ``sources``: the source
    lines of those kernels. Eager (``kernels`` None or empty): each ATen op's ``metric`` (self CPU
    or self device time) from the key averages."""
    cols = ["op", "time_us", "count", "sources"]
    if kernels is not None and len(kernels):
        acc: dict[str, dict[str, Any]] = {}
        for ops_text, t, c, src in zip(kernels["aten_ops"], kernels["total_us"], kernels["count"], kernels["sources"]):
            ops = [o.strip() for o in str(ops_text).split(",") if o.strip()] or ["(unknown)"]
            for o in ops:
                name = "aten::" + o.split(".", 1)[1] if o.startswith("aten.") else o
                slot = acc.setdefault(name, {"op": name, "time_us": 0.0, "count": 0, "sources": []})
                slot["time_us"] += float(t) / len(ops)
                slot["count"] += int(c)
                slot["sources"] += [s for s in str(src).split("; ") if s and s not in slot["sources"]]
        return pd.DataFrame([{**v, "sources": "; ".join(v["sources"])} for v in acc.values()], columns=cols)
    ops = averages[(averages["kind"].astype(str) == "op") & averages["name"].astype(str).str.startswith("aten::")]
    return pd.DataFrame({"op": ops["name"].astype(str).to_numpy(), "time_us": ops[metric].to_numpy(dtype=float),
                         "count": ops["count"].to_numpy(), "sources": ""}, columns=cols)
