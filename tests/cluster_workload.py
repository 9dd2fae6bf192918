"""A two-rank DDP run on the CPU (gloo) recorded with every per-rank view a trace can have: input
shapes, Python stacks (and with them the ``nn.Module`` calls), memory, ``record_function``
ranges and a ``schedule`` (steps); and torch's own ``key_averages()`` of each rank from the same
live profile.

Run once per rank by torchrun (``torch.distributed.run`` sets the rank; torch writes it in the
trace's ``distributedInfo``)::

    python -m torch.distributed.run --standalone --nproc_per_node=2 tests/cluster_workload.py OUT [--oracle DIR] [--memory-on 0]

writes into ``OUT``: ``rank<r>.pt.trace.json.gz`` (``export_chrome_trace``, gzipped), and with
``--oracle`` into ``DIR`` (not the trace folder: every .json there is read as a rank)
``rank<r>.json.gz`` (``rows``: torch's ``key_averages()``, ``rows_by_input_shape``:
``key_averages(group_by_input_shape=True)``; fields as tests/data/README.md's oracles).
``--memory-on 0``: only rank 0 records memory (a folder where one rank lacks the Memory view).
Rank 1 computes on a wider batch, so the ranks' numbers differ.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil


def main() -> None:
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--oracle", default=None, help="where torch's key_averages() of each rank go")
    ap.add_argument("--memory-on", type=int, default=None, help="only this rank records memory")
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self, n: int) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(n, n)
            self.act = torch.nn.ReLU()

        def forward(self, x):
            return self.act(self.fc(x)) + x

    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(32, 64), Block(64), torch.nn.Linear(64, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = 16 if rank == 0 else 48  # rank 1 works on more data: its times differ

    def on_ready(prof) -> None:
        path = os.path.join(args.out, f"rank{rank}.pt.trace.json")
        prof.export_chrome_trace(path)
        with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.remove(path)
        fields = ("count", "cpu_time_total", "self_cpu_time_total", "device_time_total", "self_device_time_total",
                  "cpu_memory_usage", "self_cpu_memory_usage", "device_memory_usage", "self_device_memory_usage",
                  "flops")

        def rows(averages) -> list[dict]:
            return [{"key": a.key, **{f: getattr(a, f) for f in fields}, "input_shapes": str(a.input_shapes),
                     "device_type": str(a.device_type)} for a in averages]

        if args.oracle:
            os.makedirs(args.oracle, exist_ok=True)
            with gzip.open(os.path.join(args.oracle, f"rank{rank}.json.gz"), "wt") as f:
                json.dump({"rank": rank, "torch": torch.__version__, "rows": rows(prof.key_averages()),
                           "rows_by_input_shape": rows(prof.key_averages(group_by_input_shape=True))}, f,
                          separators=(",", ":"))

    memory = args.memory_on is None or args.memory_on == rank
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=2),
                 on_trace_ready=on_ready, record_shapes=True, with_stack=True, profile_memory=memory) as prof:
        for _ in range(4):
            with record_function("load_batch"):
                x, y = torch.randn(batch, 32), torch.randint(0, 4, (batch,))
            with record_function("train_step"):
                with record_function("forward"):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                with record_function("backward"):
                    loss.backward()
                opt.step()
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
