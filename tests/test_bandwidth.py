"""Copies: ``kernels()["bandwidth_gbps"]`` and the bandwidth the ``copy`` finding states.

Oracles: bytes and durations of each copy in the raw JSON (``json.load``), and Kineto's own
per-copy "memory bandwidth (GB/s)" argument where the trace has it (A100 and V100 traces in
tests/data/wild). Kineto computes it from the copy's exact duration in ns, and the older traces
write durations cut to whole µs (1.856 µs written as 1), so against Kineto's figures nbprof agrees
within that cut.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import nbprof

from .synthetic import training_loop

WILD = Path(__file__).parent / "data" / "wild"
WITH_COPIES = ["meta_format_control.json.gz", "nccl_data.json.gz", "resnet50_num_workers_0.pt.trace.json.gz",
               "amd_mi250_rocm6.json.gz"]


def raw_copies(path: Path) -> dict[str, list[dict]]:
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    out: dict[str, list[dict]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if str(e.get("cat", "")).lower() in ("gpu_memcpy", "memcpy") and e.get("ph") == "X":
            out[e["name"]].append(e)
    return out


@pytest.mark.parametrize("name", WITH_COPIES)
def test_bandwidth_is_bytes_over_duration_of_the_raw_copies(name):
    copies = raw_copies(WILD / name)
    k = nbprof.load_trace(WILD / name).kernels()
    memcpy = k[k["kind"] == "memcpy"].set_index("name")
    assert set(memcpy.index) == set(copies)
    for copy_name, events in copies.items():
        nbytes = sum(int(e["args"].get("bytes", 0)) for e in events)
        dur = sum(float(e["dur"]) for e in events)
        if not any("bytes" in e["args"] for e in events):  # ROCm's copies do not say: unknown, not 0 GB/s
            assert np.isnan(memcpy.loc[copy_name, "bandwidth_gbps"])
            continue
        assert memcpy.loc[copy_name, "bandwidth_gbps"] == pytest.approx(nbytes / dur / 1e3, rel=1e-9)
        kineto = [e for e in events if e["args"].get("memory bandwidth (GB/s)", 0) > 0]
        if kineto and len(kineto) == len(events):
            # Kineto's figure per copy gives its exact duration: bytes / (GB/s * 1e3) µs; the written
            # one is that, or that cut to whole µs
            exact = [int(e["args"]["bytes"]) / e["args"]["memory bandwidth (GB/s)"] / 1e3 for e in kineto]
            assert all(-1e-6 <= x - float(e["dur"]) < 1 + 1e-6 for x, e in zip(exact, kineto))
            kineto_gbps = nbytes / sum(exact) / 1e3
            assert memcpy.loc[copy_name, "bandwidth_gbps"] == pytest.approx(kineto_gbps, rel=len(events) / dur + 1e-9)
    assert k.loc[k["kind"] != "memcpy", "bandwidth_gbps"].isna().all()  # kernels and fills: does not apply


def test_a_trace_without_copies_has_no_bandwidth():
    from .conftest import trace_path

    k = nbprof.load_trace(trace_path("cnn_train_cuda")).kernels()
    assert "bandwidth_gbps" in k.columns and k["bandwidth_gbps"].isna().all()


def test_mtia_dma_copies_read_their_size():
    """MTIA's DMA copies ("dma_request", category mtia_ccp_events) write their bytes as "size":
    read as the copies' bytes (the page showed 0.00 GB/s), bandwidth = bytes / duration of the raw JSON."""
    with gzip.open(WILD / "mtia_inference_rank_0.json.gz") as f:
        dma = [e for e in json.load(f)["traceEvents"] if e.get("name") == "dma_request" and e.get("ph") == "X"]
    nbytes = sum(e["args"]["size"] for e in dma)
    dur = sum(e["dur"] for e in dma)
    k = nbprof.load_trace(WILD / "mtia_inference_rank_0.json.gz").kernels().set_index("name")
    assert k.loc["dma_request", "kind"] == "memcpy" and k.loc["dma_request", "count"] == len(dma)
    assert k.loc["dma_request", "bytes"] == nbytes > 0
    assert k.loc["dma_request", "bandwidth_gbps"] == pytest.approx(nbytes / dur / 1e3, rel=1e-6)


def test_a_copy_of_unknown_size_has_no_bandwidth(tmp_path):
    """A copy whose trace does not say its bytes: NaN, not 0 GB/s."""
    from .synthetic import Trace

    t = Trace()
    ext = t.op("aten::copy_", 0, 20)
    t.launch("Memcpy HtoD (Pageable -> Device)", ext, 1, 5, 10, 8.0, cat="gpu_memcpy")
    k = t.load(tmp_path).kernels()
    row = k[k["kind"] == "memcpy"].iloc[0]
    assert row["bytes"] == 0 and np.isnan(row["bandwidth_gbps"])


def test_kernels_tab_shows_the_bandwidth():
    html = nbprof.load_trace(WILD / "resnet50_num_workers_0.pt.trace.json.gz").report().html()
    assert "GB/s" in html


# ------------------------------------------------------------------------- the copy finding


@pytest.mark.parametrize("pageable", [True, False])
def test_copy_finding_states_the_bandwidth_against_the_link(tmp_path, pageable):
    # per step a 300 µs HtoD copy of 4 MiB: 4 MiB / 300 µs = 13.98 GB/s
    p = training_loop(4, kernel_us=600, copy_us=300, pageable=pageable).load(tmp_path)
    f = p.findings
    row = f[f["kind"] == "copy"].iloc[0]
    expected = (4 << 20) / 300 / 1e3
    memory = "pageable" if pageable else "pinned"
    from nbprof.analysis.findings.copy import LINK_TYPICAL_GBPS

    assert row["evidence"]["links"] == [{"direction": "HtoD", "host_memory": memory, "count": 4,
                                         "bandwidth_gbps": pytest.approx(expected),
                                         "typical_gbps": LINK_TYPICAL_GBPS[memory]}]
    assert row["evidence"]["by_direction"]["HtoD"]["bandwidth_gbps"] == pytest.approx(expected)
    assert f"{expected:.1f} GB/s HtoD from {memory} memory" in row["message"]
    assert "PCIe 4.0 x16" in row["message"] and "\n" not in row["message"]


def test_copy_finding_on_a_real_trace_per_direction_and_host_memory():
    """HTA's A100 trace: pinned HtoD input copies and pageable DtoH reads, from the raw JSON."""
    path = WILD / "meta_format_control.json.gz"
    f = nbprof.load_trace(path).findings
    links = {(x["direction"], x["host_memory"]): x for x in f[f["kind"] == "copy"].iloc[0]["evidence"]["links"]}
    copies = raw_copies(path)
    for (direction, memory), link in links.items():
        events = [e for n, es in copies.items() for e in es
                  if direction in n and memory.capitalize() in n]
        nbytes = sum(int(e["args"]["bytes"]) for e in events)
        dur = sum(float(e["dur"]) for e in events)
        assert link["count"] == len(events) and link["bandwidth_gbps"] == pytest.approx(nbytes / dur / 1e3)
    assert set(links) == {("HtoD", "pinned"), ("DtoH", "pageable")}
    assert np.isfinite([x["bandwidth_gbps"] for x in links.values()]).all()
