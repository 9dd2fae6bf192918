"""The live CUDA path on a real GPU (``-m gpu``; skipped where torch sees no CUDA device).

The recorded H100 traces in tests/data check the CUDA numbers everywhere else; these tests run
the profiler itself on the device: the live profile against torch's own key_averages() of the
same profiler (with torch's double count of kernels under profiler-overhead events put back, as
tests/test_trace_oracles.py does), the exported trace against the plain-Python model of its JSON
(tests/reference.py) and the invariants, and a finding on a loop that synchronizes.
"""

from __future__ import annotations

import pytest

from .conftest import HAS_TORCH, run

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _cuda_device():
    """Skips without a CUDA device (asked when a test runs: collecting imports no torch)."""
    if not HAS_TORCH:
        pytest.skip("needs torch with CUDA")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")

TRAIN = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(16 * 30 * 30, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 3, 32, 32, device="cuda")
y = torch.randint(0, 10, (32,), device="cuda")
for _ in range(3):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
"""

FIELDS = {"count": "count", "cpu_time_total": "cpu_total_us", "self_cpu_time_total": "self_cpu_us",
          "device_time_total": "device_total_us", "self_device_time_total": "self_device_us"}


def test_live_cuda_key_averages_equal_torchs(shell):
    from .test_trace_oracles import torch_view

    result, _ = run(shell, f"%%torchprof -q -o gpu_p --cuda --memory\n{TRAIN}")
    assert result.error_in_exec is None, result.error_in_exec
    p = shell.user_ns["gpu_p"]
    assert p.summary.has_device and p.collected["cuda"] is True
    ours = torch_view(p, "op")
    ours = {(r["name"], r["kind"] in ("kernel", "memcpy", "memset")): r for r in ours.to_dict("records")}
    gpu_annotations = set(p.events.loc[p.events["kind"] == "gpu_annotation", "name"].astype(str))
    checked = 0
    for a in p.profiler.key_averages():
        on_device = str(a.device_type).endswith("CUDA")
        if on_device and a.key in gpu_annotations:
            continue  # torch's GPU-annotation rows (docs/differences.md): not rows of ours
        row = ours[(a.key, on_device)]
        for theirs, mine in FIELDS.items():
            tol = 0 if theirs == "count" else 0.01
            assert abs(row[mine] - getattr(a, theirs)) <= tol, (a.key, theirs, row[mine], getattr(a, theirs))
        checked += 1
    assert checked >= 20
    # kernels: each counted once, the device's total
    kernel_us = sum(a.self_device_time_total for a in p.profiler.key_averages() if str(a.device_type).endswith("CUDA")
                    and a.key not in gpu_annotations)
    assert p.summary.self_device_us == pytest.approx(kernel_us, abs=0.05)


def test_exported_cuda_trace_keeps_the_invariants(shell, tmp_path):
    from .test_invariants import check_all

    result, _ = run(shell, f"%%torchprof -q -o gpu_q --cuda --memory\n{TRAIN}")
    assert result.error_in_exec is None, result.error_in_exec
    path = tmp_path / "trace.json"
    shell.user_ns["gpu_q"].profiler.export_chrome_trace(str(path))
    check_all(path)


def test_item_in_the_loop_is_a_sync_finding(shell):
    code = ("%%torchprof -q -o gpu_s --cuda\nimport torch\nx = torch.randn(2048, 2048, device='cuda')\n"
            "total = 0.0\nfor _ in range(20):\n    x = torch.tanh(x @ x)\n    total += x.sum().item()\n")
    result, _ = run(shell, code)
    assert result.error_in_exec is None, result.error_in_exec
    p = shell.user_ns["gpu_s"]
    f = p.findings
    rows = f[f["kind"] == "sync"]
    assert len(rows) == 1, f[["kind", "message"]].to_dict("records")
    ev = rows.iloc[0]["evidence"]
    scalar_reads = sum(a.count for a in p.profiler.key_averages() if a.key == "aten::_local_scalar_dense")
    assert ev["scalar_reads"] == scalar_reads == 20
    assert 19 <= ev["calls"] <= 20  # the last read launches nothing after it


def test_each_cuda_profile_of_the_process_is_numbered(shell):
    """Two CUDA cells in a row: the second is the next CUDA profile nbprof read in this process
    (torch's device times are right in a process's first only: the clock_skew finding)."""
    from nbprof.collect import torch_live

    numbers = []
    for name in ("gpu_n1", "gpu_n2"):
        result, _ = run(shell, f"%%torchprof -q -o {name} --cuda\nimport torch\n"
                               "x = torch.randn(512, 512, device='cuda')\n(x @ x).sum().item()\n")
        assert result.error_in_exec is None, result.error_in_exec
        p = shell.user_ns[name]
        assert torch_live.traced_cuda(p.profiler.profiler)
        numbers.append(p.meta.cuda_profile)
    assert numbers[0] >= 1 and numbers[1] == numbers[0] + 1 == torch_live.cuda_profiles_read()
