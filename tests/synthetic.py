"""Hand-made chrome traces in torch's (kineto's) format, for findings that need a pattern the
recorded GPU traces lack (copies, syncs, a busy GPU, ranks). Every number in them is chosen, so
tests can state the right answer by hand.

Times are µs; the builder writes the fields torch's writer writes: ``cat``, ``External id``,
``correlation``, ``device``, ``stream``, memory events' totals.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PID = 1000
TID = 1000


class Trace:
    def __init__(self, rank: int | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.rank = rank
        self._ext = 0
        self._corr = 0
        self.device_properties = [{"id": 0, "name": "Fake GPU", "totalGlobalMem": 80 * 2**30}]

    def _next_ext(self) -> int:
        self._ext += 1
        return self._ext

    def op(self, name: str, ts: float, dur: float, tid: int = TID, cat: str = "cpu_op") -> int:
        ext = self._next_ext()
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur,
                            "args": {"External id": ext}})
        return ext

    def annotation(self, name: str, ts: float, dur: float, tid: int = TID) -> int:
        return self.op(name, ts, dur, tid=tid, cat="user_annotation")

    def gpu_annotation(self, name: str, ts: float, dur: float, ext: int, stream: int = 7) -> None:
        self.events.append({"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": 0, "tid": stream,
                            "ts": ts, "dur": dur, "args": {"External id": ext}})

    def runtime(self, name: str, ts: float, dur: float, ext: int = 0, tid: int = TID, corr: int = 0) -> None:
        args: dict[str, Any] = {"External id": ext}
        if corr:
            args["correlation"] = corr
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": PID, "tid": tid, "ts": ts,
                            "dur": dur, "args": args})

    def launch(self, kernel: str, ext: int, cpu_ts: float, cpu_dur: float, gpu_ts: float, gpu_dur: float,
               runtime: str = "cudaLaunchKernel", cat: str = "kernel", stream: int = 7, nbytes: int = 0,
               tid: int = TID, device: int = 0, blocks_per_sm: float | None = None) -> None:
        """A runtime call on the CPU and the device work it started, linked as torch links them.
        ``blocks_per_sm``: give a kernel CUPTI's launch args (grid, block, registers, estimates)."""
        self._corr += 1
        c = self._corr
        self.runtime(runtime, cpu_ts, cpu_dur, ext=ext, tid=tid, corr=c)
        args: dict[str, Any] = {"External id": ext, "correlation": c, "device": device, "stream": stream}
        if cat in ("gpu_memcpy", "gpu_memset"):
            args["bytes"] = nbytes
        if blocks_per_sm is not None:  # as torch writes them, for a GPU of 132 SMs
            blocks = max(1, round(blocks_per_sm * 132))
            args.update({"registers per thread": 32, "shared memory": 0, "blocks per SM": blocks_per_sm,
                         "warps per SM": blocks_per_sm * 4, "grid": [blocks, 1, 1], "block": [128, 1, 1],
                         "est. achieved occupancy %": min(100, round(blocks_per_sm * 6))})
        self.events.append({"ph": "X", "cat": cat, "name": kernel, "pid": device, "tid": stream, "ts": gpu_ts,
                            "dur": gpu_dur, "args": args})

    def memory(self, ts: float, nbytes: int, total_allocated: int, total_reserved: int, device: int = 0,
               tid: int = TID, addr: int = 1) -> None:
        self.events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": PID,
                            "tid": tid, "ts": ts,
                            "args": {"Total Reserved": total_reserved, "Total Allocated": total_allocated,
                                     "Bytes": nbytes, "Addr": addr, "Device Id": device,
                                     "Device Type": 1 if device >= 0 else 0}})

    def doc(self) -> dict[str, Any]:
        d: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": self.device_properties,
                             "traceEvents": self.events, "baseTimeNanoseconds": 0}
        if self.rank is not None:
            d["distributedInfo"] = {"rank": self.rank, "world_size": 2}
        return d

    def write(self, path: Path | str) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.doc()))
        return path

    def load(self, tmp_path: Path, name: str = "trace.json") -> Any:
        import nbprof

        return nbprof.load_trace(self.write(Path(tmp_path) / name))


