import os
import sys

# tests import their loopback fixtures as plain modules (from servers import ...)
sys.path.insert(0, os.path.dirname(__file__))
