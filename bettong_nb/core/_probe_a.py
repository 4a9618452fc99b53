from . import _probe_b
