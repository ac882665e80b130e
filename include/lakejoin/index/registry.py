"""The registry of index families: every layer finds a family here (``lakejoin.index.contract`` says what one is).

A new family is one module implementing :class:`~lakejoin.index.contract.IndexFamily` and one line below (and its
Spark build in ``lakejoin.spark.builders``). ``lakejoin.index.FAMILIES`` lists the same names without importing any
family's code, for the light importers (DAG files, profiling).
"""

from __future__ import annotations

from lakejoin.index.contract import IndexFamily
from lakejoin.index.josie.family import FAMILY as JOSIE
from lakejoin.index.lshensemble.family import FAMILY as LSH_ENSEMBLE
from lakejoin.index.mate.family import FAMILY as MATE
from lakejoin.index.pexeso.family import FAMILY as PEXESO
from lakejoin.index.qgram.family import FAMILY as QGRAM

REGISTRY: dict[str, IndexFamily] = {family.name: family for family in (JOSIE, LSH_ENSEMBLE, MATE, PEXESO, QGRAM)}
# the family whose top columns transformation-aware discovery learns programs for (``search transform``, and
# ``auto``'s fallback for a family that ``auto_falls_back``)
TRANSFORM_CANDIDATES: IndexFamily = QGRAM


def family(name: str) -> IndexFamily:
    """The family called ``name``; ``ValueError`` naming the known ones otherwise."""
    found = REGISTRY.get(name)
    if found is None:
        raise ValueError(f"unknown index family {name!r}; choose one of {', '.join(REGISTRY)}")
    return found


def search_families() -> list[str]:
    """The families a query searches by their own score (q-gram only proposes candidates to ``search transform``)."""
    return [name for name, f in REGISTRY.items() if f.searched_by_score]
