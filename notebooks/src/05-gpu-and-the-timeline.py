# %% [markdown]
# # The GPU and the timeline
#
# On a GPU, PyTorch code runs in two places at once. The CPU runs your Python code and the
# operators, and each operator **launches kernels**: small programs queued on a **stream** of the
# GPU, which runs them later, in order. The CPU does not wait (unless you ask for a result), so a
# profile has two sides: CPU operators and CUDA runtime calls (`cudaLaunchKernel`, …) on one side,
# kernels, copies and memsets on the GPU's streams on the other.
#
# This notebook reads both sides: kernels, streams, host-device copies, and the timeline that
# shows them together.
#
# **No GPU? No problem.** nbprof ships profiles recorded on an NVIDIA H100 (`nbprof/data/`), and
# `nbprof.load_trace` turns a recorded trace into the same result object as a live profile, so every
# table and view below works on them. Cells marked *(needs a GPU)* profile live when a GPU is there
# and say so when not.

# %%
%load_ext nbprof

# %%
from importlib.resources import files

import torch

import nbprof

HAS_GPU = torch.cuda.is_available()
DATA = files("nbprof") / "data"  # the recorded traces, installed with nbprof
print("GPU:", torch.cuda.get_device_name() if HAS_GPU else "none here: the recorded H100 traces stand in")
sorted(p.name for p in DATA.iterdir() if p.name.endswith(".trace.json.gz"))

# %% [markdown]
# ## A recorded training run
#
# `cnn_train_cuda`: a small 4-block CNN, 3 SGD steps, with `record_function` labels for the phases
# (`train_step`, `forward`, `backward`, `optimizer`), recorded with CUDA, shapes and memory.
# Displaying the result shows the report, with CUDA columns and the *Kernels* tab filled, then the
# zoomable timeline.

# %%
train = nbprof.load_trace(DATA / "cnn_train_cuda.trace.json.gz")
train

# %% [markdown]
# ### Reading the GPU side of the report
#
# - **Self CUDA** of an operator: the time of the kernels it launched itself (an operator's CPU time
#   and its kernels' GPU time are unrelated numbers: one is launching, the other is running).
# - **Kernels** rows (names like `sm80_xmma_…` or `void at::native::…`) are the GPU programs; the
#   *Kernels* tab lists them with the operator that launched each one and its stream.
# - **GPU busy**: the share of the profile during which the GPU ran anything. Here it is tiny: the
#   findings above the tabs say why.

# %%
train.findings[["kind", "severity", "message"]]

# %% [markdown]
# ## Kernels, from the events
#
# `train.events` has one row per event. A kernel row has the GPU `stream`; the `correlation` number
# links it to the runtime call that launched it on the CPU (`cudaLaunchKernel`), whose `parent` is
# the operator. So "which operator launched this kernel" is two look-ups:

# %%
ev = train.events


def launched_by(events):
    """For each kernel row: the name of the CPU operator that launched it."""
    runtime = events[events["kind"] == "runtime"]
    parent_of = dict(zip(runtime["correlation"], runtime["parent"]))
    kernels = events[events["kind"] == "kernel"]
    parents = [parent_of.get(c, -1) for c in kernels["correlation"]]
    return kernels.assign(op=[events.at[p, "name"] if p >= 0 else "?" for p in parents])


kernels = launched_by(ev)
top = (kernels.groupby(["op", "name"], as_index=False)
       .agg(count=("dur_us", "size"), gpu_us=("dur_us", "sum"))
       .sort_values("gpu_us", ascending=False, kind="stable"))
top["name"] = top["name"].str.slice(0, 50)
top.head(5)

# %% [markdown]
# A recorded trace never changes, so these facts can be checked exactly:

# %%
# NBVAL_CHECK_OUTPUT
print(f"{len(kernels)} kernels on streams {sorted(int(s) for s in kernels['stream'].unique())}, launched by {kernels['op'].nunique()} operators")
print("most GPU time:", top.iloc[0]["op"], f"({top.iloc[0]['count']} kernels, {top.iloc[0]['gpu_us']:.1f} µs)")

