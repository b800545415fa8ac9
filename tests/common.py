"""Shared helpers for the tests: where things are, and how to run them.

Environment:
  LLM_MODELS   folder with stories260K.bin, tok512.bin, tokenizer.bin, tokenizer.model
               (default ../shared/models beside the checkout)
  RUN          the ./run binary under test (default ./run; `make test-asan` sets ./run-asan)
"""
import math
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.abspath(os.environ.get("LLM_MODELS", os.path.join(ROOT, "..", "shared", "models")))
RUN = os.environ.get("RUN", os.path.join(ROOT, "run"))
TESTS = os.path.join(ROOT, "tests")
BUILD = os.path.join(ROOT, "build")   # test binaries and scratch files (git-ignored)


def model(name):
    path = os.path.join(MODELS, name)
    assert os.path.exists(path), f"missing test model {path} (set LLM_MODELS)"
    return path


def scratch(name):
    os.makedirs(BUILD, exist_ok=True)
    return os.path.join(BUILD, name)


def run(args, input=None, timeout=120, binary=None, env=None):
    """Run a binary (default RUN) with args (and env added to the environment);
    returns (returncode, stdout bytes, stderr str)."""
    cmd = [binary or RUN] + [str(a) for a in args]
    full_env = dict(os.environ, **env) if env else None
    p = subprocess.run(cmd, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, env=full_env)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def rel_diff(got, ref):
    """(max |got - ref| / max |ref|, index of the largest difference).

    The sequences must have the same length (else AssertionError). A NaN or
    infinity in either is an infinite difference at its index (Python's max()
    would skip a NaN), so a check `rel <= tol` fails on it."""
    assert len(got) == len(ref), f"{len(got)} values against {len(ref)} expected"
    assert len(ref) > 0, "nothing to compare"
    scale, worst, at = 0.0, 0.0, 0
    for i, (g, r) in enumerate(zip(got, ref)):
        if not (math.isfinite(g) and math.isfinite(r)):
            return float("inf"), i
        if abs(g - r) > worst:
            worst, at = abs(g - r), i
        scale = max(scale, abs(r))
    return worst / (scale if scale > 0 else 1.0), at
