"""Where the lake lives and how Spark is reached; read once from flags and the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_HOME = ".lakejoin"
# A file for the Spark JVM's console output (and its Python workers'), set by ``--json`` and
# ``--quiet``: startup banners and warnings must not reach the terminal or a caller's stderr.
SPARK_CONSOLE_LOG_ENV = "LAKEJOIN_SPARK_CONSOLE_LOG"


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """``--home`` wins, then ``$LAKEJOIN_HOME``, then ``./.lakejoin``."""
    chosen = home or os.environ.get("LAKEJOIN_HOME") or DEFAULT_HOME
    return Path(chosen).expanduser().resolve()


@dataclass(frozen=True)
class LakeConfig:
    """Everything a pipeline run needs to know about its environment."""

    home: Path
    # None: keep the master spark-submit chose (spark_jobs/), else local[*].
    spark_master: str | None = field(default_factory=lambda: os.environ.get("LAKEJOIN_SPARK_MASTER", "local[*]"))
    quiet: bool = False

    @classmethod
    def from_args(cls, home: str | None = None, spark_master: str | None = None, quiet: bool = False) -> LakeConfig:
        master = spark_master or os.environ.get("LAKEJOIN_SPARK_MASTER", "local[*]")
        return cls(home=resolve_home(home), spark_master=master, quiet=quiet)

    @property
    def raw_dir(self) -> Path:
        """Content-addressed copies of ingested files, parsed to Parquet (``raw/<sha256>.parquet``)."""
        return self.home / "raw"

    @property
    def shard_cache_dir(self) -> Path:
        """Shard searchers' arrays, one folder per snapshot id (``lakejoin.query.shard_arrays``;
        ``vacuum`` deletes the expired snapshots' folders)."""
        return self.home / "cache" / "shards"

    @property
    def key_cache_dir(self) -> Path:
        """Composite keys' normalized tuples, one folder per key (``lakejoin.graph.key_cache``)."""
        return self.home / "cache" / "keys"

    def table_path(self, name: str) -> Path:
        """Location of a Delta table, e.g. ``catalog/datasets`` or ``index/josie/postings``."""
        return self.home / name
