# %% [markdown]
# # Profiling Lightning and Accelerate training
#
# Most training code does not write its loop by hand: it calls `trainer.fit()` (PyTorch Lightning)
# or wraps a loop in an `Accelerator` (Hugging Face Accelerate). Both bring profilers of their own:
# Lightning's *simple* profiler prints a table of its hooks, the *advanced* one a cProfile per hook,
# Accelerate's `accelerator.profile()` runs torch's profiler. nbprof works with all of them and
# shows their structure in one report:
#
# - `%%torchprof` around `trainer.fit()` shows every Lightning hook as a range, with the operators
#   under it: Lightning's simple profiler, nested, with the time of each operator;
# - `Trainer(profiler=nbprof.lightning.Profiler())` does the same from inside the trainer;
# - `%%cprofile` around `trainer.fit()` groups the Python calls by the hook they ran under;
# - `nbprof.from_profiler(prof)` shows a profile that Accelerate (or your own code) recorded.
#
# About 5 minutes, CPU only, a tiny model and a few steps.

# %%
%load_ext nbprof

# %%
import logging
import warnings

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

import nbprof

# quiet: Lightning's start-up messages and its advice for long runs (more dataloader workers, ...)
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
warnings.filterwarnings("ignore", module="lightning")
warnings.filterwarnings("ignore", message=".*(treespec|does not have many workers)")


class Regressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(512, 64), torch.randn(512, 1)), batch_size=32)


def make_trainer(**options):
    """A small trainer: one epoch of 8 batches on the CPU, nothing written to disk."""
    return L.Trainer(max_epochs=1, limit_train_batches=8, accelerator="cpu", logger=False,
                     enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, **options)


make_trainer().fit(Regressor(), loader)  # once, unprofiled: first-time set-up costs stay out of the profiles

# %% [markdown]
# ## `%%torchprof` around `trainer.fit()`
#
# Lightning names everything its trainer does (each hook of your `LightningModule`, of the callbacks
# and of the strategy, fetching a batch, a training batch, the epoch) and hands the names to its
# profiler. While `%%torchprof` runs, nbprof has Lightning's default profiler mark each of them as a
# `record_function` range: nothing to change in the trainer. The whole fit is one more range,
# `[Trainer].fit`. The report opens on its **Ranges** tab: the hooks, nested as they ran, with how
# many times each ran, its mean and total time, its share of the fit and the operators under it.

# %%
%%torchprof -o fit_profile
make_trainer().fit(Regressor(), loader)

# %% [markdown]
# The table is data (`fit_profile.ranges()`). Sorted by total time, it is the table Lightning's
# simple profiler prints, with one more column: `share_of_root`, the share of the fit.
# `run_training_batch` holds `optimizer_step`, which holds `training_step` and `backward`: the
# optimizer runs the training step in a closure, so those hooks nest inside it.

# %%
hooks = fit_profile.ranges()
hooks.sort_values("total_us", ascending=False)[["label", "count", "mean_us", "total_us", "share_of_root"]].head(10)

# %% [markdown]
# How many times each hook ran depends on the trainer, not on the machine: 8 batches, one epoch.
# These counts are exactly those of Lightning's own `SimpleProfiler` for the same fit.

# %%
# NBVAL_CHECK_OUTPUT
calls = hooks.groupby("label", sort=False)["count"].sum()
calls[["[Trainer].fit", "run_training_epoch", "run_training_batch", "[_TrainingEpochLoop].train_dataloader_next",
       "[Strategy]SingleDeviceStrategy.training_step", "[Strategy]SingleDeviceStrategy.backward",
       "[LightningModule]Regressor.optimizer_step", "[LightningModule]Regressor.on_train_batch_end"]]

# %%
simple = L.pytorch.profilers.SimpleProfiler()
make_trainer(profiler=simple).fit(Regressor(), loader)
lightnings = {action: len(times) for action, times in simple.recorded_durations.items()}
same = all(calls.get(action) == n for action, n in lightnings.items())
print(f"{len(lightnings)} actions in Lightning's SimpleProfiler, the same counts here: {same}")

# %% [markdown]
# What did a hook spend its time on? `range_ops(label)` lists the operators that ran while it was
# open (any part of a label names it, if only one label has it): here the forward pass of the
# training step. In the report, the *Top operators* column says the same for every hook.

