"""Lightning under nbprof, with the real packages on the CPU (tests/lightning_fit.py: a small fit).

Oracles: Lightning's own ``SimpleProfiler`` (how many times each action ran, for the same seeded
fit), torch's own ``key_averages()`` of a profile the test starts, a real IPython shell, and the
classes' own attributes (Lightning's ``PassThroughProfiler`` is what it was after the run).
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import sys
from pathlib import Path

import pytest

from .conftest import reports, run
from .lightning_fit import PACKAGES, fit, lightning

NBPROF_DIR = Path(__file__).resolve().parents[1] / "nbprof"

# found, not imported: collecting this file must not import Lightning into every other test
pytestmark = pytest.mark.skipif(not all(importlib.util.find_spec(p) for p in ("pytorch_lightning", "lightning")),
                                reason="needs pytorch-lightning and lightning (the test extra)")


def simple_counts(package: str) -> dict[str, int]:
    """Lightning's answer: each action and how many times it ran, for the seeded fit."""
    pl = lightning(package)
    profiler = pl.profilers.SimpleProfiler()
    fit(package, profiler)
    return {action: len(durations) for action, durations in profiler.recorded_durations.items()}


def label_counts(profile) -> dict[str, int]:
    ranges = profile.ranges()
    return ranges.groupby("label")["count"].sum().to_dict()


def opening_tab(html: str) -> str:
    """The title of the tab a report's HTML opens on (its checked radio input's label)."""
    import re

    m = re.search(r'<input type="radio"[^>]* checked[^>]*><label[^>]*>([^<]*)</label>', html)
    assert m, "no tab is checked"
    return m.group(1)


def pass_through_is_lightnings(package: str) -> bool:
    cls = sys.modules[f"{package}.profilers"].PassThroughProfiler
    own = {name: cls.__dict__.get(name) for name in ("start", "stop", "setup", "describe", "_nbprof_marks")}
    return (own["start"] is not None and own["start"].__module__ == f"{package}.profilers.base"
            and own["stop"].__module__ == f"{package}.profilers.base"
            and own["setup"] is None and own["describe"] is None and own["_nbprof_marks"] is None)


@pytest.mark.parametrize("package", [PACKAGES[0], pytest.param(PACKAGES[1], marks=pytest.mark.slow)])
def test_torchprof_around_fit_counts_every_action_as_lightnings_simple_profiler(shell, package):
    expected = simple_counts(package)
    shell.user_ns.update(fit=fit, package=package)
    result, captured = run(shell, "%%torchprof -q -o p\ntrainer = fit(package)")
    assert result.success, result.error_in_exec
    p = shell.user_ns["p"]
    counts = label_counts(p)
    assert {a: counts.get(a) for a in expected} == expected
    assert len(expected) >= 25 and expected["run_training_batch"] == 6
    # the fit itself is the root the actions nest under
    assert counts["[Trainer].fit"] == 1
    ranges = p.ranges()
    fit_row = ranges[ranges["label"] == "[Trainer].fit"].iloc[0]
    assert fit_row["depth"] == 0
    batch = ranges[ranges["label"] == "run_training_batch"].iloc[0]
    assert batch["path"] == "[Trainer].fit › run_training_epoch › run_training_batch"
    # the share of the fit, and the operators under an action
    step = ranges[ranges["label"] == "[Strategy]SingleDeviceStrategy.training_step"].iloc[0]
    assert step["share_of_root"] == pytest.approx(step["total_us"] / fit_row["total_us"])
    ops = p.range_ops("[Strategy]SingleDeviceStrategy.training_step")
    assert {"aten::linear", "aten::relu", "aten::mse_loss"} <= set(ops["name"])
    assert ops.set_index("name").loc["aten::linear", "count"] == 12  # two layers, six steps
    # the report opens on its Ranges tab, which names the operators under each action
    html = p.report().html()
    assert opening_tab(html) == "Ranges" and "aten::addmm" in html
    assert opening_tab(p.report(group_by="op").html()) == "Ranges"
    assert pass_through_is_lightnings(package)


