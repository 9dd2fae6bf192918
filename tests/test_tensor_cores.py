"""Tensor Cores: ``kernels()["tensor_cores"]``, ``device_stats.devices["tensor_core_pct"]`` and the
``tensor_cores`` finding.

Oracles: the TensorBoard plugin's own unit test (kineto ``tb_plugin/test/test_profiler.py``,
``test_tensor_core``, BSD-3-Clause: its trace and expected values, ported here); the kernel names of
the recorded traces (H100 in tests/data, A100 and V100 in tests/data/wild) read with ``json.load``
and classified here by the plugin's rule as the plugin writes it, with nbprof's two corrections
(kernel names that state their math) applied and checked against what those names say.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

import nbprof

from .conftest import TRACES, trace_path
from .synthetic import Trace

WILD = Path(__file__).parent / "data" / "wild"

# the plugin's TC_Allowlist (tb_plugin/torch_tb_profiler/profiler/tensor_core.py), as it is there
PLUGIN_ALLOWLIST = ['h884', 's884', 'h1688', 's1688', 'hmma', 'i8816', '16816', 'dgrad_1x1_stride_2x2',
                    'first_layer_wgrad_kernel', 'conv1x1', 'conv2d_c1_k1', 'direct_group', 'xmma_implicit_gemm',
                    'xmma_sparse_conv', 'xmma_warp_specialized_implicit_gemm', 'xmma_gemm', 'xmma_sparse_gemm',
                    'c1688']


def plugin_rule(name: str) -> bool:
    return any(p in name for p in PLUGIN_ALLOWLIST)


def corrected_rule(name: str) -> bool:
    """The plugin's rule, then the math the name states: ``_ffma_`` (CUDA cores' FP32 FMA) is
    not Tensor Cores; an MMA shape ``_tensorMxNxK`` or CUTLASS's ``tensorop`` class is."""
    if "_ffma_" in name:
        return False
    return plugin_rule(name) or re.search(r"_tensor\d+x\d+x\d+", name) is not None or "tensorop" in name


def raw(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def raw_kernels(path: Path) -> dict[str, float]:
    """Kernel name -> total duration (µs) from the raw JSON."""
    out: dict[str, float] = defaultdict(float)
    for e in raw(path):
        if str(e.get("cat", "")).lower() == "kernel" and e.get("ph") == "X":
            out[e["name"]] += float(e["dur"])
    return out


# ------------------------------------------------------------------------ the plugin's unit test

PLUGIN_TRACE = [
    {"ph": "X", "cat": "Operator", "name": "aten::conv2d", "pid": 13721, "tid": "123", "ts": 200, "dur": 100,
     "args": {"Input Dims": [[]], "External id": 3}},
    {"ph": "X", "cat": "Operator", "name": "op_no_tc", "pid": 13721, "tid": "123", "ts": 205, "dur": 10,
     "args": {"Input Dims": [[]], "External id": 4}},
    {"ph": "X", "cat": "Operator", "name": "aten::cudnn_convolution", "pid": 13721, "tid": "123", "ts": 215,
     "dur": 10, "args": {"Input Dims": [[]], "External id": 5}},
    {"ph": "X", "cat": "Kernel", "name": "kernel_no_tc", "pid": 0, "tid": "stream 7", "ts": 210, "dur": 10,
     "args": {"correlation": 1000, "external id": 4, "device": 0}},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "123", "ts": 205, "dur": 5,
     "args": {"correlation": 1000, "external id": 4}},
    {"ph": "X", "cat": "Kernel", "name": "volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1",
     "pid": 0, "tid": "stream 7", "ts": 220, "dur": 15, "args": {"correlation": 1001, "external id": 5, "device": 0}},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "123", "ts": 215, "dur": 5,
     "args": {"correlation": 1001, "external id": 5}},
]


def test_the_plugins_tensor_core_test(tmp_path):
    """test_tensor_core: kernel_no_tc does not use Tensor Cores, the s884 kernel does; the
    profile's tc_ratio is 15 / (15 + 10); the eligible ops are the plugin's."""
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(PLUGIN_TRACE))
    p = nbprof.load_trace(path)
    k = p.kernels().set_index("name")
    assert not k.loc["kernel_no_tc", "tensor_cores"]
    assert k.loc["volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1", "tensor_cores"]
    assert k.loc["kernel_no_tc", "launched_by"] == "op_no_tc"  # the plugin's op_name
    d = p.device_stats.devices
    assert len(d) == 1 and d.loc[0, "tensor_core_pct"] == pytest.approx(100 * 15 / (15 + 10))
    from nbprof.analysis.kernels import TENSOR_CORE_OPS

    # the plugin's tc_eligible per op
    assert {"aten::conv2d", "aten::cudnn_convolution"} <= TENSOR_CORE_OPS and "op_no_tc" not in TENSOR_CORE_OPS


