"""The device's clock contradicts the host's, so the profile's device times cannot be right: at
least ``IMPOSSIBLE_MIN_RECORDS`` device records (kernels, memcpys, memsets) start ``EARLY_MIN_US``
or more before the runtime call that launched them (cudaLaunchKernel, ..., linked by correlation
id); or every launch onto an idle device (nothing ran on it for ``IDLE_MIN_US`` before the work
started; at least ``SHIFT_MIN_LAUNCHES`` such launches) waited ``SHIFT_MIN_US`` or more for its
work to start, where a GPU takes a few µs: the device timeline is shifted later (by one constant
when the median wait is within ``CONSTANT_SPREAD_SHARE`` of the smallest); or at least
``IMPOSSIBLE_MIN_RECORDS`` kernel launches, before the last one whose kernel is there, have no
kernel (their correlation id points nowhere: torch drops device records it places outside the
profile; launches at the end without one are only said with other evidence, as a trace cut short
has them too); or the reader left out that many device records for a timestamp of 0, a negative
duration or a time more than a day from the rest. torch does this to every CUDA profile after a
process's first (pytorch/pytorch#175790, #192021): the finding says which CUDA profile of its
process this was, and to restart the kernel or profile once.

Why these numbers (every launch matched to its runtime call, on every recorded corpus: the H100
set, HTA's MI250, Meta-format, NCCL and MTIA traces, the TensorBoard plugin's): launches onto a
device idle for 50 µs started 6.8-18.6 µs after their call at the least, per trace (H100
6.8-16.9, MI250 10.5, V100 11.0, Meta's 7.0, NCCL's 9.3, MTIA 18.6; medians 9.5-20.2 µs; 3 to
1,866 such launches a trace, the H100 ones 3 to 68), so ``SHIFT_MIN_US`` is 50x the largest
least; work queued behind other work started at most 12 µs (GPUs; MTIA 45 µs) after the work
before it ended, so ``IDLE_MIN_US`` keeps the launches onto a device whose queue never drained
(each wait long, and right) out. No recorded device record starts before its launch (the least
delay is +4.05 µs); the plugin's hand-written unit test puts two kernels 60 µs before theirs,
below ``EARLY_MIN_US``. No recorded trace has a kernel launch without its kernel before its last
launch (a few ``cudaMemsetAsync`` calls without a memset, MTIA's own calls, the tail of a trace
cut to its first part of time are not that), nor device records the reader left out.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

import numpy as np
import pandas as pd

from ...events import KIND_CODE
from ...format import fmt_us, plural
from ..launches import matched_launches
from ._common import Finding, TorchContext

IMPOSSIBLE_MIN_RECORDS = 1
EARLY_MIN_US = 100.0
IDLE_MIN_US = 50.0
SHIFT_MIN_US = 1000.0
SHIFT_MIN_LAUNCHES = 3
CONSTANT_SPREAD_SHARE = 0.10

KIND = "clock_skew"
BUGS = "pytorch/pytorch#175790, #192021"
# the runtime calls that launch one kernel each: CUDA's runtime and driver, HIP
KERNEL_LAUNCH = re.compile(r"[Ll]aunch(?:Cooperative)?Kernel")
_REASONS = {"zero_ts": "a timestamp of 0", "negative_dur": "a negative duration",
            "far": "a time more than a day from the rest"}


def find(ctx: TorchContext) -> Iterator[Finding]:
    left_out = _left_out(ctx.meta)
    runtime = ctx.kind == KIND_CODE["runtime"]
    if not ctx.has_device and not left_out and not runtime.any():
        return
    work, call = matched_launches(ctx.events)
    evidence: dict[str, Any] = {}
    said: list[str] = []
    severe = False

    lead_ns = ctx.start_ns[call] - ctx.start_ns[work]  # > 0: the work started before its call
    early = lead_ns >= EARLY_MIN_US * 1000
    if int(early.sum()) >= IMPOSSIBLE_MIN_RECORDS:
        n, most = int(early.sum()), float(lead_ns[early].max()) / 1000
        evidence.update(early=n, early_max_us=most)
        said.append(f"{plural(n, 'device record')} {'starts' if n == 1 else 'start'} before the call that launched "
                    f"{'it' if n == 1 else 'them'}, by up to {fmt_us(most)}")
        severe = True

    idle = _after_idle(ctx, work)
    delay_us = (ctx.start_ns[work[idle]] - ctx.start_ns[call[idle]]) / 1000
    if len(delay_us) >= SHIFT_MIN_LAUNCHES and float(delay_us.min()) >= SHIFT_MIN_US:
        least, median = float(delay_us.min()), float(np.median(delay_us))
        constant = median - least <= CONSTANT_SPREAD_SHARE * least
        evidence.update(idle_launches=int(len(delay_us)), shift_us=least, median_wait_us=median, constant=constant)
        text = (f"every one of {plural(len(delay_us), 'launch', 'launches')} onto an idle GPU waited at least "
                f"{fmt_us(least)} for its work to start, where a GPU takes a few µs: ")
        text += (f"the device timeline is shifted later by about {fmt_us(least)}, as one constant" if constant else
                 f"the device timeline runs {fmt_us(least)} to {fmt_us(float(delay_us.max()))} late, "
                 f"not by one constant (median {fmt_us(median)})")
        late_us = _late_end_us(ctx)
        if late_us > 0:
            evidence["late_end_us"] = late_us
            text += f"; device work ends {fmt_us(late_us)} after the last host event"
        said.append(text)
        severe = True

    missing, missing_at_end = _missing_kernels(ctx, runtime)
    if missing >= IMPOSSIBLE_MIN_RECORDS or (said and missing_at_end):
        # at the end only: a trace cut short looks so too; said when other evidence is there
        counted = missing + missing_at_end if said else missing
        evidence.update(missing_kernels=missing, missing_kernels_at_end=missing_at_end)
        one = counted == 1
        text = (f"{plural(counted, 'kernel launch', 'kernel launches')} {'has' if one else 'have'} no kernel ("
                f"{'its correlation id points' if one else 'their correlation ids point'} nowhere: torch drops device "
                "records whose times fall outside the profile)")
        said.append(text)

    if sum(left_out.values()) >= IMPOSSIBLE_MIN_RECORDS:
        evidence["left_out"] = dict(left_out)
        said.append("the trace's reader left out " + ", ".join(
            f"{plural(n, 'device record')} for {_REASONS[why]}" for why, n in left_out.items()))
        severe = True

    if not said:
        return
    numbers = cuda_profiles(ctx.meta)
    evidence["cuda_profile"] = numbers[0] if len(numbers) == 1 else (numbers or None)
    message = f"The device clock contradicts the host's: {'; '.join(said)}. {_cause(numbers)}"
    yield Finding("high" if severe else "medium", message, evidence, score=1.0)


def cuda_profiles(meta: Any) -> list[int]:
    """Which CUDA profiles of their process the traces of a profile were (one per ``--schedule``
    cycle), as nbprof counted them when it read them; [] when not known (a file another tool wrote)."""
    parts = list(getattr(meta, "parts", None) or []) or [meta]
    return [int(p.cuda_profile) for p in parts if getattr(p, "cuda_profile", None) is not None]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def which_profile(numbers: list[int]) -> str:
    """"the 3rd CUDA profile", "CUDA profiles 2 to 4" (a schedule's cycles)."""
    if len(numbers) == 1:
        return f"the {_ordinal(numbers[0])} CUDA profile"
    return f"CUDA profiles {min(numbers)} to {max(numbers)}"


def _cause(numbers: list[int]) -> str:
    restart = ("Restart the kernel (or the process) and profile once (a --schedule with one cycle records many "
               "steps in one session); device times here, and the findings made of them, are not to be trusted.")
    if numbers and max(numbers) > 1:
        return (f"This is {which_profile(numbers)} nbprof read in this process, and torch's device times can drift "
                f"in every CUDA profile after a process's first ({BUGS}): the first one is the one to trust. " + restart)
    if numbers:
        return ("This is the first CUDA profile nbprof read in this process, so torch's repeat-profile bug "
                f"({BUGS}) explains it only if the code profiled CUDA before. " + restart)
    return (f"torch's device times can drift in every CUDA profile after a process's first ({BUGS}): if this was "
            "not the first of its process, that is the likely cause. " + restart)


def note(findings: pd.DataFrame, meta: Any) -> str | None:
    """The report's one-line note when the profile has this finding."""
    if len(findings) == 0 or not (findings["kind"] == KIND).any():
        return None
    numbers = cuda_profiles(meta)
    text = "the device clock contradicts the host's (see the clock_skew finding): device times are not to be trusted"
    if numbers and max(numbers) > 1:
        text += (f"; this is {which_profile(numbers)} nbprof read in this process, and only a process's first is "
                 f"right (torch's bug, {BUGS}): restart the kernel and profile once")
    return text


def _left_out(meta: Any) -> dict[str, int]:
    """The device records the reader left out for their times, by why (``TraceMeta.left_out_work``;
    summed over a merged profile's parts)."""
    counts: dict[str, int] = {}
    for why, n in (getattr(meta, "left_out_work", None) or {}).items():
        if why in _REASONS and n > 0:
            counts[why] = counts.get(why, 0) + int(n)
    return counts


def _device_groups(ctx: TorchContext, rows: np.ndarray) -> np.ndarray:
    """A code per (rank, device) of the given rows."""
    device = ctx.events["device"].cat.codes.to_numpy()[rows].astype(np.int64)
    return ctx.rank[rows] * (int(device.max()) + 1 if len(device) else 1) + device


def _after_idle(ctx: TorchContext, work: np.ndarray) -> np.ndarray:
    """Of the given device records (rows): those that started with their device idle for at least
    ``IDLE_MIN_US`` (every earlier record of the same rank and device ended that long before), not
    the device's first (what ran before the profile started is not in it)."""
    rows = np.flatnonzero(ctx.work)
    if len(rows) == 0 or len(work) == 0:
        return np.zeros(len(work), dtype=bool)
    group = _device_groups(ctx, rows)
    start, end = ctx.start_ns[rows], ctx.end_ns[rows]
    order = np.lexsort((start, group))
    g, s, e = group[order], start[order], end[order]
    # the latest end of the earlier records of each group: one running max, each group moved to its
    # own stretch of the time axis
    base = int(min(s.min(), e.min()))
    stride = int(max(s.max(), e.max()) - base) + 2
    run = np.maximum.accumulate(g * stride + (e - base)) - g * stride + base
    same = np.r_[False, g[1:] == g[:-1]]
    idle = np.zeros(len(s), dtype=bool)
    idle[1:] = same[1:] & (s[1:] - run[:-1] >= IDLE_MIN_US * 1000)
    at = np.zeros(len(ctx.events), dtype=bool)
    at[rows[order]] = idle
    return at[work]


def _late_end_us(ctx: TorchContext) -> float:
    """How long the last device record ends after the last host event, on the rank where that is
    longest (µs; <= 0: it does not)."""
    device = ctx.events["device"]
    categories = list(device.cat.categories)
    if "cpu" not in categories:
        return 0.0
    host = ~ctx.work & (device.cat.codes.to_numpy() == categories.index("cpu"))
    if not host.any() or not ctx.work.any():
        return 0.0
    n = len(ctx.rank_labels)
    host_end = np.full(n, np.iinfo(np.int64).min)
    work_end = np.full(n, np.iinfo(np.int64).min)
    np.maximum.at(host_end, ctx.rank[host], ctx.end_ns[host])
    np.maximum.at(work_end, ctx.rank[ctx.work], ctx.end_ns[ctx.work])
    both = (host_end > np.iinfo(np.int64).min) & (work_end > np.iinfo(np.int64).min)
    return float((work_end[both] - host_end[both]).max()) / 1000 if both.any() else 0.0


def _missing_kernels(ctx: TorchContext, runtime: np.ndarray) -> tuple[int, int]:
    """Kernel launch calls (runtime events named as ``KERNEL_LAUNCH``) with a correlation id that
    no device record has: (how many before the last launch of their rank whose kernel is there,
    how many after it). The ones after may be a trace cut short (a file cut to its first part of
    time, a GPU still running at the end); the ones before cannot be."""
    ev = ctx.events
    names = ev["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        launching = np.asarray(names.cat.categories.astype(str).str.contains(KERNEL_LAUNCH), dtype=bool)
        codes = names.cat.codes.to_numpy()
        is_launch = (codes >= 0) & launching[np.maximum(codes, 0)]
    else:
        is_launch = np.asarray(names.astype(str).str.contains(KERNEL_LAUNCH), dtype=bool)
    corr = ev["correlation"].to_numpy()
    launches = np.flatnonzero(is_launch & runtime & (corr > 0))
    if len(launches) == 0:
        return 0, 0
    found = np.isin(corr[launches], corr[ctx.work & (corr > 0)])
    last = np.full(len(ctx.rank_labels), np.iinfo(np.int64).min)
    np.maximum.at(last, ctx.rank[launches[found]], ctx.start_ns[launches[found]])
    lost = launches[~found]
    before = ctx.start_ns[lost] < last[ctx.rank[lost]]
    return int(before.sum()), int((~before).sum())
