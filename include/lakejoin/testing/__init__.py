"""Test and benchmark support: synthetic lakes with planted ground truth, brute-force oracles."""

from lakejoin.testing.oracles import containment_search, overlap_topk
from lakejoin.testing.synthetic import (
    SHAPES,
    GroundTruth,
    LakeParams,
    PlantedPair,
    SetLakeShape,
    generate_lake,
    plant_joinable,
    set_lake,
    set_lake_chunks,
)

__all__ = [
    "SHAPES",
    "GroundTruth",
    "LakeParams",
    "PlantedPair",
    "SetLakeShape",
    "containment_search",
    "generate_lake",
    "overlap_topk",
    "plant_joinable",
    "set_lake",
    "set_lake_chunks",
]
