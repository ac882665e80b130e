"""The Spark builds of the index families, by the registry's names (``lakejoin.index.registry``).

Each family's Spark module turns the lake's cells into its index tables (``build_tables``, full or incremental, see
``lakejoin.index.contract``); MATE and LSH Ensemble also write a full build shard by shard from executor tasks that
read the cell files (``write_full_build``), with no shuffle. A new family adds its Spark module and one line here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from lakejoin.config import LakeConfig
from lakejoin.index import registry
from lakejoin.index.contract import IndexFamily
from lakejoin.spark import josie, lshensemble, mate, pexeso, qgram

FullBuildWriter = Callable[[SparkSession, LakeConfig, int], dict[str, int]]


@dataclass(frozen=True)
class SparkBuild:
    """One family's Spark build: the family itself, its ``build_tables`` and, where it has one, the shard-by-shard
    full build that writes its tables itself (returning rows written per table)."""

    family: IndexFamily
    build_tables: Callable[..., dict[str, DataFrame]]
    write_full_build: FullBuildWriter | None = None


def _build(name: str, build_tables: Callable[..., Any], write_full_build: FullBuildWriter | None = None) -> SparkBuild:
    return SparkBuild(registry.family(name), build_tables, write_full_build)


BUILDERS: dict[str, SparkBuild] = {
    "josie": _build("josie", josie.build_tables),
    "lshensemble": _build("lshensemble", lshensemble.build_tables, lshensemble.write_full_build),
    "mate": _build("mate", mate.build_tables, mate.write_full_build),
    "pexeso": _build("pexeso", pexeso.build_tables),
    "qgram": _build("qgram", qgram.build_tables),
}


def builder_of(name: str) -> SparkBuild:
    """The Spark build of family ``name``; ``ValueError`` naming the known ones otherwise."""
    found = BUILDERS.get(name)
    if found is None:
        raise ValueError(f"no Spark build for index family {name!r}; choose one of {', '.join(BUILDERS)}")
    return found
