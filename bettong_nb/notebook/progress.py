"""A batch's progress as a widget bar in the running cell (installed by ``%load_ext``).

    results = agent.map(prompts)     # a bar with done/failed counts and the running cost

When the batch ends (or is stopped) the bar is replaced by its last line, plain HTML that a
saved notebook and ``jupyter nbconvert`` keep: ``7/10 · 7 done · 0 failed · 3 cancelled · ... · 4.2 s · 1.7/s``.
"""

from __future__ import annotations

import html
import threading
from typing import Any, Mapping

from ..core.kernel import jupyter_kernel
from ..batches.local import Progress

__all__ = ["WidgetProgress"]


class WidgetProgress(Progress):
    """A widget bar when made in a kernel's main thread (where display() reaches the cell),
    the text bar otherwise."""

    def __init__(self, total: int, *, prices: Mapping[str, float] | None, enabled: bool = True):
        super().__init__(total, prices=prices, enabled=enabled)
        self._bar: Any = None
        if enabled and jupyter_kernel() is not None and threading.current_thread() is threading.main_thread():
            import ipywidgets
            from IPython.display import display

            self._bar = ipywidgets.IntProgress(min=0, max=max(total, 1), description="agent")
            self._label = ipywidgets.Label()
            self._box = ipywidgets.HBox([self._bar, self._label])
            self._handle = display(self._box, display_id=True)

    def show(self, final: bool) -> None:
        if self._bar is None:
            return super().show(final)
        if self._box is None:
            return None  # already ended
        if not final:
            self._bar.value = self.finished
            self._label.value = self.text()
            return None
        line = self.text(final=True)
        self._handle.update({"text/plain": line, "text/html": f'<div class="bettong-progress" style="font-size:13px">'
                                                               f'{html.escape(line)}</div>'}, raw=True)
        for widget in (self._bar, self._label, self._box):
            widget.close()
        self._box = None
        return None
