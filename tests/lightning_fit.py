"""A small real Lightning fit for the tests: a two-layer regression on random data, on the CPU.

``fit(package, profiler=None, steps=6, fail_at=None)`` trains a fresh model ``steps`` optimizer
steps with a fixed seed (so two fits call the same hooks the same number of times) and returns
the trainer; ``fail_at``: ``training_step`` raises ``ValueError`` at that batch. ``package`` is
"pytorch_lightning" or "lightning.pytorch" (both installed with the test extra). A fit takes
~0.1 s once the package is imported (~3 s, once per process).
"""

from __future__ import annotations

import importlib
import logging
import warnings
from typing import Any

PACKAGES = ("pytorch_lightning", "lightning.pytorch")

_modules: dict[str, Any] = {}


def lightning(package: str) -> Any:
    """The package, imported (its start-up chatter silenced)."""
    if package not in _modules:
        for name in ("pytorch_lightning", "lightning.pytorch", "lightning_fabric", "lightning.fabric", "lightning"):
            logging.getLogger(name).setLevel(logging.ERROR)
        _modules[package] = importlib.import_module(package)
    return _modules[package]


def model_class(package: str) -> type:
    import torch

    pl = lightning(package)

    class Regression(pl.LightningModule):
        def __init__(self, fail_at: int | None = None) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
            self.fail_at = fail_at

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            if self.fail_at is not None and batch_idx == self.fail_at:
                raise ValueError(f"bad batch {batch_idx}")
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Regression


def fit(package: str, profiler: Any = None, steps: int = 6, fail_at: int | None = None, validate: bool = False) -> Any:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    pl = lightning(package)
    pl.seed_everything(0, verbose=False)
    data = TensorDataset(torch.randn(64, 16), torch.randn(64, 1))
    trainer = pl.Trainer(max_steps=steps, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, accelerator="cpu", devices=1, profiler=profiler)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's deprecation and "few workers" warnings
        trainer.fit(model_class(package)(fail_at), DataLoader(data, batch_size=8))
    return trainer