def test_lightnings_training_batches_are_the_steps_of_memory_growth(shell):
    """Lightning's own count (SimpleProfiler: 6 training batches) is the number of steps, each
    ``run_training_batch`` range one step, numbered from 0 in time order."""
    package = PACKAGES[0]
    expected = simple_counts(package)["run_training_batch"]
    shell.user_ns.update(fit=fit, package=package)
    result, _ = run(shell, "%%torchprof --memory -q -o lm\ntrainer = fit(package)")
    assert result.success, result.error_in_exec
    p = shell.user_ns["lm"]
    growth = p.memory_growth()
    assert growth.attrs["steps"] == "Lightning's training batches"
    assert growth["step"].tolist() == list(range(expected)) and set(growth["device"]) == {"cpu"}
    ev = p.events
    batches = ev[(ev["name"] == "run_training_batch") & (ev["kind"] == "annotation")].sort_values("start_us")
    assert growth["start_us"].tolist() == batches["start_us"].tolist()
    assert growth["end_us"].tolist() == pytest.approx((batches["start_us"] + batches["dur_us"]).tolist())
    assert (growth["allocated_bytes"] > 0).all()


def test_the_trainer_made_before_the_cell_is_marked_too_and_restored_after_an_error(shell):
    package = PACKAGES[0]
    pl = lightning(package)
    shell.user_ns.update(fit=fit, package=package)
    result, _ = run(shell, "%%torchprof -q -o p\nfit(package, fail_at=2)")
    assert isinstance(result.error_in_exec, ValueError)
    p = shell.user_ns["p"]
    counts = label_counts(p)
    # batches 0 and 1 ran, the third raised in training_step (inside its strategy hook)
    assert counts["[Strategy]SingleDeviceStrategy.training_step"] == 3
    assert counts["[LightningModule]Regression.on_train_batch_end"] == 2
    assert counts["[Trainer].fit"] == 1  # never described: it ends with the run
    assert any("raised (ValueError: bad batch 2)" in n for n in p.meta.notes)
    assert pass_through_is_lightnings(package)
    # no marks outside a run: a plain fit afterwards calls Lightning's own (empty) methods
    assert isinstance(fit(package).profiler, pl.profilers.PassThroughProfiler)
    result, _ = run(shell, "%%torchprof -q -o q\nfit(package, steps=2)")
    assert result.success and label_counts(shell.user_ns["q"])["run_training_batch"] == 2


@pytest.mark.parametrize("package", [PACKAGES[0], pytest.param(PACKAGES[1], marks=pytest.mark.slow)])
def test_nbprof_profiler_alone_profiles_the_fit_and_shows_the_report(shell, package):
    import nbprof

    pl = lightning(package)
    expected = simple_counts(package)
    shell.user_ns.update(fit=fit, package=package, nbprof=nbprof)
    result, captured = run(shell, "prof = nbprof.lightning.Profiler()\ntrainer = fit(package, prof)")
    assert result.success, result.error_in_exec
    prof = shell.user_ns["prof"]
    assert isinstance(prof, pl.profilers.Profiler) and isinstance(prof, nbprof.lightning.Profiler)
    shown = reports(captured)
    assert len(shown) == 1 and "[Trainer].fit" in shown[0]["text/html"]
    p = prof.result
    assert isinstance(p, nbprof.TorchProfile) and prof.results == [p]
    counts = label_counts(p)
    assert {a: counts.get(a) for a in expected} == expected
    # the profile is the fit: it stops when the fit ends, and all it holds before the fit's range
    # are Lightning's own actions (configure_callbacks runs before `fit` is marked). Said in events,
    # not as a share of the span: under load the gaps between hooks grow (0.944 on CI)
    ev = p.events
    fit_ev = ev[(ev["name"] == "[Trainer].fit") & (ev["kind"] == "annotation")]
    assert len(fit_ev) == 1
    fit_start = fit_ev["start_us"].iloc[0]
    fit_end = fit_start + fit_ev["dur_us"].iloc[0]
    assert (ev["start_us"] + ev["dur_us"]).max() <= fit_end + 1e-3
    before = ev[ev["start_us"] < fit_start]
    assert set(before["kind"]) <= {"annotation"} and set(before["name"]) <= set(expected), before
    assert prof.summary() == ""  # shown, so nothing for Lightning to log


