"""torch's C++ log lines, as the real builds print them, never reach the cell (fd 2).

The lines below are copied from fd 2 of real runs on a machine without a GPU: PyPI's CUDA builds
of torch 2.3.1, 2.4.1 and 2.15.0 (Kineto's ``cudaGetDeviceCount`` / ``gpuGetDeviceCount`` error,
printed once a process; 2.3's STAGE lines and its allocator warning in c10's format without a
timestamp) and the 2.13 CPU build (USDT lines, the allocator's warning). Two are made up, in the
formats of glog and Kineto's logger: a warning that is not noise must become a note. The real
builds run end to end in tests/test_torch_versions.py.
"""

from __future__ import annotations

import os

import pytest

from nbprof.collect.native_output import NativeStderrFilter, summarize_native_warnings

KINETO_NO_GPU_24 = "ERROR:2026-11-23 20:43:26 30826:30826 DeviceProperties.cpp:46] gpuGetDeviceCount failed with code 35"
KINETO_NO_GPU_215 = "ERROR:2026-11-23 20:43:57 31000:31000 DeviceProperties.cpp:56] gpuGetDeviceCount failed with code 35"
USDT_START = "USDT:2026-11-23 20:44:14 31363:31363 SyncActivityProfilerHandler.cpp:39] profiler_start"
USDT_STOP = "USDT:2026-11-23 20:44:19 31514:31514 SyncActivityProfilerHandler.cpp:59] profiler_stop"
KINETO_NO_GPU_23 = "ERROR:2026-11-23 20:48:26 1181:1181 CudaDeviceProperties.cpp:27] cudaGetDeviceCount failed with code 35"
STAGE_23 = "STAGE:2026-11-23 20:48:26 1181:1181 ActivityProfilerController.cpp:314] Completed Stage: Warm Up"
ALLOCATOR_24 = (
    "[W1123 20:44:12.042066936 CPUAllocator.cpp:249] Memory block of unknown size was allocated before "
    "the profiling started, profiler results will not include the deallocation event"
)
ALLOCATOR_23 = (
    "[W CPUAllocator.cpp:249] Memory block of unknown size was allocated before the profiling started, "
    "profiler results will not include the deallocation event"
)
GLOG_WARNING = "W1123 20:44:12.042066 31263 CuptiActivityApi.cpp:210] Dropped 12 activity records"
KINETO_WARNING = (
    "WARNING:2026-11-23 20:45:01 4444:4444 CuptiActivityProfiler.cpp:1033] "
    "Profiler buffer overflow: some events were dropped"
)

TORCH_LINES = [KINETO_NO_GPU_23, KINETO_NO_GPU_24, KINETO_NO_GPU_215, USDT_START, USDT_STOP, STAGE_23, ALLOCATOR_24,
               ALLOCATOR_23,
               GLOG_WARNING, KINETO_WARNING]
OWN_LINES = ["own stderr line", "[1, 2, 3]", "ERROR: my script failed", "W1123 not a log line",
             "Traceback (most recent call last):"]

ALLOCATOR_NOTE = (
    "memory allocated before the profile started was freed during it; those frees are not in the memory numbers"
)


def test_every_torch_log_format_is_kept_off_fd2_and_the_cells_own_lines_pass(capfd):
    capfd.readouterr()
    with NativeStderrFilter() as f:
        for line in TORCH_LINES + OWN_LINES:
            os.write(2, line.encode() + b"\n")
        os.write(2, KINETO_NO_GPU_215.encode())  # the last line without its newline
    err = capfd.readouterr().err
    assert err.splitlines() == OWN_LINES
    assert f.captured == TORCH_LINES + [KINETO_NO_GPU_215]


def test_lines_split_across_writes_are_routed_whole(capfd):
    capfd.readouterr()
    with NativeStderrFilter() as f:
        text = (ALLOCATOR_24 + "\n" + "own line\n").encode()
        for i in range(0, len(text), 7):
            os.write(2, text[i:i + 7])
    assert capfd.readouterr().err == "own line\n"
    assert f.captured == [ALLOCATOR_24]


def test_warnings_become_notes_once_progress_and_no_gpu_noise_do_not():
    notes = summarize_native_warnings(TORCH_LINES + [ALLOCATOR_24])
    assert notes == [
        ALLOCATOR_NOTE,  # both formats of the allocator's warning, once
        "Dropped 12 activity records",
        "Profiler buffer overflow: some events were dropped",
    ]


@pytest.mark.parametrize("line", [KINETO_NO_GPU_23, KINETO_NO_GPU_24, KINETO_NO_GPU_215, USDT_START, STAGE_23])
def test_no_note_for(line):
    assert summarize_native_warnings([line]) == []
