# %% [markdown]
# # PyTorch profiler basics
#
# What does `model(x)` actually run? In this notebook you will read a torch profile operator by
# operator: what an **operator** is, **self** vs **total** time, how to **sort**, how to put your
# own **labels** on parts of the code with `record_function`, and how to split the table **by input
# shape** to see how the cost grows with the size of the data, and whether a training loop **waits
# for data** (inside the DataLoader's workers). The exercises end with removing useless copies from
# a preprocessing function and feeding a loop that waits for data.
#
# About 5 minutes, CPU only.

# %%
%load_ext nbprof

# %%
import torch
from torch.profiler import record_function

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(256, 512),
    torch.nn.ReLU(),
    torch.nn.Linear(512, 10),
)
with torch.no_grad():  # warm up: the first call of an operator pays one-time costs we do not want to measure
    for batch in (8, 64, 512):
        model(torch.randn(batch, 256))

# %% [markdown]
# ## Operators
#
# Every PyTorch function you call runs one or more **operators** (`aten::...` names: ATen is
# PyTorch's tensor library). An operator often calls other operators: `nn.Linear` runs
# `aten::linear`, which runs `aten::t` (transpose the weight) and `aten::addmm` (bias + matrix
# multiply). The profiler records each call with its start and end.

# %%
%%torchprof -o prof
with torch.no_grad():
    for _ in range(5):
        out = model(torch.randn(64, 256))

# %% [markdown]
# ## Self vs total
#
# - **CPU total** of an operator: from its start to its end, *including* the operators it called.
# - **Self CPU**: its total minus the totals of its children: the time in its own code.
#
# Self times add up to the whole profile without counting anything twice, so sort by **self** time
# to find where the time goes (the default), and by **total** time to find which high-level call is
# expensive. Compare `aten::linear` and `aten::addmm`:

# %%
ka = prof.key_averages().set_index("name")
ka.loc[["aten::linear", "aten::addmm", "aten::t"], ["count", "self_cpu_us", "cpu_total_us"]]

# %% [markdown]
# `aten::linear`'s total is large but its self time is small: it delegates the work to
# `aten::addmm`. In the report, click the *Self CPU* and *CPU total* headers to sort by either, or
# choose the order when profiling with `--sort cpu_total_us`. Times vary from run to run; counts do
# not:

# %%
# NBVAL_CHECK_OUTPUT
ka.loc[["aten::linear", "aten::addmm", "aten::t", "aten::relu"], "count"]

# %% [markdown]
# The tree behind self and total is in `prof.events`: each event has a `parent` (the row of the
# event that called it, -1 at the top). The children of the first `aten::linear`:

# %%
ev = prof.events
first_linear = ev.index[ev["name"] == "aten::linear"][0]
ev.loc[ev["parent"] == first_linear, ["name", "start_us", "dur_us"]]

# %% [markdown]
# ## Your own labels: `record_function`
#
# Operator names say *what* ran, not *which part of your program* ran it. Wrap parts of the code in
# `torch.profiler.record_function("label")`: the label becomes an event that contains everything
# under it. The report gets a **Ranges** tab, and `result.ranges()` returns the labels as a table.

# %%
%%torchprof -o labeled
with record_function("make_batch"):
    xb = torch.randn(64, 256) * 2 + 1
with record_function("forward"):
    out = model(xb)
with record_function("loss"):
    loss = out.pow(2).mean()
with record_function("backward"):
    loss.backward()

# %%
labeled.ranges()[["label", "depth", "count", "total_us", "share_of_span"]]

# %% [markdown]
# ## Grouping by input shape
#
# The same operator can be cheap or expensive depending on the size of its inputs. Record the shapes
# (`--shapes`) and split the table by operator *and* input shapes (`--group-by shape`, or the
# *By input shape* tab). We run the model with three batch sizes:

# %%
%%torchprof --shapes --group-by shape -o by_shape
with torch.no_grad():
    for batch in (8, 64, 512):
        xb = torch.randn(batch, 256)
        for _ in range(3):
            model(xb)

# %% [markdown]
# The rows of `aten::addmm` (`input_shapes` lists the shape of each argument: bias, input, weight,
# and two scalars). Can you see a correlation between the input's shape and the cost?

# %%
shapes = by_shape.key_averages("shape")
addmm = shapes[shapes["name"] == "aten::addmm"][["input_shapes", "count", "cpu_avg_us"]]
addmm

# %% [markdown]
# Calls with a bigger batch cost more, but not in proportion: divide by the batch size to get the
# time **per sample**. Small batches pay a fixed cost per call (dispatch, launching threads) that
# large batches spread over many samples; that is one reason why batching helps, on a CPU and even
# more on a GPU.