def test_nbprof_profiler_inside_torchprof_or_cprofile_starts_no_profiler_of_its_own(shell):
    import nbprof

    package = PACKAGES[0]
    shell.user_ns.update(fit=fit, package=package, nbprof=nbprof)
    result, captured = run(shell, "prof = nbprof.lightning.Profiler()\n")
    result, captured = run(shell, "%%torchprof -q -o p\nfit(package, prof)")
    assert result.success, result.error_in_exec
    prof = shell.user_ns["prof"]
    assert prof.result is None and prof.results == [] and reports(captured) == []
    counts = label_counts(shell.user_ns["p"])
    assert counts["run_training_batch"] == 6 and counts["[Trainer].fit"] == 1
    # in %%cprofile: its hooks group the cell's calls
    result, captured = run(shell, "%%cprofile -q -o c\nfit(package, prof);")
    assert result.success and prof.results == [] and reports(captured) == []
    actions = shell.user_ns["c"].actions().set_index("action")["count"]
    assert actions["run_training_batch"] == 6 and actions["[Trainer].fit"] == 1


def test_nbprof_profiler_marks_ranges_in_a_torch_profiler_the_user_started(shell):
    """torch's own key_averages() of the user's profile has every action, as many times as
    Lightning's SimpleProfiler counts it."""
    import torch

    import nbprof

    package = PACKAGES[0]
    expected = simple_counts(package)
    prof = nbprof.lightning.Profiler()
    with torch.profiler.profile() as tp:
        fit(package, prof)
    torch_counts = {e.key: e.count for e in tp.key_averages()}
    assert {a: torch_counts.get(a) for a in expected} == expected
    assert prof.result is None


def test_a_fit_that_raises_shows_what_it_recorded_and_stops_the_profiler(shell):
    import nbprof

    package = PACKAGES[0]
    shell.user_ns.update(fit=fit, package=package, nbprof=nbprof)
    result, captured = run(shell, "prof = nbprof.lightning.Profiler()\nfit(package, prof, fail_at=3)")
    assert isinstance(result.error_in_exec, ValueError)
    prof = shell.user_ns["prof"]
    assert len(reports(captured)) == 1  # shown after the cell, below the traceback
    p = prof.result
    assert label_counts(p)["[LightningModule]Regression.on_train_batch_end"] == 3
    assert any("the fit raised (ValueError: bad batch 3)" in n for n in p.meta.notes)
    # the shell fixture checks no profiler is left running; the next fit profiles again
    result, captured = run(shell, "fit(package, prof, steps=2)")
    assert result.success and len(prof.results) == 2
    assert label_counts(prof.result)["run_training_batch"] == 2


def test_nbprof_profiler_options_are_checked_when_made():
    import nbprof

    lightning(PACKAGES[0])
    with pytest.raises(nbprof.OptionError, match="unknown sort key 'fastest'"):
        nbprof.lightning.Profiler(sort="fastest")
    with pytest.raises(nbprof.OptionError, match="--export"):
        nbprof.lightning.Profiler(export="trace.txt")


# -- %%cprofile around fit(): the calls grouped by the action they ran under ---------------------


@contextlib.contextmanager
def no_gc():
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _quiet_profiler(package: str):
    """A real Lightning profiler that does nothing, as PassThroughProfiler, but is not that class:
    so nbprof reports no actions for it (the plain %%cprofile of the same fit)."""
    pl = lightning(package)

    class Quiet(pl.profilers.PassThroughProfiler):
        def start(self, action_name):
            pass

        def stop(self, action_name):
            pass

    return Quiet()


def _python_calls(stats) -> dict[tuple[str, int, str], int]:
    """ncalls of the Python functions of a stats table, leaving out the profilers' own code
    (nbprof's, this file's, Lightning's profilers: the two fits make different ones); functions pstats would key alike
    ("__init__ #3", the dataclasses' generated code, numbered in the order a run met them) added
    up under pstats' key."""
    rows = stats[(stats["filename"] != "~") & ~stats["filename"].str.contains("/profilers/", regex=False)
                 & (stats["filename"] != __file__)]
    names = rows["function"].str.replace(r" (#\d+|at col \d+)$", "", regex=True)
    return rows.groupby([rows["filename"], rows["lineno"], names])["ncalls"].sum().to_dict()


