"""The process model the event_log and process_mining jobs discover: the Inductive Miner
(directly-follows variant) on the DFG and start/end activities the views already collected, so
discovery costs no pass over the log, and the model's Petri net."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sparkfield.process.analysis.inductive import Dfg, ProcessTree, inductive_miner_dfg
from sparkfield.process.analysis.petri import PetriNet, from_process_tree


@dataclass(frozen=True)
class DiscoveredModel:
    """A process tree and its Petri net (a workflow net from ``source`` to ``sink``)."""

    tree: ProcessTree
    net: PetriNet

    def sizes(self) -> dict[str, int]:
        """What the run report says of the model."""
        return {"activities": len(self.tree.activities()), "places": len(self.net.places),
                "transitions": len(self.net.transitions),
                "silent_transitions": sum(t.label is None for t in self.net.transitions)}


def discover_model(small: dict[str, pd.DataFrame]) -> DiscoveredModel:
    """IMd on the collected views (``dfg``, ``start_activities``, ``end_activities``)."""
    dfg = Dfg.from_frames(small["dfg"], small["start_activities"], small["end_activities"])
    tree = inductive_miner_dfg(dfg)
    return DiscoveredModel(tree, from_process_tree(tree))