def ops_to_merge() -> Trace:
    """Three short ops on one thread (a, b, a again: two of them one name, 1 µs apart) and one
    long op on another: what the timeline's merging of small rectangles is tested on."""
    t = Trace()
    t.op("aten::a", 0, 1)
    t.op("aten::b", 2, 1)
    t.op("aten::a", 4, 2)
    t.op("aten::z", 0, 100, tid=2000)
    return t


def training_loop(
    steps: int = 4,
    *,
    kernel_us: float = 900.0,
    gap_us: float = 10.0,
    launch_us: float = 5.0,
    item_sync_us: float = 0.0,
    copy_us: float = 0.0,
    pageable: bool = True,
    rank: int | None = None,
    blocks_per_sm: float | None = None,
) -> Trace:
    """A loop of ``steps`` steps, each 1000 µs of CPU time: ``aten::mm`` launches one kernel
    (``kernel_us`` on the GPU, starting ``gap_us`` after the previous one ended), optionally an
    input copy HtoD (``copy_us``) and a ``.item()`` whose stream synchronize blocks ``item_sync_us``.
    The copies run ``gap_us`` after the work before them, wherever their launch is: with short
    kernels a later step's copy runs before its launch call, which no GPU can (``clock_skew`` says
    so when it is 100 µs or more).
    """
    t = Trace(rank=rank)
    gpu = 0.0
    for i in range(steps):
        s0 = i * 1000.0
        if copy_us:
            ext = t.op("aten::copy_", s0 + 1, 20)
            gpu = gpu + gap_us
            t.launch("Memcpy HtoD (Pageable -> Device)" if pageable else "Memcpy HtoD (Pinned -> Device)", ext,
                     s0 + 2, 15, gpu, copy_us, runtime="cudaMemcpyAsync", cat="gpu_memcpy", nbytes=4 << 20)
            gpu += copy_us
        ext = t.op("aten::mm", s0 + 30, 40)
        gpu = max(gpu + gap_us, s0 + 35 + launch_us)
        t.launch("gemm_kernel", ext, s0 + 35, launch_us, gpu, kernel_us, blocks_per_sm=blocks_per_sm)
        gpu += kernel_us
        if item_sync_us:
            ext = t.op("aten::item", s0 + 100, item_sync_us + 30)
            inner = t.op("aten::_local_scalar_dense", s0 + 101, item_sync_us + 28)
            t.launch("Memcpy DtoH (Device -> Pageable)", inner, s0 + 102, 5, gpu, 2.0, runtime="cudaMemcpyAsync",
                     cat="gpu_memcpy", nbytes=4)
            gpu += 2.0
            t.runtime("cudaStreamSynchronize", s0 + 110, item_sync_us, ext=inner)
        t.op("aten::relu", s0 + 990, 5)
    return t


def collectives_folder(folder: Path) -> Path:
    """Two ranks in DDP on a GPU: rank 1 computes 550 µs, rank 0 100 µs, and rank 0 waits 500 µs
    in the NCCL all-reduce for it (rank 1: 50 µs); files a.json, b.json in ``folder``."""
    folder.mkdir(exist_ok=True)
    fast, slow = Trace(rank=0), Trace(rank=1)
    for t, compute, wait in ((fast, 100.0, 500.0), (slow, 550.0, 50.0)):
        ext = t.op("aten::mm", 0, 20)
        t.launch("gemm", ext, 1, 5, 10, compute)
        ext = t.op("c10d::allreduce_", 30, 10)
        t.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ext, 31, 5, 10 + compute, wait, stream=20)
    fast.write(folder / "a.json")
    slow.write(folder / "b.json")
    return folder