# %%
import ast

addmm = addmm.assign(batch=[ast.literal_eval(s)[1][0] for s in addmm["input_shapes"]])
addmm.assign(us_per_sample=addmm["cpu_avg_us"] / addmm["batch"]).sort_values(["batch", "input_shapes"])

# %% [markdown]
# The shapes themselves are deterministic: one row per (operator, shapes) pair, 3 calls each.

# %%
# NBVAL_CHECK_OUTPUT
sorted(addmm["input_shapes"])

# %% [markdown]
# ## Modules: `--modules`
#
# Operator names say what ran; a model is a tree of `nn.Module`s. `--modules` records each module
# call, and `result.modules()` (and the report's **Modules** tab) adds the time up per module, as a
# tree: torch names each module instance `<Type>_<n>` (the n-th `Linear` called), and a row's
# `module` is its path from the outermost module. *Self* time is the module's own, its child
# modules' calls left out.

# %%
%%torchprof --modules -o mods
with torch.no_grad():
    for _ in range(3):
        model(torch.randn(64, 256))

# %%
# NBVAL_CHECK_OUTPUT
mods.modules()[["module", "type", "depth", "calls"]]

# %%
mods.modules()[["module", "cpu_total_us", "self_cpu_us"]]

# %% [markdown]
# ## Where a training step's time goes
#
# In a training loop, record a few steps with `--schedule` (skip, warm up, record; call
# `nbprof.step()` at the end of each step) and the report opens with a **step-time breakdown**: a
# bar per step, each instant counted once in the order kernel, memcpy, memset, CUDA runtime,
# DataLoader, CPU operators, other. Here the DataLoader reads a dataset that takes two milliseconds
# per sample (as a slow disk or decoding would), with no worker processes:

# %%
import time

import nbprof


class SlowDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(0.002)  # reading and decoding one sample
        return torch.randn(256), torch.randint(0, 10, ()).item()


loader = torch.utils.data.DataLoader(SlowDataset(), batch_size=8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)

