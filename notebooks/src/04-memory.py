# %% [markdown]
# # Memory: who allocates, and how high the peak goes
#
# Running out of memory stops a program; on a GPU, memory is usually the first limit you hit (batch
# size, model size, sequence length). `%%torchprof --memory` records every allocation and every free
# made by PyTorch, and attributes them to the operator that made them. In this notebook you will
# read the memory columns, the memory curve, cut a computation's peak memory by a large factor, and
# find the line that keeps memory step after step.
#
# About 5 minutes, CPU only (on a GPU, the same flags record CUDA memory too).

# %%
%load_ext nbprof

# %%
import torch

torch.manual_seed(0)
MiB = 2**20  # sizes in binary units, labelled as nbprof labels them

# %% [markdown]
# ## Training keeps activations; inference does not have to
#
# A forward pass with autograd on keeps the intermediate results (the *activations*): the backward
# pass needs them. Under `torch.no_grad()` they are freed as soon as the next layer has used them.
# Compare the memory of the same forward pass, both ways:

# %%
model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(4)])
x = torch.randn(256, 512)

# %%
%%torchprof --memory -o with_grad
y_train = model(x).sum()

# %%
%%torchprof --memory -o no_grad
with torch.no_grad():
    y_infer = model(x).sum()

# %% [markdown]
# ### The memory columns
#
# - **CPU Mem**: bytes allocated minus bytes freed inside the operator *and its children*;
# - **Self CPU Mem**: the same, for the operator's own allocations only (negative when it frees more
#   than it allocates);
# - the `[memory]` row collects frees that happen outside any operator (a tensor that goes out of
#   scope in your Python code).
#
# The *Memory* tab sorts the operators by the memory they allocate and draws the **memory curve**:
# bytes allocated over time. It is nothing but the running sum of the allocation events, which you
# can compute yourself from `result.events`:

# %%
def memory_curve(p):
    """Bytes allocated since the profile started, after each allocation or free."""
    mem = p.events.query("kind == 'memory'").sort_values("start_us")
    return mem.assign(allocated=mem["bytes"].cumsum())[["start_us", "name", "bytes", "allocated"]]


def peak_bytes(p):
    curve = memory_curve(p)
    return int(curve["allocated"].max()) if len(curve) else 0


memory_curve(with_grad).tail()

# %% [markdown]
# Allocations are exact byte counts, the same on every run: a 256 × 512 float32 tensor is
# 256 · 512 · 4 = 512 KiB. With autograd on, all four layer outputs are still allocated at the end;
# without it, only what is left.

# %%
# NBVAL_CHECK_OUTPUT
for name, p in [("with grad", with_grad), ("no_grad", no_grad)]:
    curve = memory_curve(p)
    print(f"{name:>9}: peak {peak_bytes(p) / MiB:.2f} MiB, still allocated at the end {curve['allocated'].iloc[-1] / MiB:.2f} MiB")

# %% [markdown]
# The same curves as a plot, from the DataFrames (plotly):

# %%
import plotly.graph_objects as go

fig = go.Figure()
for name, p in [("with grad", with_grad), ("no_grad", no_grad)]:
    curve = memory_curve(p)
    fig.add_scatter(x=(curve["start_us"] - curve["start_us"].min()) / 1e3, y=curve["allocated"] / MiB,
                    mode="lines", line_shape="hv", name=name)
fig.update_layout(xaxis_title="time since the first allocation (ms)", yaxis_title="allocated (MiB)",
                  height=320, margin=dict(t=30, b=40, l=60, r=20))
fig

# %% [markdown]
# ## A computation with a big peak
#
# Squared distances between every row of `a` (256 points) and every row of `b` (512 points), in 64
# dimensions. The straightforward broadcast builds a `[256, 512, 64]` tensor of differences, then
# another one of their squares, before summing them away:

# %%
a = torch.randn(256, 64)
b = torch.randn(512, 64)

# %%
%%torchprof --memory --sort self_cpu_mem_bytes -o naive
d = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)

# %% [markdown]
# The operators that allocate the most, from the DataFrame:

# %%
# NBVAL_CHECK_OUTPUT
ka = naive.key_averages()
ka.sort_values("self_cpu_mem_bytes", ascending=False, kind="stable")[["name", "count", "self_cpu_mem_bytes"]].head(3)

