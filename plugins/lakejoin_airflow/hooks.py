"""``LakeHook``: where the lake is and the process's query engine for it.

:func:`lake_engine` is the one engine factory of the Airflow side: the operators reach it through ``LakeHook`` (in a
task, where the Task SDK reads Variables), the plugin's REST API and pages directly (in the API server, which reads
them from the metadata database). Both get the process's one engine per lake (``lakejoin.query.engine_for``).
"""

from __future__ import annotations

from airflow.sdk.bases.hook import BaseHook

from lakejoin.config import HOME, LakeConfig
from lakejoin.query import QueryEngine, engine_for

HOME_VARIABLE = "lakejoin_home"  # airflow_settings.yaml; empty means "use $LAKEJOIN_HOME"


def resolve_home(home: str | None = None, variable: str | None = None) -> str | None:
    """An explicit ``home`` wins, then the Airflow Variable ``lakejoin_home``, then
    ``$LAKEJOIN_HOME`` (``LakeConfig`` falls back to ``./.lakejoin``)."""
    return home or variable or HOME.read() or None


def lake_config(home: str | None = None, variable: str | None = None) -> LakeConfig:
    """The lake :func:`resolve_home` names."""
    return LakeConfig.from_args(resolve_home(home, variable), quiet=True)


def lake_engine(home: str | None = None, variable: str | None = None) -> QueryEngine:
    """The process's query engine for the lake :func:`resolve_home` names."""
    return engine_for(lake_config(home, variable))


class LakeHook(BaseHook):
    """The lake a task reads; ``home`` overrides the Variable and the environment."""

    conn_name_attr = "lakejoin_home"
    hook_name = "Lakejoin lake"

    def __init__(self, home: str | None = None) -> None:
        super().__init__()
        self.home = home

    def get_config(self) -> LakeConfig:
        """The lake this hook names (:func:`resolve_home`)."""
        return lake_config(self.home, self._home_variable())

    def get_engine(self) -> QueryEngine:
        """The process's query engine for this hook's lake (:func:`lake_engine`)."""
        return lake_engine(self.home, self._home_variable())

    @staticmethod
    def _home_variable() -> str:
        from airflow.sdk import Variable  # the Task SDK's: a hook runs in a task

        return str(Variable.get(HOME_VARIABLE, default=""))
