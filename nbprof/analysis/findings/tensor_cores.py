"""The TensorBoard plugin's Tensor Core advice, only where it applies: on a GPU with Tensor Cores
(compute capability at least ``TENSOR_CORE_MIN_CC`` in the trace's ``deviceProperties``), the
kernels of matmul and convolution ops (the plugin's "Tensor Cores eligible" operators) take at
least ``ELIGIBLE_MIN_SHARE`` of the device's kernel time, less than ``TENSOR_CORE_LOW_SHARE`` of
that time runs on the Tensor Cores (``kernels()["tensor_cores"]``), and those ops run in float32
(their input dtypes, recorded with ``--shapes``; the message says when they were not recorded).
Suggests TF32 from compute capability ``TF32_MIN_CC`` (Ampere), and autocast (AMP) with bfloat16
there or float16 before it. "medium" when the float32 matmul/convolution kernels off the Tensor
Cores take at least ``TENSOR_CORE_MEDIUM_SHARE`` of the kernel time, else "low"."""

from __future__ import annotations

import json
from typing import Iterator

import numpy as np
import pandas as pd

from ...events import KIND_CODE, category_map, values_at
from ...format import fmt_us
from ..kernels import TENSOR_CORE_OPS, uses_tensor_cores
from ._common import Finding, TorchContext, pct

TENSOR_CORE_MIN_CC = 7.0  # Volta
TF32_MIN_CC = 8.0  # Ampere: TF32 and bfloat16
ELIGIBLE_MIN_SHARE = 0.20
TENSOR_CORE_LOW_SHARE = 0.50
TENSOR_CORE_MEDIUM_SHARE = 0.30

# The ops whose kernels can run on the Tensor Cores: the plugin's list, and the backward op that
# torch records for convolutions since 1.11 (the plugin's list predates it)
ELIGIBLE_OPS = TENSOR_CORE_OPS | {"aten::convolution_backward"}
FLOAT32 = "float"  # how torch writes float32 in "Input type"
LOW_PRECISION = ("c10::Half", "c10::BFloat16", "c10::Float8")  # already on the Tensor Cores' types


def find(ctx: TorchContext) -> Iterator[Finding]:
    if not ctx.has_device:
        return
    ev = ctx.events
    kern = np.flatnonzero(ctx.kind == KIND_CODE["kernel"])
    if len(kern) == 0:
        return
    parent = ev["parent"].to_numpy()[kern]
    launcher = np.where(parent >= 0, values_at(ev["name"], np.maximum(parent, 0)), "")
    # each test once per distinct name (category), not per kernel: 1 M events took 0.25 s in isin/unique
    eligible = (parent >= 0) & category_map(ev["name"], lambda n: n in ELIGIBLE_OPS, dtype=bool, missing=False,
                                            rows=np.maximum(parent, 0))
    on_tc = category_map(ev["name"], uses_tensor_cores, dtype=bool, missing=False, rows=kern)
    dur = ctx.dur_ns[kern].astype(np.float64)
    device = values_at(ev["device"], kern)
    capability = _capabilities(ctx.meta.device_properties)
    types = values_at(ev["input_types"], np.maximum(parent, 0))
    for dev, rows in pd.Series(np.arange(len(kern))).groupby(device).groups.items():
        rows = np.asarray(rows)
        cc = capability.get(str(dev))
        if cc is None or cc < TENSOR_CORE_MIN_CC:
            continue
        total = float(dur[rows].sum())
        el = rows[eligible[rows]]
        el_ns = float(dur[el].sum())
        tc_ns = float(dur[el[on_tc[el]]].sum())
        if total <= 0 or el_ns / total < ELIGIBLE_MIN_SHARE or tc_ns / el_ns >= TENSOR_CORE_LOW_SHARE:
            continue
        dtypes = _tensor_dtypes(types[el[parent[el] >= 0]])
        if dtypes and FLOAT32 not in dtypes:
            continue  # they run in other types (half, bfloat16, double): TF32 / AMP advice does not apply
        off_ns = el_ns - tc_ns
        share = off_ns / total
        ops = pd.Series(dur[el[~on_tc[el]]], index=launcher[el[~on_tc[el]]]).groupby(level=0).sum()
        ops = ops.sort_values(ascending=False).head(3)
        msg = (f"{dev} (compute capability {cc:.1f}) has Tensor Cores, but {pct(1 - tc_ns / el_ns)} of its matmul and "
               f"convolution kernel time ({fmt_us(off_ns / 1000)}, {pct(share)} of all kernel time, mostly "
               f"{', '.join(ops.index)}) runs without them")
        if dtypes:
            msg += ", on float32 inputs. "
        else:
            msg += (". The input dtypes were not recorded (profile with --shapes to see them); if they are "
                    "float32: ")
        if cc >= TF32_MIN_CC:
            msg += ("TF32 keeps float32 tensors and runs their matmuls on the Tensor Cores "
                    "(torch.backends.cuda.matmul.allow_tf32 = True, or torch.set_float32_matmul_precision('high'); "
                    "convolutions: torch.backends.cudnn.allow_tf32, on by default); mixed precision "
                    "(with torch.autocast('cuda', dtype=torch.bfloat16)) also halves the bytes moved.")
        else:
            advice = ("mixed precision (with torch.autocast('cuda', dtype=torch.float16), and "
                      "torch.amp.GradScaler when training) runs them on the Tensor Cores.")
            msg += advice[0].upper() + advice[1:] if msg.endswith(". ") else advice  # a sentence, or after "float32: "
        severity = "medium" if share >= TENSOR_CORE_MEDIUM_SHARE else "low"
        yield Finding(severity, msg,
                      {"device": str(dev), "compute_capability": cc, "kernel_us": total / 1000,
                       "eligible_us": el_ns / 1000, "tensor_core_us": tc_ns / 1000, "share_of_kernel_time": share,
                       "input_dtypes": sorted(dtypes) if dtypes else None,
                       "ops": {k: float(v) / 1000 for k, v in ops.items()}},
                      score=share)


def _capabilities(properties: list[dict]) -> dict[str, float]:
    """``cuda:N`` -> CUDA compute capability (major.minor) from the trace's ``deviceProperties``.
    ROCm writes its GPUs there too, under "cuda:N", with the gfx version as capability (MI250:
    "AMD Radeon Graphics", 9.0, 64-thread wavefronts): those are not NVIDIA GPUs, and left out."""
    out = {}
    for p in properties:
        if "AMD" in str(p.get("name", "")) or p.get("warpSize") == 64:
            continue
        try:
            out[f"cuda:{int(p.get('id', 0))}"] = float(f"{int(p['computeMajor'])}.{int(p['computeMinor'])}")
        except (KeyError, TypeError, ValueError):
            continue
    return out


def _tensor_dtypes(texts: np.ndarray) -> set[str]:
    """The floating tensor dtypes among the ops' "Input type" lists (empty: not recorded)."""
    out: set[str] = set()
    for text in set(texts.tolist()):
        if not text:
            continue
        try:
            values = json.loads(text)
        except ValueError:
            continue
        out |= {v for v in values if isinstance(v, str) and (v in (FLOAT32, "double") or v.startswith(LOW_PRECISION))}
    return out
