"""nbprof.huggingface.ProfilerCallback with the real ``transformers.Trainer``: a tiny GPT-2 built
from a config (no download), a few optimizer steps on CPU, in a real IPython shell.

Oracles: torch's own ``key_averages()`` of the profiler the callback ran, the ``ProfilerStep#N``
ranges of the trace torch wrote (read back with ``json``), the Trainer's own step count, and
torch's state (no profiler left running).
"""

from __future__ import annotations

import json

import pytest

from .conftest import needs_torch, reports, run
from .test_live_torch import assert_equal_to_torch

pytestmark = [needs_torch, pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning")]
pytest.importorskip("transformers")

SETUP = """
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, TrainerCallback
from nbprof.huggingface import ProfilerCallback

class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        ids = torch.randint(0, 50, (8,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}

def trainer(callbacks, steps, folder):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=50, n_positions=16,
                                       bos_token_id=0, eos_token_id=0))
    args = TrainingArguments(folder, per_device_train_batch_size=2, max_steps=steps, report_to=[], use_cpu=True,
                             logging_steps=1000, save_strategy="no", disable_tqdm=True)
    return Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=callbacks)
"""


@pytest.fixture
def hf_shell(shell, tmp_path):
    result, _ = run(shell, SETUP + f"folder = {str(tmp_path / 'out')!r}")
    assert result.error_in_exec is None, result.error_in_exec
    return shell


def _trace_steps(profiler, tmp_path) -> dict[str, float]:
    """The ProfilerStep#N ranges of the trace torch wrote: name -> duration (µs)."""
    path = tmp_path / "trace.json"
    profiler.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    return {e["name"]: float(e["dur"]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
            and e.get("ph") == "X"}


def test_the_window_of_steps_is_profiled_and_shown(hf_shell, tmp_path):
    result, captured = run(hf_shell, "cb = ProfilerCallback(wait=1, warmup=1, active=3, shapes=True)\n"
                                     "t = trainer([cb], 6, folder)\nt.train()\nsteps_done = t.state.global_step")
    assert result.error_in_exec is None, result.error_in_exec
    import torch

    assert not torch.autograd._profiler_enabled()
    cb = hf_shell.user_ns["cb"]
    p = cb.profile
    assert hf_shell.user_ns["steps_done"] == 6
    # the report, once, when the window ended (step 5 of 6)
    [report] = reports(captured)
    assert report["text/plain"] == p.report().text()
    # each recorded step's time: torch's ProfilerStep#2-#4 (optimizer steps 3-5), from its trace
    steps = p.steps()
    assert steps["step"].tolist() == [2, 3, 4]
    theirs = _trace_steps(p.profiler, tmp_path)
    assert sorted(theirs) == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    for step, dur in zip(steps["step"], steps["dur_us"]):
        assert abs(dur - theirs[f"ProfilerStep#{step}"]) <= 0.01
    assert steps["ops"].min() > 0 and p.collected["shapes"]
    # the tables are torch's
    assert_equal_to_torch(p, "op")
    assert_equal_to_torch(p, "shape")
    assert {"aten::mm", "aten::embedding"} <= set(p.key_averages()["name"])


@pytest.mark.slow
def test_a_training_shorter_than_the_window_shows_what_it_recorded(hf_shell):
    result, captured = run(hf_shell, "cb = ProfilerCallback(wait=1, warmup=1, active=3)\ntrainer([cb], 3, folder).train()")
    assert result.error_in_exec is None, result.error_in_exec
    p = hf_shell.user_ns["cb"].profile
    # optimizer step 3 (ProfilerStep#2), and what ran after it until the training ended: the step
    # torch's schedule had begun (as a --schedule cell that stops mid-window)
    assert p.steps()["step"].tolist() == [2, 3]
    assert "the training ended after 3 of the window's 5 steps (ProfilerCallback(1, 1, 3))" in p.meta.notes
    assert len(reports(captured)) == 1


@pytest.mark.slow
def test_show_false(hf_shell):
    result, captured = run(hf_shell, "cb = ProfilerCallback(wait=0, warmup=1, active=1, show=False)\n"
                                     "trainer([cb], 2, folder).train()")
    assert result.error_in_exec is None and not reports(captured)
    assert hf_shell.user_ns["cb"].profile.steps()["step"].tolist() == [1]


def test_bad_options_are_one_line_errors():
    import nbprof
    from nbprof.huggingface import ProfilerCallback

    with pytest.raises(nbprof.OptionError, match="ProfilerCallback: --schedule"):
        ProfilerCallback(active=0)
    with pytest.raises(nbprof.OptionError, match="repeat must be 1 or more"):
        ProfilerCallback(repeat=0)


@pytest.mark.slow
def test_a_training_that_raises_leaves_no_profiler_running(hf_shell):
    """A failing training never calls on_train_end: the cell's end stops the profile."""
    code = ("class Boom(TrainerCallback):\n    def on_step_end(self, args, state, control, **kw):\n"
            "        if state.global_step == 4:\n            raise ValueError('boom')\n"
            "cb = ProfilerCallback(wait=1, warmup=1, active=3)\ntrainer([cb, Boom()], 6, folder).train()")
    result, captured = run(hf_shell, code)
    assert type(result.error_in_exec).__name__ == "ValueError"
    import torch

    from nbprof.run import runner

    assert not torch.autograd._profiler_enabled() and runner.active() is None
    p = hf_shell.user_ns["cb"].profile
    assert p.steps()["step"].tolist() == [2, 3, 4]  # 4: begun when step 4 ended, then the error
    assert any(n.startswith("the training raised (ValueError: boom)") for n in p.meta.notes)
    result, _ = run(hf_shell, "%%torchprof -q -o nxt\ntorch.ones(3).sum()")  # the next profile works
    assert result.error_in_exec is None


@pytest.mark.slow
def test_under_torchprof_the_callback_stands_aside(hf_shell, capfd):
    result, captured = run(hf_shell, "%%torchprof -q -o p\ncb = ProfilerCallback()\ntrainer([cb], 3, folder).train()")
    assert result.error_in_exec is None, result.error_in_exec
    assert "ProfilerCallback: this training runs under %%torchprof" in captured.stderr + capfd.readouterr().err
    assert hf_shell.user_ns["cb"].profile is None
    p = hf_shell.user_ns["p"]
    assert p.meta.notes == [] and "aten::mm" in set(p.key_averages()["name"])
