"""CUDA memory snapshots built by hand on CPU, as ``torch.cuda.memory._snapshot()`` returns them
(the ``Snapshot``, ``Segment``, ``Block``, ``TraceEntry`` and ``Frame`` TypedDicts of
``torch/cuda/memory.py``, torch 2.13; the fields ``torch/csrc/cuda/Module.cpp`` writes), with
their numbers counted by hand in the docstrings. Frames are shared as torch shares them: one dict
per distinct frame, one list per traceback, the same list on an allocation's entry and its block.
"""

from __future__ import annotations

import pickle
from typing import Any

KiB, MiB = 1 << 10, 1 << 20
SEG_A, SEG_B = 0x7F00_0000_0000, 0x7F00_1000_0000


def frame(filename: str, line: int, name: str) -> dict[str, Any]:
    return {"filename": filename, "line": line, "name": name}


# a stack as torch records it (innermost first): torch's own frames, then the user's
TORCH_EMPTY = frame("/usr/lib/python3.11/site-packages/torch/nn/functional.py", 2150, "linear")
MODULE = frame("/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", 1750, "_call_impl")
CELL = "/tmp/ipykernel_4242/1234567.py"  # a cell of another machine's kernel (a .py path that is not here)


def stack(*user_lines: int) -> list[dict[str, Any]]:
    """A traceback: torch's frames, then the cell's lines (innermost first)."""
    return [TORCH_EMPTY, MODULE] + [frame(CELL, n, "<module>") for n in user_lines]


def entry(action: str, addr: int, size: int, t: int, frames: list | None = None, stream: int = 0) -> dict[str, Any]:
    e: dict[str, Any] = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": t,
                         "compile_context": "N/A", "user_metadata": ""}
    if frames is not None:
        e["frames"] = frames
    return e


def block(addr: int, size: int, requested: int, state: str, frames: list | None = None) -> dict[str, Any]:
    return {"address": addr, "size": size, "requested_size": requested, "state": state,
            "frames": frames if frames is not None else []}


def segment(addr: int, total: int, blocks: list[dict[str, Any]], device: int = 0, stream: int = 0) -> dict[str, Any]:
    allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    requested = sum(b["requested_size"] for b in blocks if b["state"] != "inactive")
    return {"device": device, "address": addr, "total_size": total, "allocated_size": allocated,
            "active_size": active, "requested_size": requested, "stream": stream,
            "segment_type": "large" if total >= MiB else "small", "segment_pool_id": (0, 0),
            "is_expandable": False, "frames": [], "blocks": blocks}


def hand_snapshot() -> dict[str, Any]:
    """One device, two 2 MiB segments; counted by hand:

    - before the history: x (64 KiB at SEG_B + 1 MiB, freed in the history) and y (100 KiB asked,
      a 128 KiB block at SEG_B, held to the end, no stack): the start is 164 KiB active;
      segment B is reserved (2 MiB), segment A is not yet.
    - t=100 segment_alloc A (2 MiB): reserved 4 MiB.
    - t=110 alloc a1 512 KiB (line 3): 676 KiB;  t=120 alloc a2 1 MiB (line 4): 1,700 KiB (the peak)
    - t=130 free_requested a1: still 1,700 KiB; t=131 free_completed a1: 1,188 KiB
    - t=140 alloc a3 256 KiB at a1's address (line 5): 1,444 KiB
    - t=150 OOM asking 8 MiB, 1 MiB free on the device: 1,444 KiB
    - t=160 free_completed x (allocated before the history): 1,380 KiB
    - the end: a3 256 + a2 1,024 + y 100 = 1,380 KiB active, 4 MiB reserved.
    """
    s3, s4, s5 = stack(3), stack(4), stack(5)
    a = SEG_A
    trace = [
        entry("segment_alloc", a, 2 * MiB, 100, stack(3)),
        entry("alloc", a, 512 * KiB, 110, s3),
        entry("alloc", a + 512 * KiB, MiB, 120, s4),
        entry("free_requested", a, 512 * KiB, 130, stack(6)),
        entry("free_completed", a, 512 * KiB, 131, stack(6)),
        entry("alloc", a, 256 * KiB, 140, s5),
        {"action": "oom", "device_free": MiB, "size": 8 * MiB, "stream": 0, "time_us": 150, "frames": stack(7)},
        entry("free_completed", SEG_B + MiB, 64 * KiB, 160, stack(8)),
    ]
    seg_a = segment(a, 2 * MiB, [block(a, 256 * KiB, 256 * KiB, "active_allocated", s5),
                                 block(a + 256 * KiB, 256 * KiB, 256 * KiB, "inactive"),
                                 block(a + 512 * KiB, MiB, MiB, "active_allocated", s4),
                                 block(a + 1536 * KiB, 512 * KiB, 512 * KiB, "inactive")])
    seg_b = segment(SEG_B, 2 * MiB, [block(SEG_B, 128 * KiB, 100 * KiB, "active_allocated"),
                                     block(SEG_B + 128 * KiB, 2 * MiB - 128 * KiB, 2 * MiB - 128 * KiB, "inactive")])
    return {"segments": [seg_a, seg_b], "device_traces": [trace],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                   "garbage_collection_threshold": 0.0, "expandable_segments": False}}