# %% [markdown]
# ## How the kernels were launched
#
# `train.kernels()` is the *Kernels* tab as a DataFrame: one row per kernel name, with what CUPTI
# recorded about each launch. `grid` × `block` is how many threads the kernel started;
# `blocks_per_sm` below 1 means the kernel had fewer blocks than the H100 has SMs (132), so part of
# the GPU sat idle while it ran; `occupancy_pct` is CUPTI's estimate of how full each SM was. This
# small CNN's kernels are tiny: most use a few percent of the GPU.

# %%
# NBVAL_CHECK_OUTPUT
train.kernels()[["name", "count", "device_total_us", "grid", "block", "blocks_per_sm", "occupancy_pct"]].head(5).round(2)

# %% [markdown]
# The *Kernels* tab sums it up per GPU (TensorBoard's "Est. SM Efficiency" and "Est. Achieved
# Occupancy"); `train.device_stats.devices` has the numbers:

# %%
# NBVAL_CHECK_OUTPUT
train.device_stats.devices[["device", "busy_fraction", "sm_efficiency", "achieved_occupancy_pct"]].round(3)

# %% [markdown]
# ## Tensor Cores, copies, and two runs kernel by kernel
#
# ### Tensor Cores
#
# Since Volta (compute capability 7.0) NVIDIA GPUs have **Tensor Cores**: units that multiply small
# matrices many times faster than the ordinary CUDA cores, for half precision (float16, bfloat16),
# and since Ampere (8.0) for float32 data rounded to **TF32**. A matmul or a convolution only uses
# them when its data type allows it, and the kernel's name says which path it took.
# `kernels()["tensor_cores"]` reads that name, as the TensorBoard plugin did (with nbprof's
# corrections for today's cuDNN and cuBLAS names). In the CNN, the weight-gradient convolution
# runs on the Tensor Cores in TF32 (`..._tf32f32_..._tensor16x8x8_...`: cuDNN allows TF32 by
# default), while the forward and input-gradient convolutions and the linear layer's matmul say
# `ffma` (float32 multiply-adds on the CUDA cores), and cuBLAS's small `gemmSN` kernels use the CUDA
# cores too:

# %%
# NBVAL_CHECK_OUTPUT
k = train.kernels()
mma = k[k["name"].str.contains("gemm|xmma")][["name", "count", "device_total_us", "share", "tensor_cores"]]
mma.assign(name=mma["name"].str.slice(0, 60)).round(3)

# %% [markdown]
# Per GPU, `device_stats.devices["tensor_core_pct"]` is the Tensor Cores' share of the kernel time
# (the *Kernels* tab shows it above the table). In `two_streams` the work is one float32
# 1024 × 1024 matmul, on the CUDA cores:

# %%
# NBVAL_CHECK_OUTPUT
mm = nbprof.load_trace(DATA / "two_streams.trace.json.gz")
for name, p in (("cnn_train_cuda", train), ("two_streams", mm)):
    d = p.device_stats.devices.iloc[0]
    print(f"{name}: {d['device']}, Tensor Cores {d['tensor_core_pct']:.1f}% of {d['kernel_us']:.1f} µs of kernels")

# %% [markdown]
# That is what the `tensor_cores` finding is about. It speaks only when the advice applies: the
# trace's GPU has Tensor Cores, the matmuls and convolutions mostly run without them, and their
# inputs are float32 (`--shapes` records the dtypes; the finding says when they are unknown):

# %%
# NBVAL_CHECK_OUTPUT
f = mm.findings
print(f.loc[f["kind"] == "tensor_cores", "message"].iloc[0])

# %% [markdown]
# ### Copy bandwidth *(needs a GPU)*
#
# Copies get `bandwidth_gbps` in `kernels()`: bytes over their GPU time, in GB/s. A host-to-device
# copy from ordinary (**pageable**) memory goes through a staging buffer the driver fills on the CPU;
# from **pinned** memory the GPU reads it directly, about twice as fast on a PCIe link. The
# recorded traces have no copies; with a GPU this cell copies 64 MiB both ways:

# %%
%%torchprof -q -o transfers
if HAS_GPU:
    x_pageable = torch.randn(4096, 4096)
    x_pinned = x_pageable.pin_memory()
    for _ in range(3):
        x_pageable.to("cuda")
        x_pinned.to("cuda", non_blocking=True)
    torch.cuda.synchronize()