# %%
%%torchprof --schedule 1,1,3 -o train
for xb, yb in loader:
    loss = torch.nn.functional.cross_entropy(model(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    nbprof.step()

# %% [markdown]
# `result.overview()` is the same breakdown as a table, one row per step and an `"all"` row. Most
# of each step is `dataloader_us` (16 ms a batch; the model's step takes a fraction of that on an
# idle CPU), and the advice under the bars says to load in worker processes (`num_workers=`).

# %%
ov = train.overview()
ov[["step", "duration_us", "dataloader_us", "cpu_exec_us", "other_us"]]

# %% [markdown]
# Which steps were recorded is fixed by the schedule, and the parts always add up to the step:

# %%
# NBVAL_CHECK_OUTPUT
parts = ["kernel_us", "memcpy_us", "memset_us", "runtime_us", "dataloader_us", "cpu_exec_us", "other_us"]
print(list(ov["step"]), ((ov[parts].sum(axis=1) - ov["duration_us"]).abs() < 1e-6).all())

# %% [markdown]
# ## Is the model waiting for data?
#
# Without workers, every batch is made in the loop, between two steps, and the loop waits for it
# each time. With `DataLoader(num_workers=N)`, N worker processes make batches ahead while the loop
# trains. torch's profiler (and cProfile) only see the process they run in, but nbprof records
# inside the workers too: each batch a worker made (when, in how long, how long the loop waited for
# it) and the workers' own Python functions.
#
# Here a transform takes a deliberately slow 4 ms per sample, so 32 ms a batch of 8, and the rest of
# each training step takes about 8 ms (a `time.sleep`, as waiting for a GPU would). The dataset goes
# in a file of its own: workers started with spawn or forkserver (the default on macOS and Windows,
# and on Linux from Python 3.14) import it again, and cannot import a class defined in a cell.

# %%
import os
import sys

os.makedirs("traces", exist_ok=True)
sys.path.insert(0, "traces")

# %%
%%writefile traces/slow_data.py
import time

import torch


def augment(x):
    time.sleep(0.004)  # a slow transform: decoding and resizing an image, say
    return x * 2


class Augmented(torch.utils.data.Dataset):
    def __len__(self):
        return 128

    def __getitem__(self, i):
        x = torch.randn(256, generator=torch.Generator().manual_seed(i))
        return augment(x), i % 10

# %%
from slow_data import Augmented


def train(loader):
    for xb, yb in loader:
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.008)  # the rest of the step (a GPU would be busy here)

# %% [markdown]
# First without workers, then with two. The report of the second has a **Data loading** tab: per
# worker, its batches and time per batch, then the workers' functions (`augment` among them) as
# `%%cprofile` shows a profile; its timeline gets a lane per worker with each batch being made, and
# one where the loop waited for which batch. Its findings start with `data_bound`: how long a batch
# takes to make, how often the loop asks for one, and so how many workers would keep up.

# %%
%%torchprof -q -o w0
train(torch.utils.data.DataLoader(Augmented(), batch_size=8, num_workers=0))

# %%
%%torchprof -o w2
train(torch.utils.data.DataLoader(Augmented(), batch_size=8, num_workers=2))

# %% [markdown]
# `p.data_loading()` has one row per batch: the worker that made it (`-1`: the loop itself), when,
# `make_us`, and `wait_us`, how long the loop waited for it. The first batch also waits for the
# workers to start, so compare the others:

# %%
import pandas as pd


def loading(p):
    b = p.data_loading()
    later = b[b["batch"] > 0]  # the first batch also waits for the workers to start
    return pd.Series({"workers": int(b["worker"].max()) + 1, "ms to make a batch": b["make_us"].median() / 1e3,
                      "ms the loop waited a batch": later["wait_us"].mean() / 1e3})


pd.DataFrame({"no workers": loading(w0), "2 workers": loading(w2)})

# %% [markdown]
# With two workers the loop waits less, but still waits: each worker needs about 32 ms for a batch,
# and the loop asks for one every 10 ms or so. The finding says it in numbers (and how the profiler
# itself biases them):

# %%
for message in w2.findings.loc[w2.findings["kind"] == "data_bound", "message"]:
    print(message, end="\n\n")

# %% [markdown]
# `p.worker_stats()` is the workers' functions, one row per worker and function, with `pstats`'
# columns; `augment` is called once per sample:

# %%
ws = w2.worker_stats()
ws[ws["function"] == "augment"][["worker", "function", "ncalls", "tottime_s", "cumtime_s"]]

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: the most expensive shape
#
# Which batch size makes the single most expensive `aten::addmm` call (highest `cpu_avg_us`) in
# `by_shape`? Find it from the DataFrame and store it in `costliest_batch` (an int).
#
# {{solution}}

# %% [task]
costliest_batch = None  # TODO: read it from by_shape.key_averages("shape")

# %% [solution]
rows = by_shape.key_averages("shape")
rows = rows[rows["name"] == "aten::addmm"]
top = rows.loc[rows["cpu_avg_us"].idxmax(), "input_shapes"]
costliest_batch = ast.literal_eval(top)[1][0]  # the input's first dimension

# %% [check]
rows = by_shape.key_averages("shape")
rows = rows[rows["name"] == "aten::addmm"]
top = rows.loc[rows["cpu_avg_us"].idxmax()]
truth = ast.literal_eval(top["input_shapes"])[1][0]
cheapest = rows["cpu_avg_us"].min()
if costliest_batch == truth:
    print(f"✔ Right: batch {truth}: {top['cpu_avg_us']:.0f} µs per aten::addmm call, "
          f"{top['cpu_avg_us'] / cheapest:.0f}x the cheapest call.")
else:
    print(f"✘ Not yet: you have costliest_batch={costliest_batch!r}. Sort the aten::addmm rows by cpu_avg_us.")

# %% [markdown]
# ### Exercise 2: fewer copies
#
# `preprocess` turns a batch of 8-bit images (`[N, 3, 32, 32]`, values 0-255) into normalized
# floats. It is correct, but it copies the data again and again: one image at a time, converting,
# permuting back and forth with `.contiguous()`, cloning. Profile it:

# %%
def preprocess(images):
    out = []
    for img in images:  # one image at a time
        img = img.to(torch.float32)
        img = img.permute(1, 2, 0).contiguous()  # to height, width, channels...
        img = img.permute(2, 0, 1).contiguous()  # ...and back
        img = (img / 255.0 - 0.5) / 0.25
        out.append(img.clone())
    return torch.stack(out)


images = torch.randint(0, 256, (64, 3, 32, 32), dtype=torch.uint8)

# %%
%%torchprof --sort self_cpu_us --limit 10 -o before
reference = preprocess(images)

# %% [markdown]
# Look for `aten::copy_` in the report: every `.to()`, `.contiguous()` and `.clone()` copies the
# tensor. Write `preprocess_fast` below so that it returns the same tensor with **at most half as
# many** `aten::copy_` calls (the check counts calls: unlike times, they do not vary from run to
# run, and here fewer copies is what makes it fast). Hint: the whole batch can be converted and
# normalized at once, and the permutes cancel out.
#
# {{solution}}

# %% [task]
def preprocess_fast(images):
    # TODO: remove the useless copies (this is still the slow version)
    out = []
    for img in images:
        img = img.to(torch.float32)
        img = img.permute(1, 2, 0).contiguous()
        img = img.permute(2, 0, 1).contiguous()
        img = (img / 255.0 - 0.5) / 0.25
        out.append(img.clone())
    return torch.stack(out)

# %% [solution]
def preprocess_fast(images):
    # one conversion of the whole batch (one copy), then arithmetic on the batch
    return (images.to(torch.float32) / 255.0 - 0.5) / 0.25

# %%
%%torchprof --sort self_cpu_us --limit 10 -o after
result = preprocess_fast(images)

# %% [check]
# NBVAL_CHECK_OUTPUT
def copy_calls(p):
    ka = p.key_averages()
    return int(ka.loc[ka["name"] == "aten::copy_", "count"].sum())


n0, n1 = copy_calls(before), copy_calls(after)
if not torch.allclose(result, reference):
    print("✘ Not yet: preprocess_fast returns a different tensor than preprocess.")
elif n1 <= n0 / 2:
    print(f"✔ Done: same result with {n1} aten::copy_ calls instead of {n0}.")
else:
    print(f"✘ Not yet: same result, but still {n1} aten::copy_ calls ({n0} before); the goal is at most {n0 // 2}.")

# %% [markdown]
# `nbprof.compare` shows the change operator by operator:

# %%
import nbprof

nbprof.compare(before, after)

# %% [markdown]
# ### Exercise 3: feed the loop
#
# Set `workers` to a number of DataLoader workers that keeps up with the loop, so that it waits
# for data **at most a quarter** as long per batch as it did without workers (`w0`; the check
# compares the batches after the first, from your own profiles). `w2`'s `data_bound` finding says
# how many would keep up.
#
# {{solution}}

# %% [task]
workers = 0  # TODO: how many workers keep up with the loop?

# %% [solution]
workers = 4  # a batch takes ~32 ms to make and the loop asks for one every ~10 ms: 4 keep up

# %%
%%torchprof -q -o fed
train(torch.utils.data.DataLoader(Augmented(), batch_size=8, num_workers=workers))

# %% [check]
def waited_ms(p):
    b = p.data_loading()
    return b.loc[b["batch"] > 0, "wait_us"].mean() / 1e3


no_workers_ms, with_workers_ms = waited_ms(w0), waited_ms(fed)
if workers < 1:
    print(f"✘ Not yet: with workers={workers!r} every batch is made in the loop ({with_workers_ms:.1f} ms waited a batch).")
elif with_workers_ms <= no_workers_ms / 4:
    print(f"✔ Done: with {workers} workers the loop waits {with_workers_ms:.2f} ms a batch instead of {no_workers_ms:.1f} ms.")
else:
    print(f"✘ Not yet: with {workers} workers the loop still waits {with_workers_ms:.2f} ms a batch ({no_workers_ms:.1f} ms without "
          f"workers); the goal is at most {no_workers_ms / 4:.2f} ms. Read w2's data_bound finding.")

# %% [markdown]
# ## Takeaways
#
# - Sort by **self** time to find where the time goes, by **total** time to find the expensive calls.
# - `record_function` labels make a profile speak your program's language (`forward`, `loss`, ...).
# - `--shapes --group-by shape` separates calls by input size: the same operator, very different costs.
# - Copies (`aten::copy_`, `aten::clone`, `aten::contiguous`, `aten::to`) are often pure overhead;
#   per-item loops over a tensor multiply every fixed cost by the number of items.
# - `--modules` adds the time up per `nn.Module`; with steps, the report's breakdown says whether a
#   step waits for data, the CPU or the GPU.
# - With `num_workers`, the Data loading tab and `p.data_loading()` show inside the workers: how
#   long a batch takes, how long the loop waited for it, and `data_bound` says how many workers keep up.

# %% [markdown]
# ## On Binder: free this kernel's memory
#
# Binder gives all your open notebooks about 2 GB together, and a kernel that ran this tutorial
# holds a few hundred MB (torch, pandas, the profiles). When you are done, run the cell below: on
# Binder it shuts this kernel down and frees that memory for the next tutorial (Kernel → Shut Down
# Kernel does the same); anywhere else it does nothing.

# %%
import os

if os.environ.get("BINDER_REPO_URL") or os.environ.get("BINDER_LAUNCH_HOST"):  # set on mybinder.org
    exit()  # the kernel stops; a fresh, empty one may start in its place
