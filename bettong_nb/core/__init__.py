"""The core: the loop (``agent``), sessions, options, the capability protocol, the provider seam
and its neutral message format (``provider``, ``images``), approvals, events, and the accounting
(``usage``, ``pricing``, ``budget``, ``results``, ``frames``).

It imports only ``safety``, ``http`` and ``errors`` below it. Records (save, export), batches and
the notebook sit above it: where the core offers them (``Session.save``, ``RunResult.export``,
``Agent.map``) it calls a hook that the front door (``bettong_nb/__init__.py``) fills, see
:mod:`bettong_nb.core.hooks`.
"""
