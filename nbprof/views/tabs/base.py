"""What a tab of the report is: a title, whether the profile has its data, what it says when the
data was not collected, and how it draws itself (``render(report) -> html``).

Each tab lives in a module of its own in this package; ``views.tabs`` lists them in order. The
report builds its tab bar, its panels and their CSS from that list, so adding a tab is one module
and one entry (and its test)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ...format import esc

__all__ = ["Tab", "empty"]


def _always(profile: Any) -> bool:
    return True


@dataclass(frozen=True)
class Tab:
    """One tab. ``applies(profile)``: the profile has this tab's data, so ``render`` draws it.
    Otherwise ``missing`` (a text, or a function of the profile) says why, naming the flag that
    collects it, and the tab stays in the bar; with no ``missing`` (or a function that gives None:
    a profile that cannot hold the data whatever the flags, such as a file without it) the tab is
    left out.
    ``group_by``: the ``--group-by`` value that opens the report on this tab."""

    title: str
    render: Callable[[Any], str]
    applies: Callable[[Any], bool] = _always
    missing: str | Callable[[Any], str | None] | None = None
    group_by: str | None = None

    def shown(self, profile: Any) -> bool:
        return self.applies(profile) or self.why_missing(profile) is not None

    def why_missing(self, profile: Any) -> str | None:
        return self.missing(profile) if callable(self.missing) else self.missing

    def html(self, report: Any) -> str:
        """The panel's body: the tab drawn, or why it has nothing to draw."""
        if self.applies(report.profile):
            return self.render(report)
        return empty(self.why_missing(report.profile) or "")


def empty(message: str) -> str:
    """The grey line of a panel with nothing to show."""
    return f'<div class="nbprof-empty">{esc(message)}</div>'
