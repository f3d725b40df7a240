"""Shared fixtures of the protocol tests: bus URLs per backend (:mod:`testkit.ports`)."""

import pytest

from testkit.ports import bus_url, free_base_port  # noqa: F401  (re-exported for the tests)


@pytest.fixture(params=["inproc", "ipc", "tcp"])
def url(request, tmp_path):
    return bus_url(request.param, str(tmp_path))
