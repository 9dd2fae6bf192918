"""The controls panel: toggles that set the defaults of the next %%torchprof runs.

State only, no profiling logic: the toggles write ``settings.panel``, which the magic reads for
every flag the user did not type (flags still win). One panel per kernel: showing it twice shows
the same widgets, so two views never disagree.
"""

from __future__ import annotations

from typing import Any

from . import settings

__all__ = ["controls", "Controls"]

_panel: "Controls | None" = None


def controls() -> "Controls":
    global _panel
    if _panel is None:
        _panel = Controls()
    else:
        _panel.refresh()
    return _panel


def _cuda_state() -> tuple[bool, str]:
    """(available, reason if not)."""
    import importlib.util
    import sys

    if "torch" not in sys.modules and importlib.util.find_spec("torch") is None:
        return False, "torch is not installed"
    from .collect.torch_live import cuda_available

    if not cuda_available():
        return False, "CUDA is not available on this machine"
    return True, ""


class Controls:
    OPTIONS = (
        ("cuda", "CUDA", "Record CUDA kernels, copies and streams"),
        ("memory", "Memory", "Record allocations: memory per operator and the memory curve"),
        ("shapes", "Shapes", "Record input shapes (group by shape)"),
        ("stack", "Stacks", "Record Python stacks (group by stack); costs the most"),
    )

    def __init__(self) -> None:
        import ipywidgets as W

        self.cuda_available, self.cuda_reason = _cuda_state()
        self.toggles: dict[str, Any] = {}
        for key, label, tip in self.OPTIONS:
            value = self._value(key)
            t = W.ToggleButton(value=value, description=label, tooltip=tip, icon="check" if value else "",
                               layout=W.Layout(width="110px"))
            if key == "cuda" and not self.cuda_available:
                t.value = False
                t.disabled = True
                t.tooltip = f"CUDA: {self.cuda_reason}"
            t.observe(self._changed, names="value")
            self.toggles[key] = t
        self.status = W.HTML()
        self.reason = W.HTML(
            f'<span style="color:#8a4b00">CUDA off: {self.cuda_reason}</span>' if not self.cuda_available else ""
        )
        self.widget = W.VBox(
            [
                W.HTML("<b>nbprof</b> · defaults for the next <code>%%torchprof</code> runs (flags still win)"),
                W.HBox(list(self.toggles.values())),
                self.reason,
                self.status,
            ]
        )
        self._update_status()

    def _value(self, key: str) -> bool:
        value = getattr(settings.panel, key)
        if key == "cuda" and value is None:
            return self.cuda_available
        return bool(value)

    def _changed(self, change: dict) -> None:
        owner = change["owner"]
        for key, t in self.toggles.items():
            if t is owner:
                setattr(settings.panel, key, bool(change["new"]))
                t.icon = "check" if change["new"] else ""
        self._update_status()

    def refresh(self) -> None:
        """Re-read the panel state (it may have been set from code)."""
        for key, t in self.toggles.items():
            if not t.disabled:
                t.value = self._value(key)
        self._update_status()

    def state(self) -> dict[str, bool]:
        return {key: self._value(key) and not (key == "cuda" and not self.cuda_available) for key, *_ in self.OPTIONS}

    def describe(self) -> str:
        on = [label for key, label, _ in self.OPTIONS if self.state()[key]]
        return "next %%torchprof records: CPU" + "".join(f", {x}" for x in on)

    def _update_status(self) -> None:
        self.status.value = f'<span style="color:#555">{self.describe()}</span>'

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = self.widget._repr_mimebundle_(include=include, exclude=exclude) or {}
        text = "nbprof controls: " + ", ".join(
            f"{key}={'on' if self.state()[key] else 'off'}" for key, *_ in self.OPTIONS
        )
        if not self.cuda_available:
            text += f" (CUDA: {self.cuda_reason})"
        bundle["text/plain"] = text
        return bundle

    def __repr__(self) -> str:
        return self._repr_mimebundle_()["text/plain"]
