"""Device activity per kernel name: what ran on the GPU, how long, on which streams, launched by
whom, and how it was launched (what the TensorBoard plugin's kernel view showed).

Launch columns, from CUPTI through the trace (NaN / "" for copies and traces without them):
``grid``, ``block``: the launch dimensions used most often (``launch_configs``: how many distinct
(grid, block) pairs the kernel ran with); ``registers_per_thread``, ``shared_memory_bytes``: the
largest; ``blocks_per_sm``, ``occupancy_pct``: means weighted by each launch's duration (CUPTI's
estimates: blocks per SM below 1 leaves SMs idle; est. achieved occupancy is the share of the
SM's warp slots in use).

``tensor_cores``: whether the kernel runs on the Tensor Cores, by the TensorBoard plugin's rule
(kineto's ``tb_plugin/torch_tb_profiler/profiler/tensor_core.py``, itself from NVIDIA PyProf): its
name contains one of :data:`TENSOR_CORE_KERNEL_PATTERNS` (MMA instruction shapes ``s884``,
``h1688``, ``16816``..., cuDNN's and CUTLASS's ``xmma`` families). The list predates Ampere's
kernel names, and the recorded traces (H100 in ``nbprof/data``, A100 in tests/data/wild) show where
it is wrong, so nbprof corrects it by what the names themselves say (:data:`TENSOR_CORE_MATH`,
:data:`CUDA_CORE_MATH`):

- ``sm80_xmma_gemm_f32f32_..._ffma_...``: the plugin counts it (``xmma_gemm``), but ``ffma`` is its
  math: FP32 fused multiply-adds on the CUDA cores (an FP32 matmul without TF32): not Tensor Cores;
- ``sm80_xmma_wgrad_implicit_gemm_..._tf32f32_..._tensor16x8x8_...`` (cuDNN's convolutions with
  TF32, 42 % of the CNN trace's GPU time) and CUTLASS's ``..._tensorop_...`` kernels name their
  Tensor Core MMA shape or operator class; the plugin's list misses them: Tensor Cores.

A kernel whose name states neither (cuBLAS's ``nvjet`` kernels, flash attention's) reads as not on
the Tensor Cores, as in the plugin. Copies and fills: False.

``bandwidth_gbps``: memcpy rows only (NaN otherwise): bytes copied over the copies' device time,
in GB/s (1e9 bytes per second), as Kineto's own "memory bandwidth (GB/s)" argument per copy.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..events import DEVICE_WORK_CODES, kind_mask
from ._tables import TEXT, empty_table

__all__ = ["kernel_table", "kernel_parts", "kernels_from_parts", "KERNEL_COLUMNS", "uses_tensor_cores",
           "TENSOR_CORE_KERNEL_PATTERNS", "TENSOR_CORE_OPS", "TENSOR_CORE_MATH", "CUDA_CORE_MATH"]

# The TensorBoard plugin's rule (TC_Allowlist): a kernel name containing one of these runs on the
# Tensor Cores. The plugin took the list from NVIDIA PyProf (pyprof/prof/tc.py).
TENSOR_CORE_KERNEL_PATTERNS = (
    "h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816", "dgrad_1x1_stride_2x2",
    "first_layer_wgrad_kernel", "conv1x1", "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm",
    "xmma_sparse_conv", "xmma_warp_specialized_implicit_gemm", "xmma_gemm", "xmma_sparse_gemm", "c1688",
)
# nbprof's corrections (the module doc says where they were measured): the math a kernel names
# itself: a Tensor Core MMA shape ("_tensor16x8x8_") or CUTLASS's Tensor Core operator class
# ("tensorop"; its CUDA-core class is "simt"), or the CUDA cores' FP32 multiply-add ("_ffma_")
TENSOR_CORE_MATH = re.compile(r"_tensor\d+x\d+x\d+|tensorop")
CUDA_CORE_MATH = "_ffma_"
# The plugin's TC_OP_Allowlist: the operators that can use Tensor Cores (autocast's lower-precision
# list: convolutions, matmuls, RNN cells, and the backward ops they record)
TENSOR_CORE_OPS = frozenset((
    "aten::_convolution", "aten::_convolution_nogroup", "aten::conv1d", "aten::conv2d", "aten::conv3d",
    "aten::conv_tbc", "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
    "aten::convolution", "aten::cudnn_convolution", "aten::cudnn_convolution_transpose", "aten::prelu",
    "aten::addmm", "aten::addmv", "aten::addr", "aten::matmul", "aten::mm", "aten::mv", "aten::linear",
    "aten::addbmm", "aten::baddbmm", "aten::bmm", "aten::chain_matmul", "aten::linalg_multi_dot",
    "aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_gru_cell", "aten::lstm_cell", "aten::gru_cell",
    "aten::rnn_tanh_cell", "aten::rnn_relu_cell", "CudnnConvolutionBackward", "BmmBackward0",
    "aten::cudnn_convolution_transpose_backward", "CudnnConvolutionTransposeBackward", "MmBackward",
    "aten::cudnn_convolution_backward_weight", "aten::addmm_", "AddmvBackward", "MvBackward",
    "aten::cudnn_convolution_transpose_backward_weight", "aten::cudnn_convolution_transpose_backward_input",
    "AddmmBackward", "aten::cudnn_convolution_backward_input", "AddbmmBackward", "aten::cudnn_convolution_backward",
))


def uses_tensor_cores(name: str) -> bool:
    """The plugin's rule for one kernel name, with nbprof's corrections (module doc)."""
    if CUDA_CORE_MATH in name:
        return False
    return any(p in name for p in TENSOR_CORE_KERNEL_PATTERNS) or TENSOR_CORE_MATH.search(name) is not None

KERNEL_COLUMNS = (
    "name",
    "kind",
    "count",
    "device_total_us",
    "device_avg_us",
    "device_min_us",
    "device_max_us",
    "share",
    "bytes",
    "streams",
    "launched_by",
    "grid",
    "block",
    "launch_configs",
    "registers_per_thread",
    "shared_memory_bytes",
    "blocks_per_sm",
    "occupancy_pct",
    "tensor_cores",
    "bandwidth_gbps",
)


KERNEL_DTYPES = {c: np.float64 for c in KERNEL_COLUMNS} | {
    **dict.fromkeys(("name", "kind", "streams", "launched_by", "grid", "block"), TEXT),
    **dict.fromkeys(("count", "bytes", "launch_configs"), np.int64), "tensor_cores": bool}


def kernel_table(events: pd.DataFrame) -> pd.DataFrame:
    """One row per (kernel name, kind): counts and device time; ``share`` of all device time;
    ``launched_by``: the CPU op that launched it most often (its External id, else the op around
    its runtime call: ``analysis.tree``)."""
    return kernels_from_parts(kernel_parts(events))


# A part: the launches of one kernel (name, kind) on one device stream, by one launcher, with one
# (grid, block): what :func:`kernels_from_parts` needs to build the table, summed so that parts of
# several traces (a folder of ranks, each summarized where it is read) add up to the table of all
# their events. Parts come in the order their first launch appears.
_PART_KEY = ["name", "kind", "device", "stream", "launcher", "grid", "block"]


def kernel_parts(events: pd.DataFrame) -> pd.DataFrame:
    """The kernel table's parts (see ``_PART_KEY``): ``count, dur_sum, dur_min, dur_max, bytes``,
    the largest ``registers_per_thread`` and ``shared_memory_bytes`` of a launch, and the
    duration-weighted sums (``*_w``) and their durations (``*_d``) of the launch estimates.

    Grouped on the columns' integer codes, the names written once per part (grouping on the
    strings hashed each of them: 0.1 s at 120k kernels)."""
    kind = events["kind"].cat.codes.to_numpy()
    rows = np.flatnonzero(kind_mask(kind, DEVICE_WORK_CODES))
    name_codes = events["name"].cat.codes.to_numpy().astype(np.int64)
    parent = events["parent"].to_numpy()[rows]
    dur = events["dur_us"].to_numpy()[rows]
    grid_codes = events["grid"].cat.codes.to_numpy()[rows].astype(np.int64)
    grid_names = np.asarray(events["grid"].cat.categories.astype(str), dtype=object)
    launched = (grid_codes >= 0) & (np.append(grid_names, "")[grid_codes] != "")
    codes = pd.DataFrame({
        "name": name_codes[rows],
        "kind": kind[rows].astype(np.int64),
        "device": events["device"].cat.codes.to_numpy()[rows].astype(np.int64),
        "stream": events["stream"].to_numpy()[rows],
        "launcher": np.where(parent >= 0, name_codes[np.maximum(parent, 0)], -1),
        "grid": grid_codes,
        "block": events["block"].cat.codes.to_numpy()[rows].astype(np.int64),
    })
    frame = codes.assign(dur=dur, bytes=events["bytes"].to_numpy()[rows])
    for column in ("registers_per_thread", "shared_memory_bytes"):
        # not a launch, or the field not written (the events' -1): unknown, never a number
        v = events[column].to_numpy()[rows].astype(np.float64)
        frame[column] = np.where(~launched | (v < 0), np.nan, v)
    # duration-weighted sums; a launch without an estimate (NaN) weighs nothing
    for column in ("blocks_per_sm", "occupancy_pct"):
        v = events[column].to_numpy()[rows].astype(np.float64)
        known = ~np.isnan(v)
        frame[column + "_w"] = np.where(known, v * dur, 0.0)
        frame[column + "_d"] = np.where(known, dur, 0.0)
    g = frame.groupby(_PART_KEY, sort=False)
    out = g.agg(count=("dur", "size"), dur_sum=("dur", "sum"), dur_min=("dur", "min"), dur_max=("dur", "max"),
                bytes=("bytes", "sum"), registers_per_thread=("registers_per_thread", "max"),
                shared_memory_bytes=("shared_memory_bytes", "max"),
                blocks_per_sm_w=("blocks_per_sm_w", "sum"), blocks_per_sm_d=("blocks_per_sm_d", "sum"),
                occupancy_pct_w=("occupancy_pct_w", "sum"), occupancy_pct_d=("occupancy_pct_d", "sum")
                ).reset_index()

    def text(column: str, key: str) -> np.ndarray:  # codes back to the strings (-1: "")
        cats = np.append(np.asarray(events[column].cat.categories.astype(str), dtype=object), "")
        return cats[out[key].to_numpy()] if len(out) else np.zeros(0, dtype=object)

    out["name"] = text("name", "name")
    out["launcher"] = text("name", "launcher")
    out["kind"] = text("kind", "kind")
    out["device"] = text("device", "device")
    out["grid"] = text("grid", "grid")
    out["block"] = text("block", "block")
    return out


def kernels_from_parts(parts: pd.DataFrame) -> pd.DataFrame:
    """The kernel table from :func:`kernel_parts` (of one trace, or concatenated over several)."""
    if len(parts) == 0:
        return empty_table(KERNEL_DTYPES)
    g = parts.groupby(["name", "kind"], sort=False)
    out = g.agg(count=("count", "sum"), device_total_us=("dur_sum", "sum"), device_min_us=("dur_min", "min"),
                device_max_us=("dur_max", "max"), bytes=("bytes", "sum"),
                registers_per_thread=("registers_per_thread", "max"),
                shared_memory_bytes=("shared_memory_bytes", "max"),
                blocks_per_sm_w=("blocks_per_sm_w", "sum"), blocks_per_sm_d=("blocks_per_sm_d", "sum"),
                occupancy_pct_w=("occupancy_pct_w", "sum"), occupancy_pct_d=("occupancy_pct_d", "sum")
                ).reset_index()
    out["count"] = out["count"].astype(np.int64)
    out["bytes"] = out["bytes"].astype(np.int64)
    out["device_avg_us"] = out["device_total_us"] / out["count"]
    total = float(parts["dur_sum"].sum())
    out["share"] = out["device_total_us"] / total if total > 0 else 0.0
    streams = g[["device", "stream"]].apply(
        lambda d: ", ".join(f"{dev} s{s}" for dev, s in sorted(set(zip(d["device"], d["stream"]))))
    )
    out["streams"] = streams.to_numpy()
    for column in ("blocks_per_sm", "occupancy_pct"):
        d = out.pop(column + "_d").to_numpy()
        w = out.pop(column + "_w").to_numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            out[column] = np.where(d > 0, w / np.where(d > 0, d, 1.0), np.nan)
    # the launcher that launched it most often (the first seen among equals)
    named = parts[parts["launcher"] != ""]
    top = (
        named.groupby(["name", "kind", "launcher"], sort=False)["count"].sum().reset_index(name="n")
        .sort_values("n", ascending=False, kind="stable").drop_duplicates(["name", "kind"])
    )
    out = out.merge(top[["name", "kind", "launcher"]], on=["name", "kind"], how="left")
    out["launched_by"] = out.pop("launcher").fillna("")
    # the most used (grid, block) pair, and how many there were
    # a launch whose grid or block was not written ran with no known configuration
    known = parts[(parts["grid"] != "") & (parts["block"] != "")]
    pairs = known.groupby(["name", "kind", "grid", "block"], sort=False)["count"].sum().reset_index(name="n")
    configs = pairs.groupby(["name", "kind"], sort=False).size().rename("launch_configs")
    best = pairs.sort_values("n", ascending=False, kind="stable").drop_duplicates(["name", "kind"])
    out = out.merge(best[["name", "kind", "grid", "block"]], on=["name", "kind"], how="left")
    out = out.merge(configs.reset_index(), on=["name", "kind"], how="left")
    out[["grid", "block"]] = out[["grid", "block"]].fillna("")
    out["launch_configs"] = out["launch_configs"].fillna(0).astype(np.int64)
    is_kernel = out["kind"].to_numpy() == "kernel"
    out["tensor_cores"] = is_kernel & np.array([uses_tensor_cores(n) for n in out["name"]], dtype=bool)
    is_copy = out["kind"].to_numpy() == "memcpy"
    total_us = out["device_total_us"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        # bytes per µs is 1e6 B/s: / 1e3 gives 1e9 B/s; a copy of no measured duration has none
        # (a trace that does not say how many bytes a copy moved has no bandwidth, not 0 GB/s)
        out["bandwidth_gbps"] = np.where(is_copy & (total_us > 0) & (out["bytes"].to_numpy() > 0),
                                         out["bytes"].to_numpy() / total_us / 1e3, np.nan)
    return out.sort_values("device_total_us", ascending=False, kind="stable").reset_index(drop=True)[
        list(KERNEL_COLUMNS)
    ]
