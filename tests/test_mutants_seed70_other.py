"""What seed 70's sample of mutants (docs/testing.md) showed no test held outside the analysis and
the collectors, each against an answer of its own: the steps of nbprof's Lightning profiler used
by hand, through Lightning's own ``Profiler.profile`` (no Trainer, so no ``setup``), counted by
torch's own ``key_averages()``; the Data loading tab's timeline of a loop that waited for no batch,
against the columns ``TimelineData``'s documentation lists."""

from __future__ import annotations

import importlib.util

import pytest

from .test_data_loading_findings import T0, loop_record

# ---------------------------------------------------------------- integrations.lightning.Profiler.__init__


@pytest.mark.skipif(not importlib.util.find_spec("pytorch_lightning"), reason="needs pytorch-lightning")
def test_the_lightning_profiler_used_without_a_trainer_steps_on_the_training_hook():
    """The profiler used by hand, with Lightning's own ``profile()`` context manager and no Trainer
    (so no ``setup()`` names a stage): a batch still ends with ``on_train_batch_end`` (the fit's
    hook, the default). Five batches under schedule=(1, 1, 2): batches 2 and 3 are recorded, each a
    ProfilerStep holding one matmul and one batch end; torch's own key_averages() counts them."""
    import torch

    import nbprof

    from .lightning_fit import lightning

    lightning("pytorch_lightning")
    prof = nbprof.lightning.Profiler(schedule=(1, 1, 2), quiet=True)
    x = torch.randn(8, 8)
    for _ in range(5):
        with prof.profile("run_training_batch"):
            x = x @ x
        with prof.profile("[LightningModule]Regression.on_train_batch_end"):
            pass
    prof.describe()
    p = prof.result
    assert p.steps()["step"].tolist() == [2, 3]
    torchs = {e.key: e.count for e in p.profiler.key_averages()}
    assert torchs["ProfilerStep*"] == 2
    assert torchs["run_training_batch"] == torchs["[LightningModule]Regression.on_train_batch_end"] == 2
    assert torchs["aten::mm"] == 2


# ---------------------------------------------------------------- views.tabs.data_loading.loading_timeline


def test_the_loading_timeline_of_a_loop_that_waited_for_no_batch_has_the_timelines_columns():
    """A loop in the main process that never asked for a batch (no waits, no workers): no rectangle
    to draw, and the rectangles' table is still a timeline's, with the columns
    ``TimelineData``'s documentation lists (``event`` among them: what hover and zoom read)."""
    from nbprof.views.tabs.data_loading import loading_timeline

    data = loading_timeline(loop_record([], workers=0, stop=False), T0)
    assert len(data.rects) == 0 and len(data.lanes) == 0
    assert list(data.rects.columns) == ["row", "lane", "level", "x0_us", "x1_us", "busy_us", "count", "name",
                                        "family", "hue", "event", "names", "distinct"]