# %%
tk = transfers.kernels()
if HAS_GPU:
    display(tk[tk["kind"] == "memcpy"][["name", "count", "bytes", "device_total_us", "bandwidth_gbps"]])
else:
    print("(needs a GPU: with one, this shows a pageable and a pinned HtoD copy and the GB/s each reached)")

# %% [markdown]
# ### Two runs, kernel by kernel
#
# `nbprof.compare(before, after)` compares two profiles operator by operator; `by="kernel"` compares
# their kernels (HTA's trace diff, the TensorBoard plugin's diff view): calls, GPU time and share,
# before and after. The two CNN traces ran the same model: `cnn_train_cuda` three training steps
# (forward, loss, backward, SGD), `cnn_cuda_toggled` three forward/backward passes with the kernels
# of only two recorded. So the model's kernels show 12 calls before and 8 after, about 1.5 times
# less GPU time, and the loss's and the optimizer's kernels are `removed`:

# %%
toggled = nbprof.load_trace(DATA / "cnn_cuda_toggled.trace.json.gz")
by_kernel = nbprof.compare(train, toggled, by="kernel", limit=5)
by_kernel

# %%
# NBVAL_CHECK_OUTPUT
t = by_kernel.table
t.assign(name=t["name"].str.slice(0, 40))[["name", "status", "count_before", "count_after",
                                           "device_total_us_before", "device_total_us_after", "speedup"]].head(5).round(2)

# %% [markdown]
# ## The timeline
#
# The report above ends with the timeline: one lane per CPU thread and per GPU stream, time from
# left to right. Drag to zoom into a region, double-click to zoom out, hover a box for its name and
# duration. Look for:
#
# - **gaps in the stream lanes**: the GPU is idle, usually waiting for the CPU to launch more work;
# - **thin kernels** under long CPU operators: the GPU finishes each kernel faster than the CPU
#   can launch the next one (the profile is *launch bound*);
# - the `record_function` labels on the CPU side (`forward`, `backward`, …) and their GPU
#   counterparts, which tell which phase each kernel belongs to.
#
# `result.timeline()` returns the same picture as a plotly `Figure` (to keep, restyle or save with
# `fig.write_html(...)`); `window_us=(start_us, end_us)` draws one part in full detail. The second
# training step:

# %%
train.timeline(window_us=(9_800, 13_600))

# %% [markdown]
# ## The live timeline
#
# While the kernel runs, the timeline under a report is *live*: it asks the kernel again whenever
# you zoom or pan. A big profile is first drawn merged to pixel resolution (a strip of thin events
# becomes pixel-wide boxes named after their main op); zoom in and the window is drawn again, box
# by box, from the events themselves. On top of that:
#
# - **counter tracks** above the lanes: *GPU busy* (the share of each time bin when any stream ran
#   a kernel, memcpy or memset; overlapping streams count once) and *allocated MiB* (with
#   `--memory`, each bin's peak);
# - **Select span**, then drag across the timeline: a table under it lists the operators and
#   kernels in that span, with the time each spent inside it;
# - **hover** a `cudaLaunchKernel` or a kernel: an arrow joins the launch and the kernel it queued
#   (they share a CUPTI correlation id), so the launch delay shows as the arrow's slope;
# - **find by name**: type part of a name; matching boxes keep their color, the rest fade, and the
#   line next to the box says how many events match and their total time.
#
# `result.timeline_view().live()` makes the widget directly. Saved and reopened without a kernel
# (nbviewer, GitHub, an HTML export), the output is the static drawing.

# %%
live = train.timeline_view().live()
live

# %% [markdown]
# The widget's answers come from the kernel, and `live.state` gives them in code too. The find
# box's line for "conv":

# %%
# NBVAL_CHECK_OUTPUT
print(live.state.find("conv"))

# %% [markdown]
# ## Streams
#
# Kernels on one stream run one after another; kernels on different streams may run at the same
# time. `two_streams` was recorded with a matrix multiply on one stream and elementwise work on
# another, three times:

