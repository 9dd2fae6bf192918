"""``%load_ext nbprof`` / ``%unload_ext nbprof``: register and remove the magics, the cell
transformers and the hook that shows a cell's report after it ran.

Kept apart from ``magics`` (the magic functions) and ``_cell`` (the transformed cell), which
it wires together, so neither of those imports the other's user.
"""

from __future__ import annotations

from typing import Any

from ._cell import NAMESPACE_NAME, CellWrapper, rewrite_cell, show_pending
from .magics import ProfileMagics

__all__ = ["load", "unload"]


def load(shell: Any) -> None:
    shell.register_magics(ProfileMagics)
    cleanup = shell.input_transformers_cleanup
    if rewrite_cell not in cleanup:
        cleanup.append(rewrite_cell)
    if not any(isinstance(t, CellWrapper) for t in shell.ast_transformers):
        shell.ast_transformers.append(CellWrapper(shell))
    try:
        shell.events.unregister("post_run_cell", show_pending)
    except ValueError:
        pass
    shell.events.register("post_run_cell", show_pending)


def unload(shell: Any) -> None:
    for kind in ("line", "cell"):
        table = shell.magics_manager.magics[kind]
        for name in ("torchprof", "cprofile"):
            table.pop(name, None)
    cleanup = shell.input_transformers_cleanup
    while rewrite_cell in cleanup:
        cleanup.remove(rewrite_cell)
    shell.ast_transformers[:] = [t for t in shell.ast_transformers if not isinstance(t, CellWrapper)]
    shell.user_ns.pop(NAMESPACE_NAME, None)
    shell.user_ns_hidden.pop(NAMESPACE_NAME, None)
    try:
        shell.events.unregister("post_run_cell", show_pending)
    except ValueError:
        pass
