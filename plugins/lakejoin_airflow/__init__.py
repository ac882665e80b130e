"""Lakejoin's Airflow integration: the REST API and search page (``api``), the hook that finds
the lake (``hooks``) and the DAG operators (``operators``).

``plugins/lakejoin_plugin.py`` registers it with Airflow. This package is listed in
``plugins/.airflowignore`` so that Airflow's plugin loader, which imports every ``.py`` file under
the plugins folder by its bare file name, does not import these modules a second time as
top-level ``api``/``hooks``/``operators``; DAGs and the plugin import them as
``lakejoin_airflow.*`` (the plugins folder is on ``sys.path``).
"""