def test_cprofile_around_fit_groups_calls_by_action_and_keeps_every_call(shell):
    """Every call is in one action's profile: the merged table has each function's calls of a
    plain %%cprofile of the same fit (one whose profiler reports no actions), and it is pstats'
    own sum of the per-action profiles."""
    import pstats

    package = PACKAGES[0]
    expected = simple_counts(package)
    shell.user_ns.update(fit=fit, package=package, quiet=_quiet_profiler(package))
    run(shell, "%%cprofile -q -o plain\nfit(package, quiet);")  # warm: first-call imports and caches
    with no_gc():  # a collection runs finalizers (Python calls) whenever it happens to
        run(shell, "%%cprofile -q -o plain\nfit(package, quiet);")
        result, _ = run(shell, "%%cprofile -q -o p\nfit(package);")
    assert result.success, result.error_in_exec
    p, plain = shell.user_ns["p"], shell.user_ns["plain"]
    assert len(plain.actions()) == 0 and len(p.actions()) == len(expected) + 2  # [Trainer].fit, outside
    counts = dict(zip(p.actions()["action"], p.actions()["count"]))
    assert {a: counts.get(a) for a in expected} == expected
    assert _python_calls(p.stats) == _python_calls(plain.stats)
    # the Actions tab: the actions by own time (backward's autograd run is the biggest here),
    # each with its functions; a profile without actions has no such tab
    html = p.report().html()
    assert ">Actions</label>" in html and ">Actions</label>" not in plain.report().html()
    assert "[Strategy]SingleDeviceStrategy.backward" in html and "run_backward" in html
    # the merged stats are pstats' own add() of the per-action cProfile profiles
    profiles = list(p.profiler.profiles.values())
    merged = pstats.Stats(profiles[0])
    for profile in profiles[1:]:
        merged.add(profile)
    ours = p.stats.set_index(["filename", "lineno", "function"])
    collided = {k for k in ours.index if " #" in k[2] or " at col " in k[2]}
    checked = 0
    for key, (cc, nc, tt, ct, callers) in merged.stats.items():
        nbprofs = key[0].startswith(str(NBPROF_DIR)) or any(c[0].startswith(str(NBPROF_DIR)) for c in callers)
        if key in ours.index and key not in collided and not nbprofs:  # nbprof takes its own calls out
            row = ours.loc[key]
            assert (row["ncalls"], row["primitive_calls"]) == (nc, cc), key
            assert row["tottime_s"] == pytest.approx(tt, abs=1e-9) and row["cumtime_s"] == pytest.approx(ct, abs=1e-9)
            checked += 1
    assert checked > 500


def _counting_profiler(package: str):
    """The independent answer for the grouping: a real Lightning profiler that keeps the stack of
    open actions (the stage from setup to describe, as nbprof's marks) and a sys.setprofile hook
    that counts every Python call under the innermost one. ``nested``: actions that had another
    begin inside them."""
    import collections

    pl = lightning(package)

    class Counting(pl.profilers.Profiler):
        def __init__(self):
            super().__init__()
            self.stack = ["(outside every action)"]
            self.counts = collections.defaultdict(collections.Counter)
            self.nested = set()

        def hook(self, frame, event, arg):
            if event == "call":
                code = frame.f_code
                self.counts[self.stack[-1]][(code.co_filename, code.co_firstlineno, code.co_name)] += 1

        def start(self, action_name):
            self.nested.add(self.stack[-1])
            self.stack.append(action_name)

        def stop(self, action_name):
            at = len(self.stack) - 1 - self.stack[::-1].index(action_name)
            del self.stack[at]

        def setup(self, stage, local_rank=None, log_dir=None):
            super().setup(stage, local_rank=local_rank, log_dir=log_dir)
            self.start(f"[Trainer].{stage._value_}")

        def describe(self):
            self.stop(f"[Trainer].{self._stage._value_}")
            super().describe()

    return Counting()


def _kept(key) -> bool:
    return "/profilers/" not in key[0] and key[0] != __file__ and key[0] != "~"


def _pstats_key(key):
    import re

    return (key[0], key[1], re.sub(r" (#\d+|at col \d+)$", "", key[2]))


def _calls_by_action(p) -> dict[str, dict]:
    import collections

    out: dict[str, dict] = collections.defaultdict(collections.Counter)
    for r in p.action_stats().itertuples():
        key = (r.filename, r.lineno, r.function)
        if _kept(key):
            out[r.action][_pstats_key(key)] += r.ncalls
    return out


