"""memory_growth on a trace without the allocator's totals (torch 1.8-1.9 wrote none): there the
held bytes are the running sum of the sizes from 0 at the profile's start, so frees of blocks from
before the profile make them negative, and the most held at a step's end can be exactly 0. The
check still reports the growth there (it divides by the most held only when that is above 0)."""

from __future__ import annotations

from .synthetic import Trace


def _legacy_growth_trace(kept: int, steps: int, freed_before: int) -> Trace:
    """``steps`` ProfilerStep#k ranges, 1,000 µs each; step k allocates ``kept`` bytes under
    ``aten::relu``, never freed; step 0 also frees ``freed_before`` bytes of a block from before the
    profile. No memory record carries "Total Allocated" (torch 1.8-1.9's traces)."""
    t = Trace()
    for k in range(steps):
        t0 = k * 1000
        t.annotation(f"ProfilerStep#{k}", t0, 1000)
        t.op("aten::relu", t0 + 100, 40)
        t.memory(t0 + 120, kept, total_allocated=0, total_reserved=64 << 20, addr=100 + k)
        if k == 0:
            t.op("aten::zero_", t0 + 800, 40)
            t.memory(t0 + 820, -freed_before, total_allocated=0, total_reserved=64 << 20, addr=10**6)
    for e in t.events:
        if e.get("name") == "[memory]":
            del e["args"]["Total Allocated"]
    return t


def test_a_legacy_trace_whose_running_total_tops_out_at_zero_still_reports_its_growth(tmp_path):
    """Four steps keep 4 KiB each; step 0 frees 16 KiB allocated before the profile. The running sum
    after each step, by hand: 4096 - 16384 = -12288, then -8192, -4096 and 0: the most held is 0.
    Three of the three later steps keep 4 KiB (>= 4,096 bytes), the total grows by 12,288 >= half of
    the 12,288 they keep: the growth finding fires, naming relu and 4 KiB a step."""
    p = _legacy_growth_trace(4096, 4, 16384).load(tmp_path)
    growth = p.memory_growth()
    assert growth["held_bytes"].tolist() == [-12288, -8192, -4096, 0]
    assert growth["added_never_freed_bytes"].tolist() == [4096] * 4
    f = p.findings
    rows = f[f["kind"] == "memory_growth"]
    assert len(rows) == 1
    ev = rows["evidence"].iloc[0]
    assert ev["kept_bytes"] == 4 * 4096 and ev["kept_bytes_per_step"] == 4096
    assert ev["held_first_bytes"] == -12288 and ev["held_last_bytes"] == 0
    assert ev["op"] == "aten::relu" and ev["bytes_per_step"] == 4096
    assert rows["message"].iloc[0].startswith("Memory grows step after step on cuda:0: 4 of 4 steps")
