"""What seed 69's sample of mutants (docs/testing.md) showed no test held in the clock_skew finding:
the clause that says how long the device work ends after the last host event (and its evidence,
``late_end_us``) is there whenever that is more than 0, a fraction of a µs included. The trace is
written by hand; every expected number is worked out from the times written here."""

from __future__ import annotations

import pytest

import nbprof
from nbprof.analysis.findings import clock_skew
from nbprof.analysis.findings._common import TorchContext

from .synthetic import Trace


def _late_by(host_end_us: float) -> Trace:
    """A first launch (call at 5 µs, kernel 10 -> 110 µs: its device's first record, never in the
    sample), then three launches whose calls are at 1000, 2000 and 3000 µs and whose kernels start
    2000 µs later each (3000, 4000, 5000 µs; 100 µs long, each onto a device idle for 890 µs or
    more): a constant shift of 2000 µs. The device work ends at 5100 µs; the host's last event,
    ``aten::relu`` from 5000 µs, ends at ``host_end_us``."""
    t = Trace()
    ext = t.op("aten::mm", 0, 20)
    t.launch("gemm", ext, 5, 5, 10, 100)
    for call in (1000.0, 2000.0, 3000.0):
        ext = t.op("aten::mm", call - 5, 20)
        t.launch("gemm", ext, call, 5, call + 2000, 100)
    t.op("aten::relu", 5000, host_end_us - 5000)
    return t


@pytest.mark.parametrize("host_end, late", [(5099.5, 0.5), (5099.0, 1.0), (5097.5, 2.5), (5100.0, None),
                                            (5100.5, None)])
def test_device_work_ending_after_the_last_host_event_is_said_to_the_fraction_of_a_us(tmp_path, host_end, late):
    """Device work ending 0.5, 1 and 2.5 µs after the host's last event (5100 µs less its end):
    said with that number, in the evidence and the message; ending with it (0) or 0.5 µs before
    it: not said. The shift itself (2000 µs, three launches, constant) is found every time."""
    p = nbprof.load_trace(_late_by(host_end).write(tmp_path / "trace.json"))
    [f] = list(clock_skew.find(TorchContext(p)))
    assert f.severity == "high"
    assert f.evidence["shift_us"] == pytest.approx(2000.0, abs=1e-9) and f.evidence["idle_launches"] == 3
    assert "shifted later by about 2.00 ms, as one constant" in f.message
    if late is None:
        assert "late_end_us" not in f.evidence
        assert "after the last host event" not in f.message
    else:
        assert f.evidence["late_end_us"] == pytest.approx(late, abs=1e-9)
        assert f"as one constant; device work ends {late:.1f} µs after the last host event. " in f.message
