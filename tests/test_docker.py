"""No Docker engine runs here: check that the compose file parses, names the services the
deployment needs, and that every path it mounts or copies exists."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

DOCKER = Path(__file__).resolve().parents[1] / "docker"


def compose():
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def test_compose_has_airflow_postgres_and_spark_services():
    services = compose()["services"]
    assert {
        "postgres",
        "airflow-api-server",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
        "spark-master",
        "spark-worker",
    } <= set(services)
    assert services["airflow-api-server"]["environment"]["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql")


def test_every_bind_mount_source_exists():
    for name, service in compose()["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DOCKER / source).resolve().exists(), f"{name} mounts missing {source}"


def test_every_dockerfile_copy_source_exists():
    repo = DOCKER.parent
    for line in (DOCKER / "Dockerfile").read_text().splitlines():
        match = re.match(r"COPY\s+(.+)\s+\S+$", line.strip())
        if match:
            for source in match.group(1).split():
                assert (repo / source).exists(), f"Dockerfile copies missing {source}"