# %% [markdown]
# **What is held at the peak?** Every allocation is paired with its free (by address):
# `naive.allocations()` lists the blocks, and `naive.alive_at(time_us, device)` the ones held at a
# moment. At the peak, both `[256, 512, 64]` tensors (32 MiB each) are alive at once: the
# differences have not been freed yet when the squares are allocated. The *Memory* tab of the
# report shows the same table under the curve.

# %%
# NBVAL_CHECK_OUTPUT
curve = memory_curve(naive)
at_peak = curve.loc[curve["allocated"].idxmax(), "start_us"]
held = naive.alive_at(at_peak, "cpu")
held[["bytes", "op", "top_op"]].head(3)

# %% [markdown]
# ## Find what stays
#
# A peak is one moment. Memory that a loop keeps *every step* is worse: it grows until the program
# runs out, however small each step's share. The classic case is one innocent-looking line: an
# evaluation loop that keeps a score per batch, without `torch.no_grad()`. `model.eval()` does not
# turn autograd off, so each score is a tensor that requires grad: it holds its autograd graph, and
# the graph holds the activations saved for a backward pass that never comes.
#
# With `--lines`, nbprof knows which line of your loop ran each operator, and where each
# iteration of the loop began: the iterations are the steps.

# %%
batches = [torch.randn(256, 512) for _ in range(8)]

# %%
%%torchprof --memory --lines -o evaluation
scores = []
for xb in batches:
    scores.append(model(xb).mean())

# %% [markdown]
# The report's finding names the line, what it keeps a step and why. The same numbers are in
# DataFrames: `memory_growth()` has one row per step (what the allocator held at its end, what
# it allocated, and what it *kept for good*: still allocated when the profile ended), and
# `alive_at_end(by="line")` what the cell left allocated, by the line that allocated it. The
# *Memory* tab shows both, and the *Source* tab a "Left alive" column. (Its `allocated_bytes`
# column, everything a step allocated, is left out below: its last few bytes are a reduction's
# scratch space, one number per thread torch runs on, so they differ from machine to machine.)

# %%
# NBVAL_CHECK_OUTPUT
evaluation.memory_growth()[["step", "added_never_freed_bytes", "never_freed_blocks"]]

# %%
# NBVAL_CHECK_OUTPUT
evaluation.alive_at_end(by="line")[["source", "blocks", "bytes"]]

# %% [markdown]
# Count it by hand: the last three layers saved their input for the backward pass (each a
# 256 × 512 float32 tensor, 512 KiB), and the score itself is 4 bytes: 3 · 524,288 + 4 =
# 1,572,868 bytes a step, exactly what each step kept. The first layer's input is your batch
# (allocated before the loop), and the last layer's output was freed once `mean()` had read it.
#
# (nbprof reads the cause from the trace: the kept blocks were made by operators that recorded
# autograd history, as torch's sequence numbers show, and no backward pass ran.)

# %%
evaluation.findings.query("kind == 'memory_growth'")["message"].tolist()

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: bytes from a shape
#
# `aten::sub` allocates the `[256, 512, 64]` tensor of differences. How many bytes is that? Compute
# it from the shape and the size of one float32 element (`torch.float32.itemsize`, or
# `tensor.element_size()`), and store it in `diff_bytes`.
#
# {{solution}}

# %% [task]
diff_bytes = None  # TODO: number of elements × bytes per element

# %% [solution]
diff_bytes = 256 * 512 * 64 * torch.float32.itemsize  # 8,388,608 elements × 4 bytes

# %% [check]
# NBVAL_CHECK_OUTPUT
ka = naive.key_averages().set_index("name")
recorded = int(ka.loc["aten::sub", "self_cpu_mem_bytes"])
if diff_bytes == recorded:
    print(f"✔ Right: {recorded:,} bytes ({recorded / MiB:.0f} MiB), exactly what the profile recorded for aten::sub.")
else:
    print(f"✘ Not yet: you have diff_bytes={diff_bytes!r}; the profile recorded {recorded:,} bytes for aten::sub.")

