"""Strict JSON reading for config files: no duplicate keys, one-line errors, and checked
fields (counts, integers, floats, booleans, types)."""
import json
import math

from .common import ExportError, first_line
from .llmw import INT32_MAX


def _is_count(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _no_duplicate_keys(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise ValueError(f"duplicate key {k!r}")
        obj[k] = v
    return obj


def parse_json(data, where):
    """JSON text or bytes -> object; ExportError naming `where` for bad UTF-8, bad
    syntax, duplicate keys or nesting too deep to parse."""
    try:
        return json.loads(data, object_pairs_hook=_no_duplicate_keys)
    except (ValueError, RecursionError) as e:   # UnicodeDecodeError is a ValueError
        what = "nested too deeply" if isinstance(e, RecursionError) else first_line(e)
        raise ExportError(f"{where}: not valid JSON ({what})")


def _json(path):
    """A JSON file that must hold an object (dict)."""
    with open(path, "rb") as fh:
        obj = parse_json(fh.read(), path)
    if not isinstance(obj, dict):
        raise ExportError(f"{path}: expected a JSON object, found {type(obj).__name__}")
    return obj


def _cfg_int(conf, key, where, default=None):
    """conf[key] (default when absent or null) as a positive 32-bit integer."""
    v = conf.get(key)
    v = default if v is None else v
    if v is None:
        raise ExportError(f"{where}: missing field {key}")
    if not isinstance(v, int) or isinstance(v, bool) or not 0 < v <= INT32_MAX:
        raise ExportError(f"{where}: field {key} = {v!r} must be a positive 32-bit integer")
    return v


def _cfg_float(conf, key, where, default, low=0.0, low_ok=True):
    """conf[key] (default when absent or null) as a finite float >= low (> low
    unless low_ok)."""
    v = conf.get(key)
    v = default if v is None else v
    ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    try:
        f = float(v) if ok else math.nan
    except OverflowError:   # an integer beyond the float range
        f = math.inf
    if not (math.isfinite(f) and (f >= low if low_ok else f > low)):
        raise ExportError(f"{where}: field {key} = {v!r} must be a finite number "
                          f"{'>=' if low_ok else '>'} {low:g}")
    return f


def _cfg_bool(conf, key, where, default=False):
    v = conf.get(key, default)
    if not isinstance(v, bool):
        raise ExportError(f"{where}: field {key} = {v!r} must be true or false")
    return v


def _cfg_type(conf, key, where, types, what):
    """conf[key] (None when absent) that must be None or of `types`."""
    v = conf.get(key)
    if v is not None and not isinstance(v, types):
        raise ExportError(f"{where}: field {key} = {v!r} must be {what}")
    return v