@pytest.mark.slow
def test_each_actions_calls_are_those_made_while_it_was_the_innermost_action(shell):
    """Per action, each Python function's calls equal an independent count (a sys.setprofile hook
    under a Lightning profiler of the test's own); for the actions with no action inside them,
    they equal Lightning's AdvancedProfiler's profile of that action too."""
    import pstats

    package = PACKAGES[0]
    pl = lightning(package)
    shell.user_ns.update(fit=fit, package=package)
    # warm: the first fit and the first %%cprofile cell import modules, and imports that register
    # abstract base classes empty every isinstance cache (the next fit's checks call
    # ABCMeta.__subclasscheck__ again): each fit below starts from the same caches
    run(shell, "%%cprofile -q\nfit(package);")
    advanced = pl.profilers.AdvancedProfiler()
    advanced.teardown = lambda stage: None  # keep its profiles after the fit (it clears them)
    fit(package, advanced)
    counting = _counting_profiler(package)
    with no_gc():
        sys.setprofile(counting.hook)
        try:
            fit(package, counting)
        finally:
            sys.setprofile(None)
        result, _ = run(shell, "%%cprofile -q -o p\nfit(package);")
    assert result.success, result.error_in_exec
    ours = _calls_by_action(shell.user_ns["p"])
    expected = {a: collections_counter({k: n for k, n in c.items() if _kept(k)}) for a, c in counting.counts.items()}
    hooks = [a for a in expected if a != "(outside every action)"]
    assert len(hooks) >= 25
    for action in hooks:
        assert dict(ours[action]) == dict(expected[action]), action
    leaves = [a for a in hooks if a not in counting.nested and a in advanced.profiled_actions]
    assert len(leaves) >= 20
    for action in leaves:
        theirs = collections_counter()
        for key, (cc, nc, tt, ct, callers) in pstats.Stats(advanced.profiled_actions[action]).stats.items():
            if _kept(key):
                theirs[_pstats_key(key)] += nc
        assert dict(ours[action]) == dict(theirs), action


def collections_counter(*args):
    import collections

    return collections.Counter(*args)


# -- Lightning's own profilers inside nbprof's magics ---------------------------------------------


@pytest.mark.slow
def test_lightnings_advanced_profiler_inside_cprofile_is_said_and_released(shell):
    """Trainer(profiler="advanced") runs its own cProfile per action: nbprof's yields to it at
    the first one and the report says what it covers; the fit runs (on 3.12+ it raised); the
    next %%cprofile works."""
    package = PACKAGES[0]
    shell.user_ns.update(fit=fit, package=package)
    result, _ = run(shell, "%%cprofile -q -o p\ntrainer = fit(package, 'advanced')")
    assert result.success, result.error_in_exec
    p = shell.user_ns["p"]
    notes = " ".join(p.meta.notes)
    assert "another Python profiler (cProfile.Profile.enable" in notes and "advanced.py" in notes
    assert sys.getprofile() is None
    result, _ = run(shell, "%%cprofile -q -o q\nfit(package, steps=2);")
    assert result.success and len(shell.user_ns["q"].actions()) > 0 and shell.user_ns["q"].meta.notes[:1] != [notes]