# ------------------------------------------------------------------------- the recorded traces

RECORDED = [trace_path(n) for n in TRACES] + [WILD / "meta_format_control.json.gz", WILD / "nccl_data.json.gz",
                                              WILD / "resnet50_num_workers_0.pt.trace.json.gz"]


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name.split(".")[0])
def test_kernels_classified_by_name_as_the_raw_trace_says(path):
    kernels = raw_kernels(path)
    k = nbprof.load_trace(path).kernels()
    got = dict(zip(k.loc[k["kind"] == "kernel", "name"], k.loc[k["kind"] == "kernel", "tensor_cores"]))
    assert got == {name: corrected_rule(name) for name in kernels}
    assert not k.loc[k["kind"] != "kernel", "tensor_cores"].any()  # copies and fills never
    total = sum(kernels.values())
    on_tc = sum(d for name, d in kernels.items() if corrected_rule(name))
    d = nbprof.load_trace(path).device_stats.devices
    assert len(d) == 1 and d.loc[0, "tensor_core_pct"] == pytest.approx(100 * on_tc / total, abs=1e-6)


@pytest.mark.parametrize("name", ["amd_mi250_rocm6.json.gz", "mtia_inference_rank_0.json.gz"])
def test_no_tensor_core_share_on_devices_that_are_not_nvidia_gpus(name):
    """The rule reads NVIDIA's kernel names: ROCm's MI250 (written as "cuda:N", AMD in its
    deviceProperties) and MTIA have kernels, but no Tensor Core share (NaN, not 0 %)."""
    with gzip.open(WILD / name) as f:
        doc = json.load(f)
    assert any(e.get("cat") == "kernel" or "mtia" in str(e.get("cat", "")) for e in doc["traceEvents"])
    d = nbprof.load_trace(WILD / name).device_stats.devices
    assert len(d) == 1 and d.loc[0, "kernel_us"] > 0
    assert d.loc[0, "tensor_core_pct"] != d.loc[0, "tensor_core_pct"]  # NaN
    if name.startswith("amd"):
        assert d.loc[0, "device"].startswith("cuda:")
        assert any("AMD" in p.get("name", "") for p in doc["deviceProperties"])


def test_the_corrections_are_where_the_names_state_their_math():
    """On the H100 CNN the plugin's list finds one Tensor Core kernel, an FP32 ``ffma`` GEMM, and
    misses the TF32 ``tensor16x8x8`` weight-gradient convolution (42 % of the GPU time)."""
    names = list(raw_kernels(trace_path("cnn_train_cuda")))
    ffma = [n for n in names if plugin_rule(n)]
    assert len(ffma) == 1 and "_ffma_" in ffma[0] and "f32f32_f32f32" in ffma[0]
    tf32 = [n for n in names if corrected_rule(n)]
    assert len(tf32) == 1 and "tf32" in tf32[0] and "_tensor16x8x8_" in tf32[0] and not plugin_rule(tf32[0])
    k = nbprof.load_trace(trace_path("cnn_train_cuda")).kernels().set_index("name")
    assert not k.loc[ffma[0], "tensor_cores"] and k.loc[tf32[0], "tensor_cores"]
    # CUTLASS's Tensor Core GEMMs (A100): the plugin finds them too (s1688), and so does nbprof
    a100 = raw_kernels(WILD / "meta_format_control.json.gz")
    tensorop = [n for n in a100 if "tensorop" in n]
    assert tensorop and all(plugin_rule(n) and corrected_rule(n) for n in tensorop)
    assert not any(corrected_rule(n) for n in a100 if "sgemm" in n and "tensorop" not in n)


def test_kernels_tab_and_device_line_show_them():
    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    html = p.report().html()
    assert "Tensor Cores" in html and "Tensor Cores 42.5% of kernel time" in html


# --------------------------------------------------------------------------------- the finding