# %%
fit_profile.range_ops("training_step").head(5)

# %%
# NBVAL_CHECK_OUTPUT
fit_profile.range_ops("training_step").set_index("name").loc[["aten::linear", "aten::addmm", "aten::relu",
                                                               "aten::mse_loss"], "count"]

# %% [markdown]
# ## Inside the trainer: `nbprof.lightning.Profiler()`
#
# A Lightning user passes a profiler to the trainer: `Trainer(profiler="simple")`. nbprof's is
# `nbprof.lightning.Profiler()`: it profiles the fit by itself and shows the report when the fit ends,
# with the same Ranges tab. It takes `%%torchprof`'s options as arguments (`memory=True`,
# `shapes=True`, `stack=True`, `export="trace.json.gz"`, ...; `schedule=(1, 1, 3)` records three
# batches of a long fit); the profile stays in `trainer.profiler.result`. Inside `%%torchprof` or `%%cprofile` it starts no profiler of its own:
# the cell's records its hooks.

# %%
trainer = make_trainer(profiler=nbprof.lightning.Profiler(shapes=True))
trainer.fit(Regressor(), loader)

# %%
# NBVAL_CHECK_OUTPUT
by_shape = trainer.profiler.result.key_averages("shape")
by_shape[by_shape["name"] == "aten::addmm"][["name", "input_shapes", "count"]].reset_index(drop=True)

# %% [markdown]
# ## `%%cprofile` around `trainer.fit()`: Python calls by hook
#
# Lightning's *advanced* profiler runs one cProfile per hook. `%%cprofile` does that for you while
# Lightning's default profiler is in place: each call is counted under the hook that was running
# when it was made, and the report's **Actions** tab lists the hooks by their own time, each with
# its busiest functions. The other tabs (functions, callers, flame) are the whole fit's, as always.
# (With `Trainer(profiler="advanced")` Lightning's cProfile replaces nbprof's at its first hook:
# the report then says so, and covers the time before it.)

# %%
%%cprofile -o py_fit
make_trainer().fit(Regressor(), loader)

# %%
# NBVAL_CHECK_OUTPUT
py_fit.actions()[["action", "count"]].head(12)

# %%
py_fit.action_stats("SingleDeviceStrategy.training_step").sort_values("tottime_s", ascending=False).head(5)

# %% [markdown]
# ## Accelerate: `nbprof.from_profiler(prof)`
#
# Accelerate's `with accelerator.profile() as prof:` runs torch's profiler with the settings of its
# `ProfileKwargs`. `nbprof.from_profiler(prof)` turns the finished profiler into the same report and
# tables as `%%torchprof`: the same numbers as torch's `prof.key_averages()`. (It works on any
# finished `torch.profiler.profile`: one from a script, or Lightning's `PyTorchProfiler`.)

# %%
from accelerate import Accelerator
from accelerate.utils import ProfileKwargs

accelerator = Accelerator(cpu=True, kwargs_handlers=[ProfileKwargs(activities=["cpu"], record_shapes=True)])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
model, optimizer, acc_loader = accelerator.prepare(model, optimizer, loader)


def accelerate_steps(steps):
    for step, (x, y) in enumerate(acc_loader):
        if step == steps:
            break
        optimizer.zero_grad()
        accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
        optimizer.step()


accelerate_steps(2)  # warm up
with accelerator.profile() as prof:
    accelerate_steps(4)
acc_profile = nbprof.from_profiler(prof)
acc_profile

# %%
# NBVAL_CHECK_OUTPUT
ours = acc_profile.key_averages().set_index("name")["count"]
torchs = {e.key: e.count for e in prof.key_averages()}
print("the same counts as torch's key_averages():", all(torchs[name] == n for name, n in ours.items()))
print("optimizer steps:", ours["Optimizer.step#SGD.step"])

# %% [markdown]
# For long runs, give `ProfileKwargs` a schedule and `on_trace_ready=nbprof.trace_handler()`: each
# recorded cycle is shown as it ends (and, with a folder, saved for `nbprof.load_trace`).
#
# ## Exercises
#
# ### Exercise 1: gradient accumulation
#
# With `accumulate_grad_batches=N`, Lightning adds up the gradients of N batches before each
# optimizer step: fewer optimizer steps for the same batches. Make the trainer below accumulate the
# gradients of **2** batches, profile the fit, and see it in the hook table: the training step still
# runs once per batch, the optimizer step once every two.
#
# {{solution}}

