"""SCR, the paper's baseline (§7.1): MATE without super keys.

The single-column inverted index with all of MATE's other optimizations (initial column by
cardinality, tables in descending hit order, pruning rule 1); every (PL item, query row) pair
goes to verification. Without a row filter every checked row counts as a match, so rule 2's
bound never drops below ``L_t`` and only rule 1 prunes. Answers equal MATE's by the Lemma of
§6.3 (the super-key filter has no false negatives).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from lakejoin.index.mate.search import MateIndex, PreparedQuery


def no_filter(index: MateIndex, query: PreparedQuery, g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """SCR's row filter: keep every candidate pair."""
    return np.ones(len(g), dtype=bool)
