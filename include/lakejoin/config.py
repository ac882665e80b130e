"""Where the lake lives and how Spark is reached, and every ``LAKEJOIN_*`` environment setting.

Each setting is declared once below (:data:`SETTINGS`) with its default, how its text is parsed,
its meaning and its kind: a user setting, a test fault switch or a test pause point. Its value is
read from the environment when asked (:meth:`Setting.read`), never cached, so a changed environment
takes effect at the next read. An unset or empty variable means the default. The documentation's
settings reference is generated from :data:`SETTINGS`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")

DEFAULT_HOME = ".lakejoin"


class SettingKind(Enum):
    """What a ``LAKEJOIN_*`` setting is for: users, or tests' fault switches and pause points."""

    USER = "user setting"
    FAULT_SWITCH = "test fault switch"
    PAUSE_POINT = "test pause point"


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One ``LAKEJOIN_*`` environment variable: its name, default, parser, meaning and kind."""

    name: str
    default: T
    parse: Callable[[str], T]
    meaning: str
    kind: SettingKind = SettingKind.USER

    def read(self) -> T:
        """The variable's value now, parsed; the default when it is unset or empty."""
        text = os.environ.get(self.name)
        return self.parse(text) if text else self.default


class UnknownSetting(KeyError):
    """A ``LAKEJOIN_*`` name that :data:`SETTINGS` does not declare."""


SETTINGS: dict[str, Setting[Any]] = {}


def _declare(declared: Setting[T]) -> Setting[T]:
    SETTINGS[declared.name] = declared
    return declared


def setting(name: str) -> Setting[Any]:
    """The declaration of ``name``; :class:`UnknownSetting` for a name not declared here."""
    try:
        return SETTINGS[name]
    except KeyError:
        raise UnknownSetting(f"{name} is not a Lakejoin setting (known: {', '.join(sorted(SETTINGS))})") from None


def _text(value: str) -> str:
    return value


HOME: Setting[str | None] = _declare(
    Setting("LAKEJOIN_HOME", None, _text, "lake root when `--home` is not given (unset: `./.lakejoin`)")
)
SPARK_MASTER = _declare(
    Setting("LAKEJOIN_SPARK_MASTER", "local[*]", _text, "Spark master URL when `--spark-master` is not given")
)
SHUFFLE_PARTITIONS = _declare(
    Setting("LAKEJOIN_SHUFFLE_PARTITIONS", 8, int, "Spark SQL shuffle partitions of the process's session")
)
DRIVER_MEMORY = _declare(Setting("LAKEJOIN_DRIVER_MEMORY", "4g", _text, "`spark.driver.memory` of the session"))
SPARK_JAVA_OPTIONS: Setting[str | None] = _declare(
    Setting(
        "LAKEJOIN_SPARK_JAVA_OPTIONS",
        None,
        _text,
        "extra JVM options of the Spark driver and executors, e.g. `-XX:TieredStopAtLevel=1` (the JIT's quick tier"
        " only: about 40 % less JVM CPU on a run of one small table; C1-only code may cost more on longer runs)",
    )
)
SPARK_CLASS_ARCHIVE: Setting[str | None] = _declare(
    Setting(
        "LAKEJOIN_SPARK_CLASS_ARCHIVE",
        None,
        _text,
        "the Spark driver JVM's class-data archive (`make spark-archive` writes it; unset: in the Python"
        " environment, beside its pyspark; `off`: none)",
    )
)
# Set by ``--json`` and ``--quiet``: startup banners and warnings must not reach the terminal or a caller's stderr.
SPARK_CONSOLE_LOG: Setting[str | None] = _declare(
    Setting(
        "LAKEJOIN_SPARK_CONSOLE_LOG",
        None,
        _text,
        "file for the Spark JVM's and its Python workers' console output (unset: the process's stderr)",
    )
)
LEASE_SECONDS = _declare(
    Setting(
        "LAKEJOIN_LEASE_SECONDS", 30.0, float, "seconds a dead writer's lease lasts before the next writer takes it"
    )
)
INDEX_MEMORY: Setting[str | None] = _declare(
    Setting(
        "LAKEJOIN_INDEX_MEMORY",
        None,
        _text,
        "memory one family's searcher may take to load, e.g. `8G` (unset: MemAvailable and the cgroup's headroom)",
    )
)
PORTAL_PORT = _declare(
    Setting("LAKEJOIN_PORTAL_PORT", 8790, int, "port of the bundled lake's local portal (part of every dataset id)")
)
LOCAL_BUILD_ROWS = _declare(
    Setting(
        "LAKEJOIN_LOCAL_BUILD_ROWS",
        2_000_000,
        int,
        "an index build of at most this many rows (full: the lake's cells) runs in-process (0: always Spark)",
    )
)
LOCAL_INGEST_FILES = _declare(
    Setting(
        "LAKEJOIN_LOCAL_INGEST_FILES",
        16,
        int,
        "a run changing at most this many files parses them in-process, not on Spark (0: always Spark)",
    )
)
LOCAL_INGEST_BYTES = _declare(
    Setting(
        "LAKEJOIN_LOCAL_INGEST_BYTES",
        16 * 2**20,
        int,
        "a run changing at most this many bytes of files parses them in-process, not on Spark (0: always Spark)",
    )
)
EMBED_THREADS = _declare(
    Setting("LAKEJOIN_EMBED_THREADS", 0, int, "onnxruntime intra-op threads of the embedding model (0: one per core)")
)
MAX_UPLOAD_BYTES = _declare(
    Setting("LAKEJOIN_MAX_UPLOAD_BYTES", 16 * 2**20, int, "largest table the REST API accepts (larger: 413)")
)
FAIL_DISCOVER_SHARD: Setting[str | None] = _declare(
    Setting(
        "LAKEJOIN_TEST_FAIL_DISCOVER_SHARD",
        None,
        _text,
        "the discover task of this shard fails its first attempt, so Spark retries it",
        SettingKind.FAULT_SWITCH,
    )
)
PAUSE_AT: Setting[str | None] = _declare(
    Setting(
        "LAKEJOIN_PAUSE_AT",
        None,
        _text,
        "a process reaching this named point (`lakejoin.pause`; `index:<family>`: that family's build) prints it and"
        " sleeps until killed",
        SettingKind.PAUSE_POINT,
    )
)

# Kept for importers of the name.
SPARK_CONSOLE_LOG_ENV = SPARK_CONSOLE_LOG.name


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """``--home`` wins, then ``$LAKEJOIN_HOME``, then ``./.lakejoin``."""
    chosen = home or HOME.read() or DEFAULT_HOME
    return Path(chosen).expanduser().resolve()


@dataclass(frozen=True)
class LakeConfig:
    """Everything a pipeline run needs to know about its environment."""

    home: Path
    # None: keep the master spark-submit chose (spark_jobs/), else local[*].
    spark_master: str | None = field(default_factory=SPARK_MASTER.read)
    quiet: bool = False

    @classmethod
    def from_args(cls, home: str | None = None, spark_master: str | None = None, quiet: bool = False) -> LakeConfig:
        """The config of a command's arguments: ``home`` resolved by :func:`resolve_home`, the Spark master
        ``spark_master`` or else ``$LAKEJOIN_SPARK_MASTER``."""
        master = spark_master or SPARK_MASTER.read()
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
