"""An independent model of a torch chrome trace, in plain Python: the oracle for the invariant and
property tests (tests/test_invariants.py) and the key averages of any trace torch's writer
could write (tests/test_perf_tree.py).

It reads the raw JSON (exact nanoseconds, through ``Decimal``) and rebuilds what torch's
``EventList._build_tree`` defines, one Python object per event, with loops a reader can check
line by line against the definitions in nbprof/analysis/tree.py's docstring:

- per CPU thread, events sorted by (start, longest first, file order); a stack of open events;
  an event is a child of the stack's top unless it starts at/after the top's end or ends after
  it (the top is then popped for good); a child with its parent's name, start and end is its
  next sibling instead (two calls on a coarse clock, tree.py ``_split_ties``);
- same-name collapse: an only child with its parent's name is merged into the parent
  (repeatedly), which takes over its children and kernels;
- device work belongs to the op with its External id, else to the op around the runtime call
  with its correlation id;
- memory: every CPU event gets the memory events whose time falls in [start, end]; the others
  are "[memory]" rows of their own;
- self = total minus the children's totals, with nbprof's two departures from torch, which can
  give a negative self time: partially overlapping siblings' overlap is subtracted once (the
  union of their intervals), and a self time is never below 0 (calls sharing start and end on a
  coarse clock, each subtracted whole, can add up to more than their parent's time).

Nothing here imports nbprof. Legacy torch 1.8-1.9 traces ("Operator" categories) are out of its
scope.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

# chrome-trace categories, as torch's writer files them
TREE_CATS = {"cpu_op": "op", "user_annotation": "annotation", "cuda_runtime": "runtime", "cuda_driver": "runtime",
             "hip_runtime": "runtime", "mtia_runtime": "runtime", "xpu_runtime": "runtime", "overhead": "overhead"}
WORK_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset", "mtia_ccp_events": "kernel"}
FRONTEND = ("op", "annotation")  # what launches device work (runtime calls and overhead do not)
# torch.autograd.profiler_util._filter_name: utility ops left out of torch's tables
IGNORED = {"profiler::_record_function_enter", "profiler::_record_function_enter_new",
           "profiler::_record_function_exit", "aten::is_leaf", "aten::output_nr", "aten::_version"}
# MTIA's command processor files its synchronization and DMA copies among its kernels, by name
BY_NAME = {"mtia_ccp_events": {"event_wait": None, "event_record": None, "dma_request": "memcpy"}}
CPU_MEMORY = {0, 2, 5}
# torch's own record_function ranges (steps, loaders), filed as operators by torch 1.8-1.11: ranges
TORCH_RANGES = ("ProfilerStep#", "enumerate(DataLoader)#", "enumerate(DataPipe)#")  # DeviceType codes of host memory (CPU, MKLDNN, ...); others are a device's


@dataclass(eq=False)
class Event:
    index: int  # position in the file
    name: str
    kind: str
    start: int  # ns
    end: int
    tid: int = -1
    ext: int = 0
    corr: int = 0
    nbytes: int = 0
    on_cpu: bool = False
    parent: Event | None = None
    children: list[Event] = field(default_factory=list)
    merged: bool = False
    kernels: list[Event] = field(default_factory=list)
    cpu_mem: int = 0
    device_mem: int = 0

    @property
    def dur(self) -> int:
        return self.end - self.start


def ns(value: Any) -> int:
    """µs as written in the file (a Decimal when read with ``read``) -> exact integer ns."""
    return int((Decimal(value) * 1000).to_integral_value())


def thread(tid: Any) -> Any:
    """A thread's id: kineto writes them as signed 32-bit numbers, so a large one reads negative
    (-549452224 is thread 3,745,515,072)."""
    return tid + (1 << 32) if isinstance(tid, int) and tid < 0 else tid


def read(path: Path | str) -> dict:
    """A trace file's JSON, floats as Decimal (exact ns)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        doc = json.load(f, parse_float=Decimal)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def union_ns(intervals: list[tuple[int, int]]) -> int:
    """The time [start, end] intervals cover together: sorted, then merged in one loop."""
    total, cur_s, cur_e = 0, 0, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            total += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (0 if cur_e is None else cur_e - cur_s)