# %% [task]
%%torchprof -q -o ex1
make_trainer().fit(Regressor(), loader)  # TODO: accumulate the gradients of 2 batches

# %% [solution]
%%torchprof -q -o ex1
make_trainer(accumulate_grad_batches=2).fit(Regressor(), loader)

# %% [check]
# NBVAL_CHECK_OUTPUT
counts = ex1.ranges().groupby("label")["count"].sum()
steps = int(counts.get("[LightningModule]Regressor.optimizer_step", 0))
batches = int(counts.get("[Strategy]SingleDeviceStrategy.training_step", 0))
if batches == 8 and steps == 4:
    print(f"✔ Done: {batches} training steps, {steps} optimizer steps: one every 2 batches.")
else:
    print(f"✘ Not yet: {batches} training steps and {steps} optimizer steps; the goal is 8 and 4 "
          "(make_trainer(accumulate_grad_batches=2)).")

# %% [markdown]
# ### Exercise 2: a callback is a hook too
#
# The callback below measures the gradients' norm after each backward pass, a common check for
# exploding gradients. Pass it to the trainer (`callbacks=[GradNorm()]`) and profile the fit with
# `%%cprofile`: its hook shows up among the actions, with the functions it called.
#
# {{solution}}

# %%
class GradNorm(L.Callback):
    def on_after_backward(self, trainer, pl_module):
        grads = [p.grad for p in pl_module.parameters() if p.grad is not None]
        self.norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))

# %% [task]
%%cprofile -q -o ex2
make_trainer().fit(Regressor(), loader)  # TODO: with the GradNorm callback

# %% [solution]
%%cprofile -q -o ex2
make_trainer(callbacks=[GradNorm()]).fit(Regressor(), loader)

# %% [check]
# NBVAL_CHECK_OUTPUT
actions = ex2.actions().set_index("action")["count"]
hook = "[Callback]GradNorm.on_after_backward"
if hook in actions.index:
    called = set(ex2.action_stats(hook)["function"])
    print(f"✔ Done: {hook} ran {actions[hook]} times, once per batch; it called "
          f"{'vector_norm' if any('vector_norm' in f for f in called) else 'no norm'}.")
else:
    print(f"✘ Not yet: no {hook} among the {len(actions)} actions: pass callbacks=[GradNorm()] to make_trainer.")

# %% [markdown]
# ### Exercise 3: show Accelerate's profile
#
# The cell below profiles 3 steps with Accelerate's profiler. Turn `prof3` into an nbprof profile
# named `acc3`, so that the check can read its tables.
#
# {{solution}}

# %%
with accelerator.profile() as prof3:
    accelerate_steps(3)

# %% [task]
acc3 = None  # TODO: the nbprof profile of prof3

# %% [solution]
acc3 = nbprof.from_profiler(prof3)

# %% [check]
# NBVAL_CHECK_OUTPUT
if acc3 is None:
    print("✘ Not yet: acc3 is None; nbprof.from_profiler(prof3) turns a finished profiler into a profile.")
else:
    opt_steps = int(acc3.key_averages().set_index("name")["count"].get("Optimizer.step#SGD.step", 0))
    print(f"✔ Done: {opt_steps} optimizer steps in acc3, as in torch's own table." if opt_steps == 3 else
          f"✘ Not yet: {opt_steps} optimizer steps in acc3; the profile of prof3 has 3.")

# %% [markdown]
# ## Takeaways
#
# - `%%torchprof` around `trainer.fit()` shows Lightning's hooks as ranges (nothing to change in the
#   trainer): calls, mean, total, share of the fit and the operators under each, as data in
#   `ranges()` and `range_ops(label)`.
# - `Trainer(profiler=nbprof.lightning.Profiler())` profiles the fit from inside the trainer and shows
#   the same report at its end.
# - `%%cprofile` around `trainer.fit()` groups the Python calls by hook: `actions()`,
#   `action_stats(hook)` and the Actions tab.
# - `nbprof.from_profiler(prof)` shows a profile recorded by Accelerate (or any torch profiler).

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