# %%
# NBVAL_CHECK_OUTPUT
streams = nbprof.load_trace(DATA / "two_streams.trace.json.gz")
sk = launched_by(streams.events)
sk.groupby(["stream", "op"]).agg(kernels=("name", "size"), gpu_us=("dur_us", "sum")).round(1)

# %%
streams.timeline()

# %% [markdown]
# ## Host-device copies *(needs a GPU)*
#
# `tensor.to("cuda")` copies from host (CPU) memory to the GPU (a **memcpy HtoD** on a stream);
# `.cpu()`, `.item()` or printing a CUDA tensor copy back (**DtoH**) and make the CPU **wait** for
# the GPU to finish everything queued before: a synchronization. Copies from pinned memory
# (`pin_memory()`) with `non_blocking=True` do not block the CPU.
#
# The recorded traces above have no copies (their data was created on the GPU). With a GPU, this
# cell records some; the table after it lists them (`kind == "memcpy"`).

# %%
%%torchprof -q -o copies
x_host = torch.randn(1024, 1024)
if HAS_GPU:
    for _ in range(3):
        x_dev = x_host.to("cuda")  # host -> device
        total = (x_dev * 2).sum().item()  # device -> host, and the CPU waits for the GPU

# %%
ce = copies.events
if HAS_GPU:
    display(ce[ce["kind"] == "memcpy"][["name", "stream", "dur_us", "bytes"]])
else:
    print("(needs a GPU: this machine recorded no copies; with one, this shows each memcpy with its "
          "direction, stream, duration and bytes)")

# %% [markdown]
# ## Turning CUDA collection off and on
#
# Recording every kernel costs time and makes big traces. Inside a profiled cell,
# `nbprof.cuda_collection(False)` pauses the recording of GPU activity (CPU operators are still
# recorded) and `nbprof.cuda_collection(True)` resumes it. Use it to keep a warm-up or an
# uninteresting phase out of the GPU side of the profile.
#
# The recorded `cnn_cuda_toggled` ran three forward/backward passes of the CNN with CUDA collection
# off during the second:

# %%
toggled = nbprof.load_trace(DATA / "cnn_cuda_toggled.trace.json.gz")
toggled.timeline()

# %% [markdown]
# Two gaps in the stream lane, for two different reasons. The long one, from about 6 to 24 ms, is in
# the **first** pass: in its backward pass one `aten::copy_` spends 18 ms on the CPU while CUDA
# loads kernel code on first use (the "Lazy Function Loading" events), and the GPU has nothing to
# do; later passes do not pay that again. The second pass runs from about 26 to 29 ms: its CPU
# operators are there, its kernels are not, because collection was off. Zoomed in:

# %%
toggled.timeline(window_us=(24_500, 35_300))

# %% [markdown]
# The numbers: each pass starts with its first `aten::conv2d`; count the CPU operators and the
# kernel launches in each pass.

# %%
import numpy as np
import pandas as pd


def per_pass(p, n_passes=3, convs_per_pass=4):
    e = p.events
    conv = e[(e["name"] == "aten::conv2d") & (e["parent"] == -1)].sort_values("start_us")
    edges = list(conv["start_us"].to_numpy()[::convs_per_pass][:n_passes]) + [np.inf]
    labels = [f"pass {i + 1}" for i in range(n_passes)]
    device = e[e["kind"].isin(["kernel", "memcpy", "memset"])]
    launches = e[(e["kind"] == "runtime") & e["correlation"].isin(device["correlation"])]
    cut = lambda s: pd.cut(s, edges, right=False, labels=labels).value_counts(sort=False)  # noqa: E731
    table = pd.DataFrame({"cpu_ops": cut(e.loc[e["kind"] == "op", "start_us"]),
                          "kernel_launches": cut(launches["start_us"])})
    return table.rename_axis("pass")

# %%
# NBVAL_CHECK_OUTPUT
per_pass(toggled)

# %% [markdown]
# The code that recorded it looks like this. Run it with a GPU to get your own *(needs a GPU; here
# is the recorded result without one)*:

# %%
torch.manual_seed(0)
device = "cuda" if HAS_GPU else "cpu"
cnn = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
    torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
    torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
    torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10),
).to(device)
images = torch.randn(8, 3, 32, 32, device=device)


def one_pass():
    cnn(images).sum().backward()

# %%
%%torchprof -q -o live_toggled
for i in range(3):
    nbprof.cuda_collection(i != 1)  # off for the second pass
    one_pass()
nbprof.cuda_collection(True)

# %%
if HAS_GPU:
    display(per_pass(live_toggled))
else:
    print("(needs a GPU; here is the recorded result)")
    display(per_pass(toggled))

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: who launched the most expensive kernels?
#
# In the `train` profile, which CPU operator launched the kernels with the most GPU time in total
# (summed over all their kernels)? Use `launched_by(train.events)` and a `groupby`; store the
# operator's name in `busiest_op`.
#
# {{solution}}

# %% [task]
busiest_op = None  # TODO

# %% [solution]
k = launched_by(train.events)
busiest_op = k.groupby("op")["dur_us"].sum().idxmax()

# %% [check]
# NBVAL_CHECK_OUTPUT
per_op = launched_by(train.events).groupby("op")["dur_us"].sum().sort_values(ascending=False)
if busiest_op == per_op.index[0]:
    print(f"✔ Right: {per_op.index[0]} launched {per_op.iloc[0]:.1f} µs of kernels, "
          f"{per_op.iloc[0] / per_op.sum():.0%} of all GPU time.")
else:
    print(f"✘ Not yet: you have {busiest_op!r}. Group the kernels by the 'op' column and sum 'dur_us'.")

# %% [markdown]
# ### Exercise 2: launch bound?
#
# A GPU profile is *launch bound* when launching a kernel takes the CPU longer than running it takes
# the GPU: the GPU waits for work. In `train`, compute the **median** duration of the kernels
# (`kind == "kernel"`) and of the `cudaLaunchKernel` calls (`kind == "runtime"`, that name), in µs,
# and store them in `kernel_median_us` and `launch_median_us`.
#
# {{solution}}

# %% [task]
kernel_median_us = None  # TODO
launch_median_us = None  # TODO

# %% [solution]
e = train.events
kernel_median_us = e.loc[e["kind"] == "kernel", "dur_us"].median()
launch_median_us = e.loc[(e["kind"] == "runtime") & (e["name"] == "cudaLaunchKernel"), "dur_us"].median()

# %% [check]
# NBVAL_CHECK_OUTPUT
e = train.events
truth_k = e.loc[e["kind"] == "kernel", "dur_us"].median()
truth_l = e.loc[(e["kind"] == "runtime") & (e["name"] == "cudaLaunchKernel"), "dur_us"].median()
if kernel_median_us is None or launch_median_us is None:
    print("✘ Not yet: set kernel_median_us and launch_median_us.")
elif abs(kernel_median_us - truth_k) < 1e-6 and abs(launch_median_us - truth_l) < 1e-6:
    print(f"✔ Right: a median kernel runs {truth_k:.2f} µs, a median launch takes {truth_l:.2f} µs: "
          f"{'launch bound: the GPU waits for the CPU' if truth_l > truth_k else 'not launch bound'}. "
          "Bigger batches, torch.compile or CUDA graphs give each launch more work.")
else:
    print(f"✘ Not yet: you have kernel {kernel_median_us!r} µs, launch {launch_median_us!r} µs; filter the rows by "
          "'kind' (and 'name' for the launches) and take .median() of 'dur_us'.")

# %% [markdown]
# ## Takeaways
#
# - A GPU profile has a CPU side (operators, launches) and a GPU side (kernels, copies on streams);
#   `correlation` links a launch to its kernel.
# - GPU time is wasted in the gaps: look at *GPU busy*, the findings and the stream lanes of the
#   timeline before optimizing any kernel.
# - Copies to and from the GPU, and `.item()` / `.cpu()`, can make the CPU wait: keep data on the
#   GPU, use pinned memory and `non_blocking=True`.
# - `nbprof.cuda_collection(False/True)` limits the GPU recording to the part you care about.
# - A recorded trace (`nbprof.load_trace`) gives the same tables and views as a live profile.

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
