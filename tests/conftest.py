"""Shared test configuration: a bounded hypothesis profile sized for a 2-core CI."""

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    """Runs never land in the working directory's store: module-scoped fixtures share one."""
    import tempfile

    os.environ["ECHOSIM_STORE"] = tempfile.mkdtemp(prefix="echosim-store-")


@pytest.fixture(autouse=True)
def private_run_store(tmp_path_factory, monkeypatch):
    """Every test gets its own run store (``$ECHOSIM_STORE``, inherited by subprocesses)."""
    path = tmp_path_factory.mktemp("store")
    monkeypatch.setenv("ECHOSIM_STORE", str(path))
    return path
