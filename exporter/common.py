"""export.py's shared basics: the program name, the user-facing error, one-line messages."""
import sys


PROG = "export.py"


class ExportError(Exception):
    """A user-facing error: printed as one line, exit status 1."""


def first_line(e):
    """An exception's message cut to one line ('' when it has none)."""
    return (str(e).splitlines() or [""])[0]


def log(msg):
    sys.stderr.write(f"{PROG}: {msg}\n")
    sys.stderr.flush()
