"""The shell capability (``capability``) and what it stands on: a reader of bash's syntax
(``bash``, ``reading``), the seatbelt that judges each command (``seatbelt``), the static rule
an allow list adds (``static``) and the process runner with namespaces, cgroups and
kill-on-exit (``process``).

    from bettong_nb import capabilities as caps
    caps.shell(root="data", allow=[r"^git (status|log)\\b"])
"""

from .capability import DEFAULT_DENY, Shell, isolation, shell

__all__ = ["Shell", "shell", "DEFAULT_DENY", "isolation"]
