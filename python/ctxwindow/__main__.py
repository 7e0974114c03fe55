"""``python -m ctxwindow``: the ``ctxwindow`` command (``replay``, ``count``)."""

from ctxwindow.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
