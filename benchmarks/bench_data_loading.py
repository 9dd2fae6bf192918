"""What recording a DataLoader's workers costs a batch (issue 41): the same worker-bound loop with
and without ``%%cprofile``, in a real IPython shell.

A realistic transform on each sample, in numpy as an image pipeline does it: decode a 3x96x96
uint8 image from bytes, a random crop to 80x80, a random horizontal flip, conversion to float32,
per-channel normalization, to a tensor; 32 samples a batch, torch's default collate. One worker,
and the loop takes each batch and does nothing else, so the loop's pace is the worker's: the time
per batch is measured in the cell itself, from the first batch to the last (the workers' start
left out), with the user's own code, the same with and without the magic: the worker process's
CPU time (psutil: user + system), which a machine busy with other work changes little, and the
loop's wall time. Each repetition runs both, the order alternating; printed: each pair's ratio
and their median, which is what the target (at most 1.3x) is about. Also timed: what the watch costs a cell that uses no
DataLoader (installing and removing it, and reading nothing).

    python benchmarks/bench_data_loading.py [--batches 60] [--reps 5] [--markdown PATH]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

SETUP = """\
import time
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)[:, None, None]
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)[:, None, None]


def decode(raw):
    return np.frombuffer(raw, dtype=np.uint8).reshape(3, 96, 96)


def random_crop(img, rng, size=80):
    y, x = rng.integers(0, img.shape[1] - size + 1, size=2)
    return img[:, y:y + size, x:x + size]


def random_flip(img, rng):
    return img[:, :, ::-1] if rng.random() < 0.5 else img


def normalize(img):
    return (img.astype(np.float32) / 255.0 - MEAN) / STD


class Images(Dataset):
    def __init__(self, n):
        rng = np.random.default_rng(0)
        self.raw = [rng.integers(0, 256, 3 * 96 * 96, dtype=np.uint8).tobytes() for _ in range(n)]
        self.rng = np.random.default_rng(1)

    def __len__(self):
        return len(self.raw)

    def __getitem__(self, i):
        img = normalize(random_flip(random_crop(decode(self.raw[i]), self.rng), self.rng))
        return torch.from_numpy(np.ascontiguousarray(img)), i % 10


images = Images({samples})
"""

# the loader is made in the cell (a persistent worker made before a profiled cell is not
# recorded); persistent, so that its process is still there to be asked its CPU time at the end
LOOP = """\
import psutil
loader = DataLoader(images, batch_size=32, num_workers=1, multiprocessing_context="fork", persistent_workers=True)
first = last = None
count = 0
for batch, labels in loader:
    now = time.perf_counter()
    if first is None:
        first = now
        worker = psutil.Process(loader._iterator._workers[0].pid)
        cpu_first = sum(worker.cpu_times()[:2])
    last = now
    count += 1
cpu_last = sum(worker.cpu_times()[:2])
per_batch_s = (last - first) / (count - 1)
cpu_per_batch_s = (cpu_last - cpu_first) / (count - 1)
del loader
"""


def measure(shell, magic: str | None) -> tuple[float, float]:
    """(the worker's CPU time a batch, the loop's wall time a batch), in seconds."""
    cell = (f"%%{magic} -q\n" if magic else "") + LOOP
    result = shell.run_cell(cell)
    if result.error_in_exec is not None:
        raise result.error_in_exec
    return float(shell.user_ns["cpu_per_batch_s"]), float(shell.user_ns["per_batch_s"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--markdown", default=None, help="append the results as a markdown table to this file")
    args = parser.parse_args()

    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    shell.run_line_magic("load_ext", "nbprof")
    shell.run_cell(SETUP.format(samples=args.batches * 32))
    measure(shell, None)  # warm up: imports, the first fork
    ratios, wall_ratios, plain_s, profiled_s = [], [], [], []
    for rep in range(args.reps):
        order = [None, "cprofile"] if rep % 2 == 0 else ["cprofile", None]
        got = {m: measure(shell, m) for m in order}
        plain_s.append(got[None][0])
        profiled_s.append(got["cprofile"][0])
        ratios.append(got["cprofile"][0] / got[None][0])
        wall_ratios.append(got["cprofile"][1] / got[None][1])
        print(f"rep {rep}: worker CPU plain {got[None][0] * 1e3:.2f} ms/batch, %%cprofile "
              f"{got['cprofile'][0] * 1e3:.2f} ms/batch, ratio {ratios[-1]:.3f} (the loop's wall time: "
              f"{got[None][1] * 1e3:.2f} and {got['cprofile'][1] * 1e3:.2f} ms/batch, {wall_ratios[-1]:.3f})",
              flush=True)
    median = statistics.median(ratios)

    from nbprof.collect.data_loading import DataLoaderWatch

    empty = []
    for _ in range(200):
        t = time.perf_counter()
        watch = DataLoaderWatch()
        watch.install()
        watch.remove()
        watch.collect()
        empty.append(time.perf_counter() - t)
    empty_us = statistics.median(empty) * 1e6
    print(f"median ratio of the worker's CPU time a batch {median:.3f} (target <= 1.3), of the loop's wall time "
          f"{statistics.median(wall_ratios):.3f}; the watch without a DataLoader: {empty_us:.1f} µs a cell")
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(f"\n| reps | batches | worker CPU ms/batch, plain (median) | with %%cprofile (median) | ratios "
                    f"| median | loop wall-time ratio (median) | no DataLoader: watch µs/cell |\n"
                    f"|---|---|---|---|---|---|---|---|\n"
                    f"| {args.reps} | {args.batches} | {statistics.median(plain_s) * 1e3:.2f} | "
                    f"{statistics.median(profiled_s) * 1e3:.2f} | {', '.join(f'{r:.3f}' for r in ratios)} | "
                    f"{median:.3f} | {statistics.median(wall_ratios):.3f} | {empty_us:.1f} |\n")


if __name__ == "__main__":
    sys.exit(main())
