"""Fixtures shared by the suites. Support code lives in the ``support`` package beside this file
(pytest puts this folder on the import path, as it does for every rootdir test folder)."""

import pytest

from support.wire import WIRES, Switchboard, Wire


@pytest.fixture(params=WIRES, ids=[w.name for w in WIRES])
def w(request) -> Wire:
    """Each wire format in turn: the same test runs against OpenAI, Anthropic and Ollama servers."""
    return request.param


@pytest.fixture(scope="module")
def board():
    """Loopback servers per wire format, shared by a test module."""
    board = Switchboard()
    yield board
    board.close()