def gemm_trace(kernel: str, *, cc: tuple[int, int] | None = (9, 0), dtypes: list[str] | None = None,
               other_us: float = 100.0, gemm_us: float = 900.0, device_name: str = "NVIDIA H100 80GB HBM3") -> Trace:
    """Four steps: ``aten::mm`` launching ``kernel`` (``gemm_us``), then ``aten::relu`` launching an
    elementwise kernel (``other_us``); ``dtypes``: the ops' recorded "Input type"."""
    t = Trace()
    t.device_properties = [{"id": 0, "name": device_name, "totalGlobalMem": 80 * 2**30}]
    if cc:
        t.device_properties[0].update(computeMajor=cc[0], computeMinor=cc[1], warpSize=32)
    gpu = 0.0
    for i in range(4):
        s0 = i * 2000.0
        ext = t.op("aten::mm", s0, 50)
        t.launch(kernel, ext, s0 + 5, 5, gpu + 20, gemm_us)
        gpu += 20 + gemm_us
        ext2 = t.op("aten::relu", s0 + 60, 20)
        t.launch("void at::native::vectorized_elementwise_kernel<4>", ext2, s0 + 65, 5, gpu + 10, other_us)
        gpu += 10 + other_us
    if dtypes is not None:
        for e in t.events:
            if e["cat"] == "cpu_op":
                e["args"]["Input type"] = dtypes
                e["args"]["Input Dims"] = [[64, 64]] * len(dtypes)
    return t


FFMA = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel"
TC = "sm80_xmma_gemm_tf32f32_tf32f32_f32_nn_n_tilesize128x128x16_warpsize2x2x1_tensor16x8x8_execute_kernel"


def findings_of(t: Trace, tmp_path: Path):
    f = t.load(tmp_path).findings
    return f[f["kind"] == "tensor_cores"]


def test_fires_on_float32_matmuls_off_the_tensor_cores(tmp_path):
    rows = findings_of(gemm_trace(FFMA, dtypes=["float", "float"]), tmp_path)
    assert len(rows) == 1
    row = rows.iloc[0]
    ev = row["evidence"]
    assert ev["device"] == "cuda:0" and ev["compute_capability"] == 9.0
    assert ev["eligible_us"] == pytest.approx(3600.0) and ev["tensor_core_us"] == 0
    assert ev["share_of_kernel_time"] == pytest.approx(3600.0 / 4000.0)
    assert ev["input_dtypes"] == ["float"] and ev["ops"] == {"aten::mm": pytest.approx(3600.0)}
    assert row["severity"] == "medium"
    msg = row["message"]
    assert "float32 inputs" in msg and "TF32" in msg and "set_float32_matmul_precision" in msg and "\n" not in msg
    assert "not recorded" not in msg


def test_says_so_when_dtypes_were_not_recorded(tmp_path):
    msg = findings_of(gemm_trace(FFMA, dtypes=None), tmp_path).iloc[0]["message"]
    assert "were not recorded" in msg and "--shapes" in msg


def test_volta_gets_float16_autocast_not_tf32(tmp_path):
    msg = findings_of(gemm_trace(FFMA, cc=(7, 0), dtypes=["float", "float"]), tmp_path).iloc[0]["message"]
    assert "float16" in msg and "GradScaler" in msg and "TF32" not in msg
    assert "float32 inputs. Mixed precision (with torch.autocast" in msg  # a sentence of its own


@pytest.mark.parametrize("case", ["no tensor cores", "unknown device", "amd", "half inputs", "on tensor cores",
                                  "small share"])
def test_does_not_fire_where_the_advice_does_not_apply(tmp_path, case):
    t = {
        "no tensor cores": lambda: gemm_trace(FFMA, cc=(6, 1), dtypes=["float", "float"]),  # Pascal
        "unknown device": lambda: gemm_trace(FFMA, cc=None, dtypes=["float", "float"]),
        "amd": lambda: gemm_trace(FFMA, dtypes=["float", "float"], device_name="AMD Radeon Graphics"),
        "half inputs": lambda: gemm_trace(FFMA, dtypes=["c10::Half", "c10::Half"]),
        "on tensor cores": lambda: gemm_trace(TC, dtypes=["float", "float"]),
        "small share": lambda: gemm_trace(FFMA, dtypes=["float", "float"], gemm_us=100, other_us=900),
    }[case]()
    if case == "amd":
        t.device_properties[0]["warpSize"] = 64
    assert len(findings_of(t, tmp_path)) == 0


def test_the_recorded_traces():
    """two_streams: a float32 1024x1024 matmul on an FFMA kernel, 92 % of the kernel time; the CNN:
    its convolutions' weight gradients run on the Tensor Cores (TF32, cuDNN's default)."""
    f = nbprof.load_trace(trace_path("two_streams")).findings
    row = f[f["kind"] == "tensor_cores"].iloc[0]
    kernels = raw_kernels(trace_path("two_streams"))
    mm = sum(d for n, d in kernels.items() if "gemm" in n)
    assert row["evidence"]["eligible_us"] == pytest.approx(mm) and row["evidence"]["input_dtypes"] == ["float"]
    assert "tensor_cores" not in set(nbprof.load_trace(trace_path("cnn_train_cuda")).findings["kind"])
