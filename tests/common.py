"""Shared helpers for the tests: where things are, and how to run them.

Environment:
  LLM_MODELS   folder with stories260K.bin, tok512.bin, tokenizer.bin, tokenizer.model
               (default ../shared/models beside the checkout)
  RUN          the ./run binary under test (default ./run; `make test-asan` sets ./run-asan)
               Emulated builds (i386) are run through wrapper scripts in build/qemu/.
"""
import contextlib
import fcntl
import math
import os
import re
import resource
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.abspath(os.environ.get("LLM_MODELS", os.path.join(ROOT, "..", "shared", "models")))
RUN = os.environ.get("RUN", os.path.join(ROOT, "run"))
TESTS = os.path.join(ROOT, "tests")
BUILD = os.path.join(ROOT, "build")   # test binaries and scratch files (git-ignored)
# run_tests.py --jobs gives each worker process a scratch folder of its own
SCRATCH = os.environ.get("LLM_SCRATCH", BUILD)


def model(name):
    path = os.path.join(MODELS, name)
    assert os.path.exists(path), f"missing test model {path} (set LLM_MODELS)"
    return path


def scratch(name):
    os.makedirs(SCRATCH, exist_ok=True)
    return os.path.join(SCRATCH, name)


@contextlib.contextmanager
def locked(path):
    """Hold an exclusive lock on path + '.lock' (for files that the suite's
    worker processes share, such as test_bpe's vocabularies in build/bpe)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run(args, input=None, timeout=120, binary=None, env=None, memory_limit=None):
    """Run a binary (default RUN) with args (and env added to the environment);
    returns (returncode, stdout bytes, stderr str). memory_limit (bytes) makes
    larger allocations fail as an ordinary malloc failure would (in ASan builds
    too: the warning ASan prints for the refusal is dropped), and no core file
    is written."""
    binary = binary or RUN
    cmd = [binary] + [str(a) for a in args]
    limit = None
    if memory_limit and asan(binary):
        env = dict(env or {}, **asan_allocation_limit(memory_limit))
    elif memory_limit:
        limit = lambda: limit_memory(memory_limit)
    full_env = dict(os.environ, **env) if env else None
    p = subprocess.run(cmd, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, env=full_env, preexec_fn=limit)
    err = p.stderr.decode("utf-8", "replace")
    if memory_limit:
        err = re.sub(r"(?m)^==\d+==WARNING: AddressSanitizer failed to allocate 0x[0-9a-f]+ bytes\n", "", err)
    return p.returncode, p.stdout, err


def asan(binary):
    """True for an AddressSanitizer build (it reserves terabytes of shadow
    memory, so an address-space limit would stop it at start)."""
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


def asan_allocation_limit(n):
    """ASan's own cap: a larger malloc returns NULL instead of aborting."""
    opts = os.environ.get("ASAN_OPTIONS", "")
    return {"ASAN_OPTIONS": (opts + ":" if opts else "") +
            f"allocator_may_return_null=1:max_allocation_size_mb={n >> 20}"}


def limit_memory(n):
    """In the child: address space capped at n bytes (qemu-i386 itself needs
    about 4.1 GiB for the guest's address space), no core dumps."""
    resource.setrlimit(resource.RLIMIT_AS, (n, n))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


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
