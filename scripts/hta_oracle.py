"""HTA's own numbers on the traces nbprof compares with HTA: writes tests/data/hta_oracle.json, the
oracle of tests/test_hta.py (nbprof's ``hta_*`` numbers equal HTA's there).

HolisticTraceAnalysis is not a dependency of nbprof, not even for tests: version 0.5.0 pulls
~100 packages (jupyterlab, pytest, networkx, ...) and needs pandas < 3. Run this in a Python of
its own:

    python -m venv ~/.cache/hta-venv
    ~/.cache/hta-venv/bin/pip install HolisticTraceAnalysis==0.5.0 "pandas<3"
    ~/.cache/hta-venv/bin/python scripts/hta_oracle.py

Each trace is read alone (``TraceAnalysis(trace_dir=<its own folder>,
include_last_profiler_step=True)``, ``HTA_DISABLE_NS_ROUNDING=1``: ns timestamps as written, the
last profiler step kept), then ``get_idle_time_breakdown(ranks=[r], visualize=False)`` (its
default ``consecutive_kernel_delay=30``), ``get_temporal_breakdown`` and ``get_comm_comp_overlap``.

It also writes tests/data/hta_cases.trace.json.gz (:func:`cases`): a trace made to exercise what
HTA's definitions decide (gaps under and over 30 µs, host waits, a kernel launched after the last
ProfilerStep, a stream wait, NCCL under compute, a memcpy), since HTA's ``trace_filter`` sample (the
issue's numbers: rank 0 host wait 3.53 s, kernel wait 3,966 µs, other 0.70 s) is not shipped by
its package (wheel or sdist) and could not be fetched here.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
TRACES = ["hta_cases.trace.json.gz", "cnn_train_cuda.trace.json.gz", "two_streams.trace.json.gz",
          "transformer_infer_stack.trace.json.gz", "cnn_cuda_toggled.trace.json.gz", "wild/nccl_data.json.gz",
          "wild/meta_format_control.json.gz", "wild/mtia_inference_rank_0.json.gz", "wild/amd_mi250_rocm6.json.gz"]


def cases() -> dict:
    """Three ProfilerSteps of 1000 µs on one rank; per step, on stream 7: a kernel after a host wait,
    one 10 µs after it (queued: kernel wait), one 50 µs after that (queued: other), a memcpy; on
    stream 20: an NCCL all-reduce overlapping the second kernel and a "Stream Wait Event" (a
    cuda_sync event with its runtime call). After the last step: a kernel (HTA keeps it: with
    ``include_last_profiler_step`` it compares the steps' ends before its clock's shift with
    times after it), one whose launch has two CPU events with its correlation id (HTA counts it
    twice) and one whose launch was not recorded (HTA leaves it out)."""
    events: list[dict] = []
    corr = [0]

    def cpu(cat: str, name: str, ts: float, dur: float, **args) -> None:
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": 100, "ts": ts, "dur": dur,
                       "args": args})

    def launch(name: str, cpu_ts: float, gpu_ts: float, dur: float, stream: int = 7, cat: str = "kernel",
               runtime: str = "cudaLaunchKernel") -> None:
        corr[0] += 1
        cpu("cuda_runtime", runtime, cpu_ts, 2.0, correlation=corr[0])
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": gpu_ts, "dur": dur,
                       "args": {"device": 0, "stream": stream, "correlation": corr[0]}})

    base = 1_000_000.0
    for i in range(3):
        s0 = base + 1000.0 * i
        cpu("user_annotation", f"ProfilerStep#{i + 1}", s0, 999.0)
        cpu("cpu_op", "aten::mm", s0 + 5, 40.0)
        launch("gemm_kernel", s0 + 10, s0 + 20, 200.0)
        launch("elementwise_kernel", s0 + 12, s0 + 230, 100.0)  # 10 µs after the gemm, queued: kernel wait
        launch("reduce_kernel", s0 + 14, s0 + 380, 50.0)  # 50 µs after, queued: other
        launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", s0 + 16,
               s0 + 250, 150.0, stream=20)
        launch("Stream Wait Event", s0 + 18, s0 + 420, 30.0, stream=20, cat="cuda_sync", runtime="cudaStreamWaitEvent")
        launch("Memcpy DtoH (Device -> Pageable)", s0 + 500, s0 + 520, 5.0, cat="gpu_memcpy", runtime="cudaMemcpyAsync")
    launch("late_kernel", base + 3100, base + 3110, 20.0)  # after the last step
    # a kernel whose launch was recorded twice (the runtime call and a driver call, one correlation id)
    launch("twice_kernel", base + 3200, base + 3210, 20.0)
    cpu("cuda_driver", "cuLaunchKernel", base + 3200.5, 1.0, correlation=corr[0])
    # a kernel whose launch was not recorded
    events.append({"ph": "X", "cat": "kernel", "name": "orphan_kernel", "pid": 0, "tid": 7, "ts": base + 3300,
                   "dur": 20.0, "args": {"device": 0, "stream": 7, "correlation": 999}})
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Fake GPU", "totalGlobalMem": 1 << 34}],
            "distributedInfo": {"rank": 0, "world_size": 1}, "baseTimeNanoseconds": 0, "traceEvents": events}


def main() -> None:
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    warnings.filterwarnings("ignore")
    import logging

    logging.disable(logging.WARNING)
    import hta
    from hta.trace_analysis import TraceAnalysis

    with gzip.open(DATA / "hta_cases.trace.json.gz", "wt") as f:
        json.dump(cases(), f)
    out: dict = {"hta_version": getattr(hta, "__version__", "0.5.0"), "pandas": __import__("pandas").__version__,
                 "command": "~/.cache/hta-venv/bin/python scripts/hta_oracle.py (see its docstring)",
                 "env": {"HTA_DISABLE_NS_ROUNDING": "1"}, "traces": {}}
    for name in TRACES:
        folder = tempfile.mkdtemp()
        shutil.copy(DATA / name, folder)
        ta = TraceAnalysis(trace_dir=folder, include_last_profiler_step=True)
        rank = ta.t.get_ranks()[0]
        idle, _ = ta.get_idle_time_breakdown(ranks=[rank], visualize=False)
        temporal = ta.get_temporal_breakdown(visualize=False)
        overlap = ta.get_comm_comp_overlap(visualize=False)
        out["traces"][name] = {
            "rank": int(rank),
            "idle_time_breakdown": json.loads(idle.to_json(orient="records")),
            "temporal_breakdown": json.loads(temporal.to_json(orient="records")),
            "comm_comp_overlap": json.loads(overlap.to_json(orient="records")),
        }
        shutil.rmtree(folder)
        print(name, "done", file=sys.stderr)
    (DATA / "hta_oracle.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
