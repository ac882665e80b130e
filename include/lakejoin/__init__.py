"""Lakejoin: joinable-table discovery over a Delta lake.

The library is framework-free: Airflow never appears here and Spark only under
``lakejoin.spark``. See DESIGN (README "Architecture") for the layout.
"""

__version__ = "0.1.0"
