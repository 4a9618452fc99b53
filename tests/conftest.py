import os
import sys

# tests import their loopback fixtures as plain modules (from servers import ...)
sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402

from wire_servers import WIRES, Switchboard, Wire  # noqa: E402


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
