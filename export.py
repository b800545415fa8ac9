#!/usr/bin/env python3
"""export.py -- convert Llama-style checkpoints and tokenizers for the C engine.

  python3 export.py [options] INPUT OUTPUT        convert a model
  python3 export.py tokenizer INPUT OUTPUT.bin     convert a tokenizer
  python3 export.py random [options] OUTPUT        seeded random checkpoint

Run `python3 export.py --help` for the input kinds and every option. The code
lives in the exporter package (exporter/__init__.py lists its modules); this
file is its entry point.
"""
import os
import sys

try:
    import numpy  # noqa: F401
except ImportError:  # pragma: no cover - depends on the interpreter
    # The Debian python3 has numpy; a pyenv/venv python3 first on PATH may not.
    _alt = "/usr/bin/python3"
    if (__name__ == "__main__" and os.path.exists(_alt)
            and os.path.realpath(sys.executable) != os.path.realpath(_alt)
            and not os.environ.get("EXPORT_PY_REEXEC")):
        os.environ["EXPORT_PY_REEXEC"] = "1"
        os.execv(_alt, [_alt] + sys.argv)
    sys.stderr.write("export.py: error: numpy is required (try /usr/bin/python3 export.py ...)\n")
    raise SystemExit(1)

from exporter.cli import main  # noqa: E402
from exporter.detect import read_checkpoint  # noqa: E402  (README's `export.read_checkpoint`)

__all__ = ["main", "read_checkpoint"]

if __name__ == "__main__":
    sys.exit(main())
