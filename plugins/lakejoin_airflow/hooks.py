"""``LakeHook``: where the lake is and the process's query engine for it."""

from __future__ import annotations

from airflow.sdk.bases.hook import BaseHook

from lakejoin.config import HOME, LakeConfig
from lakejoin.query import QueryEngine, engine_for

HOME_VARIABLE = "lakejoin_home"  # airflow_settings.yaml; empty means "use $LAKEJOIN_HOME"


def resolve_home(home: str | None = None, variable: str | None = None) -> str | None:
    """An explicit ``home`` wins, then the Airflow Variable ``lakejoin_home``, then
    ``$LAKEJOIN_HOME`` (``LakeConfig`` falls back to ``./.lakejoin``)."""
    return home or variable or HOME.read() or None


class LakeHook(BaseHook):
    """The lake a task reads; ``home`` overrides the Variable and the environment."""

    conn_name_attr = "lakejoin_home"
    hook_name = "Lakejoin lake"

    def __init__(self, home: str | None = None) -> None:
        super().__init__()
        self.home = home

    def get_config(self) -> LakeConfig:
        from airflow.sdk import Variable

        return LakeConfig.from_args(resolve_home(self.home, Variable.get(HOME_VARIABLE, default="")), quiet=True)

    def get_engine(self) -> QueryEngine:
        return engine_for(self.get_config())