# the active bytes after each entry of hand_snapshot(), counted above
HAND_ACTIVE_KIB = [164, 676, 1700, 1700, 1188, 1444, 1444, 1380]
HAND_RESERVED_MIB = [4, 4, 4, 4, 4, 4, 4, 4]


def write(snapshot: Any, path: Any) -> str:
    """What ``torch.cuda.memory._dump_snapshot`` does with it: ``pickle.dump``."""
    with open(path, "wb") as f:
        pickle.dump(snapshot, f)
    return str(path)


def simulated(entries: int, *, seed: int = 0, devices: int = 1, segments: int = 6, segment_mib: int = 24,
              slots: int = 48, lines: int = 12, dropped: int = 0, ooms: int = 2) -> dict[str, Any]:
    """A caching allocator simulated in plain Python, dumped as torch dumps it: ``segments`` large
    segments per device cut into ``slots`` blocks each; ``entries`` history entries of allocations
    (a request rounded up to 512 bytes inside a free block), frees (free_requested, then
    free_completed), a segment_alloc per segment first, ``ooms`` OOMs; the first ``dropped``
    entries cut off, as torch's ring buffer drops the oldest (their allocations then show up as
    frees without an allocation, and blocks held at the end that no entry allocated). Each
    allocation's stack is a list of its own over shared frame dicts: one of ``lines`` cell lines
    under two torch frames, as torch symbolizes them. Deterministic for a seed."""
    import random

    rnd = random.Random(seed)
    frames = [frame(CELL, 10 + i, "<module>") for i in range(lines)]
    seg_size = segment_mib * MiB
    slot = seg_size // slots
    out_segments = []
    traces: list[list[dict[str, Any]]] = []
    t = 1_700_000_000_000_000
    per_device = entries // devices
    for d in range(devices):
        base = 0x7F00_0000_0000 + d * 0x0100_0000_0000
        seg_addrs = [base + k * 0x0010_0000_0000 for k in range(segments)]
        free_slots = [a + j * slot for a in seg_addrs for j in range(slots)]
        rnd.shuffle(free_slots)
        live: dict[int, tuple[int, list]] = {}  # slot address -> (requested, stack)
        trace: list[dict[str, Any]] = []
        for a in seg_addrs:
            t += rnd.randint(1, 5)
            trace.append(entry("segment_alloc", a, seg_size, t, [frames[0]]))
        oom_at = set(rnd.sample(range(per_device), min(ooms, per_device)))
        while len(trace) < per_device:
            t += rnd.randint(0, 3)
            i = len(trace)
            if i in oom_at:
                trace.append({"action": "oom", "device_free": rnd.randint(0, 64) * MiB, "size": 4 << 30,
                              "stream": 0, "time_us": t, "frames": [TORCH_EMPTY, frames[rnd.randrange(lines)]]})
                continue
            grow = len(live) < 0.25 * len(seg_addrs) * slots or (free_slots and rnd.random() < 0.5)
            if grow and free_slots:
                a = free_slots.pop()
                requested = min(slot, 512 * rnd.randint(1, slot // 512))
                st = [TORCH_EMPTY, MODULE, frames[min(int(rnd.expovariate(0.4)), lines - 1)]]
                live[a] = (requested, st)
                trace.append(entry("alloc", a, requested, t, st))
            elif live:
                a = rnd.choice(list(live))
                requested, st = live.pop(a)
                fst = [TORCH_EMPTY, frames[rnd.randrange(lines)]]
                trace.append(entry("free_requested", a, requested, t, fst))
                if len(trace) < per_device:
                    t += 1
                    trace.append(entry("free_completed", a, requested, t, fst))
                    free_slots.append(a)
                else:  # the history ends between the two: the block awaits its free
                    live[a] = (requested, st)
        stacks_by_slot = {a: st for a, (_, st) in live.items()}
        for a in seg_addrs:
            blocks = []
            for j in range(slots):
                addr = a + j * slot
                if addr in live:
                    requested = live[addr][0]
                    state = "active_allocated"
                    pending = trace and trace[-1]["action"] == "free_requested" and trace[-1]["addr"] == addr
                    blocks.append(block(addr, slot, requested, "active_pending_free" if pending else state,
                                        stacks_by_slot[addr]))
                else:
                    blocks.append(block(addr, slot, slot, "inactive"))
            out_segments.append(segment(a, seg_size, blocks, device=d))
        traces.append(trace[dropped // devices:])
    return {"segments": out_segments, "device_traces": traces}


def one_block_snapshot(stack: list) -> dict:
    """A snapshot of one 2 MiB segment: one active block (500 KiB asked, 512 KiB given) allocated at
    ``stack``, the rest of the segment inactive."""
    return {"segments": [segment(SEG_A, 2 * MiB, [block(SEG_A, 512 * KiB, 500 * KiB, "active_allocated", stack),
                                                 block(SEG_A + 512 * KiB, 1536 * KiB, 1536 * KiB, "inactive")])],
            "device_traces": [[]]}
