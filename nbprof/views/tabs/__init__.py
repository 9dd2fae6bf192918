"""The report's tabs, in the order they show: the only list of them.

A tab is a module of this package defining a :class:`~.base.Tab` (title, ``applies``,
``missing``, ``render``). To add one: write its module, add it below, and test it. The report
(``views.report``) builds the tab bar, the panels and their CSS from these lists."""

from __future__ import annotations

from .actions import ACTIONS
from .base import Tab
from .callgraph import CALLGRAPH
from .compile import COMPILE
from .data_loading import DATA_LOADING
from .flame import FLAME
from .functions import FUNCTIONS
from .kernels import KERNELS
from .memory import CLUSTER_MEMORY, MEMORY
from .modules import CLUSTER_MODULES, MODULES
from .operators import BY_SHAPE, BY_STACK, CLUSTER_BY_SHAPE, CLUSTER_BY_STACK, CLUSTER_OPERATORS, OPERATORS
from .ranges import CLUSTER_RANGES, RANGES
from .ranks import CLUSTER_RANKS, RANKS
from .snapshot import SNAPSHOT
from .source import CLUSTER_SOURCE, SOURCE, TORCH_SOURCE
from .steps import STEPS
from .timeline import TIMELINE

__all__ = ["Tab", "TORCH_TABS", "CLUSTER_TABS", "PYTHON_TABS"]

TORCH_TABS: list[Tab] = [OPERATORS, BY_SHAPE, BY_STACK, TORCH_SOURCE, MEMORY, SNAPSHOT, KERNELS, COMPILE, MODULES,
                         RANGES, STEPS, DATA_LOADING, RANKS, TIMELINE]
# a folder of ranks summarized apart (nbprof.cluster): the ranks first, then every tab a rank has
# (but Compile: torch.compile's log is one process's), summed over the ranks from their summaries
CLUSTER_TABS: list[Tab] = [CLUSTER_RANKS, CLUSTER_OPERATORS, CLUSTER_BY_SHAPE, CLUSTER_BY_STACK, CLUSTER_SOURCE,
                           CLUSTER_MEMORY, KERNELS, CLUSTER_MODULES, CLUSTER_RANGES, STEPS, TIMELINE]
PYTHON_TABS: list[Tab] = [FUNCTIONS, SOURCE, ACTIONS, DATA_LOADING, CALLGRAPH, FLAME]
