"""Registers Lakejoin with Airflow 3: the REST API + search page (mounted at ``/lakejoin`` by the
API server) and the search page's entry in the UI's navigation (Browse → Lakejoin search)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from lakejoin_airflow.api import app


class LakejoinPlugin(AirflowPlugin):
    """Registers the search API and its pages with Airflow's UI."""

    name = "lakejoin"
    fastapi_apps = [{"app": app, "url_prefix": "/lakejoin", "name": "Lakejoin search API"}]  # noqa: RUF012 (AirflowPlugin declares these as plain class-level lists)
    external_views = [  # noqa: RUF012
        {
            "name": "Lakejoin search",
            "href": "/lakejoin/search",
            "url_route": "lakejoin-search",
            "category": "browse",
            "destination": "nav",
        }
    ]
