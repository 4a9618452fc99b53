"""Make JupyterLab and Notebook 7 load the notebook extension of an editable install.

    pip install -e . && python -m bettong_nb.notebook.link_extension

A wheel installs the built extension into ``<prefix>/share/jupyter/labextensions/bettong-nb``
(see pyproject.toml); an editable install installs no data files, so the page would not load
it. This links that folder to ``bettong_nb/notebook/labextension`` in the source tree, so a
rebuild (``cd frontend && npm run build``) is what the next page load gets. The tests do the
same through JUPYTER_PATH (tests/support/browser.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["BUILT", "link"]

BUILT = Path(__file__).resolve().parent / "labextension"
NAME = "bettong-nb"


def link(prefix: str | Path = sys.prefix, *, force: bool = False) -> Path:
    """Link ``<prefix>/share/jupyter/labextensions/bettong-nb`` to the built extension; returns
    the link. An existing folder there (a wheel's copy) is replaced only with ``force``."""
    if not (BUILT / "package.json").exists():
        raise FileNotFoundError(f"{BUILT} holds no built extension: cd frontend && npm ci && npm run build")
    target = Path(prefix) / "share" / "jupyter" / "labextensions" / NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink():
        target.unlink()
    elif target.exists():
        if not force:
            raise FileExistsError(f"{target} exists (an installed copy); --force replaces it with the link")
        import shutil

        shutil.rmtree(target)
    target.symlink_to(BUILT, target_is_directory=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bettong_nb.notebook.link_extension", description=__doc__.split("\n")[0])
    parser.add_argument("--prefix", default=sys.prefix, help="environment prefix (default: this Python's)")
    parser.add_argument("--force", action="store_true", help="replace an installed copy")
    args = parser.parse_args(argv)
    try:
        target = link(args.prefix, force=args.force)
    except (FileNotFoundError, FileExistsError) as err:
        print(err, file=sys.stderr)
        return 1
    print(f"{target} -> {BUILT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