class Model:
    """The trace as torch defines its tree, kernels and memory (see the module doc)."""

    def __init__(self, doc: dict) -> None:
        self.tree: list[Event] = []
        self.work: list[Event] = []
        self.memory: list[Event] = []
        runtime_by_corr: dict[int, Event] = {}
        raw = doc["traceEvents"]
        overhead_rows = []
        for i, e in enumerate(raw):
            cat, ph, name = e.get("cat"), e.get("ph"), e.get("name", "")
            args = e.get("args") or {}
            if ph == "X" and cat in TREE_CATS and name not in IGNORED:
                kind = "annotation" if cat == "cpu_op" and name.startswith(TORCH_RANGES) else TREE_CATS[cat]
                ev = Event(i, name, kind, ns(e["ts"]), ns(e["ts"]) + ns(e.get("dur", 0)), tid=thread(e["tid"]),
                           ext=int(args.get("External id", 0) or 0), corr=int(args.get("correlation", 0) or 0))
                self.tree.append(ev)
                if ev.kind == "overhead":
                    overhead_rows.append(ev)
                if ev.kind == "runtime" and ev.corr:
                    runtime_by_corr.setdefault(ev.corr, ev)
            elif ph == "X" and cat in WORK_CATS and BY_NAME.get(cat, {}).get(name, WORK_CATS[cat]):
                self.work.append(Event(i, name, BY_NAME.get(cat, {}).get(name, WORK_CATS[cat]), ns(e["ts"]), ns(e["ts"]) + ns(e.get("dur", 0)),
                                       ext=int(args.get("External id", 0) or 0),
                                       corr=int(args.get("correlation", 0) or 0)))
            elif ph == "i" and cat == "cpu_instant_event" and name == "[memory]":
                self.memory.append(Event(i, name, "memory", ns(e["ts"]), ns(e["ts"]), tid=thread(e["tid"]),
                                         nbytes=int(args.get("Bytes", 0)),
                                         on_cpu=int(args.get("Device Type", 0)) in CPU_MEMORY))
        # profiler overhead (pid -1, tid 0 in the file) runs on the main thread: the thread whose
        # id is the process id, else the first operator's
        if overhead_rows:
            front = [e for e in raw if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
            same = [e for e in front if e.get("pid") == e.get("tid")]
            main = thread((same or front)[0]["tid"])
            for ev in overhead_rows:
                ev.tid = main
        self._nest()
        self._collapse()
        self._attach_work(runtime_by_corr)
        self._attach_memory()

    # -- the tree

    def _nest(self) -> None:
        threads: dict[int, list[Event]] = defaultdict(list)
        for ev in self.tree:
            threads[ev.tid].append(ev)
        for events in threads.values():
            events.sort(key=lambda ev: (ev.start, -ev.end, ev.index))
            stack: list[Event] = []
            for ev in events:
                while stack:
                    top = stack[-1]
                    if ev.start >= top.end or ev.end > top.end:
                        stack.pop()
                    elif (ev.name, ev.start, ev.end) == (top.name, top.start, top.end):
                        stack.pop()  # a second call with the same timestamps: a sibling
                    else:
                        break
                if stack:
                    ev.parent = stack[-1]
                    stack[-1].children.append(ev)
                stack.append(ev)

    def _collapse(self) -> None:
        changed = True
        while changed:
            changed = False
            for ev in self.tree:
                p = ev.parent
                if ev.merged or p is None or p.name != ev.name or len(p.children) != 1:
                    continue
                ev.merged = True
                p.children = ev.children
                for child in ev.children:
                    child.parent = p
                changed = True

    def survivor(self, ev: Event) -> Event:
        while ev.merged:
            assert ev.parent is not None
            ev = ev.parent
        return ev

    def _attach_work(self, runtime_by_corr: dict[int, Event]) -> None:
        by_ext: dict[int, Event] = {}
        for ev in self.tree:  # file order: the first op of a (rare) duplicate id
            if ev.kind in FRONTEND and ev.ext > 0:
                by_ext.setdefault(ev.ext, ev)
        self.launcher: dict[Event, Event | None] = {}
        for w in self.work:
            op = by_ext.get(w.ext) if w.ext > 0 else None
            if op is None and w.corr > 0 and w.corr in runtime_by_corr:
                op = runtime_by_corr[w.corr].parent
                while op is not None and op.kind not in FRONTEND:
                    op = op.parent
            if op is not None:
                op = self.survivor(op)
                op.kernels.append(w)
            self.launcher[w] = op

    def _attach_memory(self) -> None:
        for ev in self.tree:
            for m in self.memory:
                if ev.start <= m.start <= ev.end:
                    if m.on_cpu:
                        ev.cpu_mem += m.nbytes
                    else:
                        ev.device_mem += m.nbytes
        self.loose = [m for m in self.memory if not any(ev.start <= m.start <= ev.end for ev in self.tree)]

    # -- numbers per event

    def live(self) -> list[Event]:
        return [ev for ev in self.tree if not ev.merged]

    def self_cpu(self, ev: Event) -> int:
        """Its time minus the time its children cover, never below 0.

        Their union, not their sum, where torch's stack leaves partially overlapping siblings:
        torch subtracts their overlap twice (a negative self time), nbprof once (tree.py,
        40c3a25). Calls with the same start and end (two calls on a coarse clock, made siblings
        above) are each subtracted whole, as torch does; where that leaves less than nothing,
        nothing."""
        seen: set[tuple[int, int]] = set()
        repeated = 0
        for c in ev.children:
            if (c.start, c.end) in seen:
                repeated += c.dur
            seen.add((c.start, c.end))
        return max(ev.dur - union_ns(list(seen)) - repeated, 0)

    def self_device(self, ev: Event) -> int:
        return sum(k.dur for k in ev.kernels)

    def device_total(self, ev: Event) -> int:
        return self.self_device(ev) + sum(self.device_total(c) for c in ev.children)

    def roots(self) -> list[Event]:
        return [ev for ev in self.tree if ev.parent is None]

    # -- torch's key averages

    def key_averages(self) -> dict[tuple[str, str], dict[str, float]]:
        """(key name, kind) -> count, times in µs, bytes: what ``key_averages()`` must hold."""
        out: dict[tuple[str, str], dict[str, float]] = {}

        def row(name: str, kind: str) -> dict[str, float]:
            key = ("ProfilerStep*" if name.startswith("ProfilerStep#") else name, kind)
            return out.setdefault(key, dict.fromkeys(
                ("count", "cpu_total_us", "self_cpu_us", "device_total_us", "self_device_us", "cpu_mem_bytes",
                 "self_cpu_mem_bytes", "device_mem_bytes", "self_device_mem_bytes"), 0))

        for ev in self.live():
            r = row(ev.name, ev.kind)
            r["count"] += 1
            r["cpu_total_us"] += ev.dur / 1000
            r["self_cpu_us"] += self.self_cpu(ev) / 1000
            r["device_total_us"] += self.device_total(ev) / 1000
            r["self_device_us"] += self.self_device(ev) / 1000
            r["cpu_mem_bytes"] += ev.cpu_mem
            r["self_cpu_mem_bytes"] += ev.cpu_mem - sum(c.cpu_mem for c in ev.children)
            r["device_mem_bytes"] += ev.device_mem
            r["self_device_mem_bytes"] += ev.device_mem - sum(c.device_mem for c in ev.children)
        for w in self.work:
            r = row(w.name, w.kind)
            r["count"] += 1
            r["device_total_us"] += w.dur / 1000
            r["self_device_us"] += w.dur / 1000
        for m in self.loose:
            r = row(m.name, "memory")
            r["count"] += 1
            column = "cpu_mem_bytes" if m.on_cpu else "device_mem_bytes"
            r[column] += m.nbytes
            r["self_" + column] += m.nbytes
        return out