# %% [markdown]
# ### Exercise 2: cut the peak by 4×
#
# Write `sq_distances(a, b)` so that it returns the same `[256, 512]` result (up to float rounding)
# with a peak at least **4× lower** than the naive version's. Hint: the result itself is only 512 KiB;
# avoid the `[256, 512, 64]` intermediates. Either expand the square,
# ‖a − b‖² = ‖a‖² + ‖b‖² − 2 a·b (a matrix multiply), or use `torch.cdist`.
#
# {{solution}}

# %% [task]
def sq_distances(a, b):
    # TODO: avoid building the [256, 512, 64] tensors
    return ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)

# %% [solution]
def sq_distances(a, b):
    # ||a||^2 + ||b||^2 - 2 a.b: the largest tensor is the [256, 512] result itself
    return (a * a).sum(1, keepdim=True) + (b * b).sum(1) - 2 * a @ b.T

# %%
%%torchprof --memory -o better
d_better = sq_distances(a, b)

# %% [check]
# NBVAL_CHECK_OUTPUT
before, after = peak_bytes(naive), peak_bytes(better)
if not torch.allclose(d_better, d, rtol=1e-4, atol=1e-3):
    print("✘ Not yet: sq_distances gives a different result than the naive version.")
elif after * 4 <= before:
    print(f"✔ Done: same result; peak {before / MiB:.1f} MiB → {after / MiB:.1f} MiB ({before / after:.0f}x lower).")
else:
    print(f"✘ Not yet: same result, but the peak is {after / MiB:.1f} MiB vs {before / MiB:.1f} MiB before; "
          f"the goal is {before / 4 / MiB:.1f} MiB or less.")

# %% [markdown]
# ### Exercise 3: keep the number, not the graph
#
# Change the loop so that it keeps the same scores (as numbers) but no memory: nothing it
# allocates should stay once it is done. Hint: `torch.no_grad()` around the loop, and `.item()`
# to keep a Python float instead of a tensor (either alone is enough here; both is the habit).
#
# {{solution}}

# %% [task]
%%torchprof --memory --lines -o fixed
scores_fixed = []
for xb in batches:
    scores_fixed.append(model(xb).mean())  # TODO: keep the number, not the graph

# %% [solution]
%%torchprof --memory --lines -o fixed
scores_fixed = []
with torch.no_grad():
    for xb in batches:
        scores_fixed.append(model(xb).mean().item())

# %% [check]
# NBVAL_CHECK_OUTPUT
growth = fixed.memory_growth()
kept = int(growth["added_never_freed_bytes"].sum()) if len(growth) else None
number = lambda s: float(s.detach()) if torch.is_tensor(s) else float(s)  # noqa: E731
same = len(scores_fixed) == len(scores) and all(abs(number(a) - number(b)) < 1e-6 for a, b in zip(scores_fixed, scores))
if kept is None:
    print("✘ Not yet: run the loop under %%torchprof --memory --lines -o fixed, so that its steps are known.")
elif not same:
    print("✘ Not yet: the loop's scores differ from the first loop's.")
elif "memory_growth" in set(fixed.findings["kind"]) or kept > 1024:
    print(f"✘ Not yet: the steps still kept {kept:,} bytes ({kept // len(growth):,} a step); "
          "each score still holds its graph.")
else:
    before = int(evaluation.memory_growth()["added_never_freed_bytes"].sum())
    print(f"✔ Done: same scores; the steps kept {kept:,} bytes (before: {before:,}).")

# %% [markdown]
# ## Takeaways
#
# - `--memory` attributes every allocation to an operator: sort by *Self CPU Mem* (or *Self CUDA
#   Mem*) to find who allocates.
# - The peak is what makes a program run out of memory; the memory curve shows when it happens.
# - Broadcasting can silently build huge intermediates; rewriting the math (or using a fused
#   operator such as `torch.cdist`) avoids them.
# - For inference, `torch.no_grad()` (or `torch.inference_mode()`) lets PyTorch free activations
#   right away.
# - Memory that grows every step is a leak: `--memory --lines` finds the line (the `memory_growth`
#   finding, `memory_growth()`, `alive_at_end(by="line")`). A tensor that requires grad, kept across
#   steps, keeps its whole graph: keep `.item()` or `.detach()`.
# - On a GPU, look at the CUDA memory columns; the report's summary also shows the caching
#   allocator's *reserved* memory, which is what `nvidia-smi` sees.

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
