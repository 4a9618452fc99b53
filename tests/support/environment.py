"""The environment the tests run in: no credential of this machine takes part.

    from support.environment import quiet_environment  # noqa: F401  (an autouse fixture)
"""

from __future__ import annotations

import os

import pytest

from bettong_nb.safety import secrets

__all__ = ["quiet_environment"]


@pytest.fixture(autouse=True)
def quiet_environment(monkeypatch):
    """No credential from the machine running the tests takes part."""
    for name in list(os.environ):
        if secrets.is_credential_name(name):
            monkeypatch.delenv(name)
