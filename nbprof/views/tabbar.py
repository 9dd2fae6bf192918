"""The report's tab bar: radio inputs, labels and panels, no script (``tabs_html``), its CSS rules
(``panel_rules``), and the ids that keep several reports, and tabs inside a tab, apart."""

from __future__ import annotations

import itertools

from ..format import esc

__all__ = ["tabs_html", "panel_rules", "next_uid", "subtabs_html"]

_ids = itertools.count(1)


def next_uid() -> int:
    """A number no other tab bar of this session has."""
    return next(_ids)


def panel_rules(uid: int, panels: int) -> str:
    """The CSS rules that show each of the ``panels`` panels of tab bar ``uid`` when its tab is
    checked (one rule per panel)."""
    return ",".join(f"#nbprof-{uid}-{i}:checked~.nbprof-panel-{i}" for i in range(panels))


def subtabs_html(tabs: list[tuple[str, str]], selected: int = 0) -> str:
    """Tabs inside a tab's panel (the Memory tab's ranks): a tab bar of their own, with the rules
    that show its panels."""
    uid = next_uid()
    return f"<style>{panel_rules(uid, len(tabs))}{{display:block}}</style>" + tabs_html(uid, tabs, selected)


def tabs_html(uid: int, tabs: list[tuple[str, str]], selected: int = 0) -> str:
    """Tabs from (title, body html) pairs: radio inputs + labels + panels, no script.

    Where outputs are sanitized (a notebook opened untrusted in JupyterLab or Notebook 7: no
    <style>, no SVG, the ``hidden`` attribute kept) the selected panel shows, the others stay
    ``hidden`` (the style shows a checked tab's panel), and a line says how to see them. Where
    all styling is stripped (GitHub's notebook preview) every panel shows, one after the other:
    the separators between the labels and a title above each panel, hidden by the style, keep
    that readable."""
    out = [f'<div class="nbprof-tabs" id="nbprof-tabs-{uid}">']
    for i, (title, _) in enumerate(tabs):
        checked = " checked" if i == selected else ""
        out.append(
            f'<input type="radio" name="nbprof-tabs-{uid}" id="nbprof-{uid}-{i}"{checked} hidden="hidden">'
            f'<label for="nbprof-{uid}-{i}">{esc(title)}</label>'
            + ('<span class="nbprof-tab-sep"> · </span>' if i < len(tabs) - 1 else "")
        )
    if len(tabs) > 1:
        out.append('<div class="nbprof-unstyled" style="color:#8a4b00;margin:4px 0">This output is shown without '
                   f"its styles and scripts (an untrusted notebook): the {esc(tabs[selected][0])} tab only, tables "
                   "unsorted. Trust the notebook (or run the cell again) for every tab.</div>")
    for i, (title, body) in enumerate(tabs):
        hidden = "" if i == selected else ' hidden="hidden"'
        out.append(f'<div class="nbprof-panel nbprof-panel-{i}"{hidden}>'
                   f'<div class="nbprof-panel-title"><b>{esc(title)}</b></div>{body}</div>')
    out.append("</div>")
    return "".join(out)


