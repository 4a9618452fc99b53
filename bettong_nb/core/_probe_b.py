def f():
    from . import _probe_a
