"""A report says only true things, and the same thing once (issue 15): each test profiles real
code in a real IPython shell (or reads a recorded trace) and checks that two places that state
the same fact state the same number, that advice only names what applies, and that nbprof says
what it did."""

from __future__ import annotations

import re

import pytest

from nbprof.format import esc

from .conftest import needs_torch, reports, run

# ------------------------------------------------------------- 1. one share for the top operator


@needs_torch
def test_headline_and_top_op_finding_give_one_share_when_grouped_by_shape(shell):
    """Grouped by shape, aten::mm is split over two rows; the headline and the finding both give
    its share over all of them, which is its self CPU time over the profile's (torch's own
    key_averages, summed by name, is the oracle)."""
    code = ("%%torchprof -o grouped --shapes --group-by shape\nimport torch\n"
            "a, b = torch.randn(192, 192), torch.randn(96, 96)\n"
            "for _ in range(10):\n    a @ a\n    b @ b\n")
    result, captured = run(shell, code)
    assert result.error_in_exec is None
    [report] = reports(captured)
    p = shell.user_ns["grouped"]
    rows = [r for r in p.profiler.key_averages() if r.key == "aten::mm"]
    total = sum(r.self_cpu_time_total for r in p.profiler.key_averages())
    mm_share = sum(r.self_cpu_time_total for r in rows) / total
    assert len(p.key_averages("shape").query("name == 'aten::mm'")) == 2
    headline = next(line for line in report["text/plain"].splitlines() if line.startswith("top by"))
    top = p.findings[p.findings["kind"] == "top_op"].iloc[0]
    assert top["evidence"]["op"] == "aten::mm"
    assert top["evidence"]["share"] == pytest.approx(mm_share, abs=2e-3)  # torch's µs rounding
    shown = f"{100 * top['evidence']['share']:.1f}%"
    assert headline == f"top by self CPU: aten::mm ({shown}, all its input shapes)"
    assert f"aten::mm takes {shown} of self CPU time" in top["message"]
    assert esc(headline) in report["text/html"] and esc(top["message"]) in report["text/html"]


# ------------------------------------------------------------- 2. advice only when it applies


@needs_torch
@pytest.mark.parametrize("flags", ["", "--shapes --group-by shape"])
def test_top_op_advice_names_only_what_applies(shell, flags):
    result, _ = run(shell, f"%%torchprof -q -o adv {flags}\nimport torch\n"
                           "a = torch.randn(128, 128)\nfor _ in range(5):\n    a @ a\n")
    assert result.error_in_exec is None
    p = shell.user_ns["adv"]
    assert not p.summary.has_device  # a CPU-only run: no TF32, no CUDA advice
    msg = p.findings[p.findings["kind"] == "top_op"].iloc[0]["message"]
    assert msg.startswith("aten::mm takes") and "It is compute" in msg
    assert "TF32" not in msg and "torch.autocast('cpu', dtype=torch.bfloat16)" in msg
    if flags:
        assert "--shapes" not in msg and "--group-by" not in msg and "By input shape tab" in msg
    else:
        assert "--shapes --group-by shape" in msg


def test_top_op_advice_on_a_gpu_trace_keeps_gpu_remedies():
    import nbprof

    from .conftest import trace_path

    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    msg = p.findings[p.findings["kind"] == "top_op"].iloc[0]["message"]
    assert "TF32 matmuls" in msg