@pytest.mark.slow
def test_lightnings_pytorch_profiler_inside_torchprof_is_said_and_released_20_times(tmp_path):
    """Trainer(profiler="pytorch") starts torch's profiler at its first action: nbprof's session
    stops there (this ended the process with a segmentation fault), the report says so, and the
    next %%torchprof works; 20 times in one process, a fresh one (so a crash is its exit code)."""
    import json
    import subprocess
    import textwrap

    code = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
        from IPython.testing.globalipapp import start_ipython
        from IPython.utils.capture import capture_output
        from tests.lightning_fit import fit
        ip = start_ipython()
        ip.run_line_magic("load_ext", "nbprof")
        ip.user_ns["fit"] = fit
        rounds = []
        with capture_output():
            for _ in range(20):
                r = ip.run_cell("%%torchprof -q -o p\\ntrainer = fit('pytorch_lightning', 'pytorch', steps=2)")
                nxt = ip.run_cell("%%torchprof -q -o q\\nfit('pytorch_lightning', steps=2);")
                notes = " ".join(ip.user_ns["p"].meta.notes)
                batches = ip.user_ns["q"].ranges().groupby("label")["count"].sum().get("run_training_batch")
                rounds.append([r.success, "another torch profiler" in notes, nxt.success, int(batches)])
        import torch
        print(json.dumps({{"rounds": rounds, "idle": not torch.autograd._profiler_enabled()}}))
        """
    )
    # in a folder of its own: Lightning's PyTorchProfiler writes a trace per step into the trainer's
    # root folder (the working directory)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["rounds"] == [[True, True, True, 2]] * 20 and report["idle"]


@pytest.mark.slow
def test_nbprof_profiler_in_a_script_writes_its_report_where_lightning_writes_summaries(tmp_path):
    """Outside IPython there is no report to show: the text (the operators, then the hooks'
    table) is Lightning's summary, written to the profiler's file (dirpath / filename)."""
    import subprocess

    code = (
        "import sys, nbprof\n"
        "sys.path.insert(0, %r)\n"
        "from tests.lightning_fit import fit\n"
        "prof = nbprof.lightning.Profiler(dirpath=%r, filename='fit')\n"
        "fit('pytorch_lightning', prof)\n"
        "print(type(prof.result).__name__, prof.result.ranges()['label'].tolist().count('run_training_batch'))\n"
    ) % (str(Path(__file__).resolve().parents[1]), str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "TorchProfile 1"
    [written] = list(tmp_path.glob("*.txt"))
    text = written.read_text()
    assert text.startswith("torch profile") and "aten::addmm" in text
    lines = text.splitlines()
    hooks = lines[next(i for i, line in enumerate(lines) if line.startswith("Range ")):]  # the hooks' table
    batch = next(line for line in hooks if line.strip().startswith("run_training_batch"))
    assert batch.split()[1] == "6"  # its calls
    assert any(line.startswith("[Trainer].fit") for line in hooks)


def test_nbprof_profiler_with_a_schedule_records_whole_batches(shell):
    """schedule=(1, 1, 3): each training batch is a step (it ends with on_train_batch_end), so
    three whole batches are recorded, each one a ProfilerStep#N holding every hook of a batch;
    the counts are torch's own key_averages() of the profiler that recorded them."""
    import nbprof

    package = PACKAGES[0]
    prof = nbprof.lightning.Profiler(schedule=(1, 1, 3), quiet=True)
    fit(package, prof, steps=8)
    p = prof.result
    assert p.steps()["step"].tolist() == [2, 3, 4]
    counts = label_counts(p)
    torchs = {e.key: e.count for e in p.profiler.key_averages()}
    hooks = [label for label in counts if label.startswith("[") or label.startswith("run_")]
    assert len(hooks) >= 15 and all(counts[h] == torchs[h] == 3 for h in hooks), {h: (counts[h], torchs.get(h)) for h in hooks}
    ranges = p.ranges()
    assert set(ranges[ranges["depth"] == 0]["label"]) == {"ProfilerStep*"}
    with pytest.raises(nbprof.OptionError, match="--schedule 1,1"):
        nbprof.lightning.Profiler(schedule=(1, 1))


# pytorch_lightning's own use of torch's pytree (its _pytree.py), not nbprof's
@pytest.mark.filterwarnings("ignore:`isinstance.treespec, LeafSpec.` is deprecated:FutureWarning")
def test_a_validation_stages_steps_are_its_batches():
    """trainer.validate with schedule=(1, 1, 3): each validation batch is a step (it ends with
    on_validation_batch_end, not the training hook, which this stage never calls), so batches
    2-4 of the 8 are recorded, each holding one validation_step; torch's key_averages() counts."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    import nbprof

    from .lightning_fit import model_class

    package = PACKAGES[0]
    pl = lightning(package)

    class Validated(model_class(package)):
        def validation_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

    pl.seed_everything(0, verbose=False)
    prof = nbprof.lightning.Profiler(schedule=(1, 1, 3), quiet=True)
    trainer = pl.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         accelerator="cpu", devices=1, profiler=prof)
    trainer.validate(Validated(), DataLoader(TensorDataset(torch.randn(64, 16), torch.randn(64, 1)), batch_size=8),
                     verbose=False)
    p = prof.result
    assert p.steps()["step"].tolist() == [2, 3, 4]
    torchs = {e.key: e.count for e in p.profiler.key_averages()}
    step = [k for k in torchs if k.endswith("validation_step")]
    assert step and all(torchs[k] == 3 for k in step), {k: torchs[k] for k in step}
