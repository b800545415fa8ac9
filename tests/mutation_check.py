#!/usr/bin/python3
"""Does the suite see a deliberate bug? Applies each mutation below, one at a
time, to a copy of the source tree (the working tree is never touched),
rebuilds the optimised binaries there, runs the part of the suite that should
notice, and expects it to fail.

  /usr/bin/python3 tests/mutation_check.py [-k SUBSTRING]     (make mutation-check)

A mutation is (description, old text, new text, [(test file, -k filter or None)]).
The old text is looked up across the engine's sources (ENGINE_SOURCES: the
top-level .c/.h files and any headers under engine/ or src/), so the list
keeps working when code moves between those files; it must occur exactly once.
Prints one line per mutation, "killed" or "SURVIVED" (or "ERROR" when it
cannot be applied or does not compile), and exits 1 unless every mutation
was killed. The
unmutated copy must pass the same selections first.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
MODELS = os.path.abspath(os.environ.get("LLM_MODELS", os.path.join(ROOT, "..", "shared", "models")))
ENGINE_SOURCES = ("*.c", "*.h", "engine/**/*.[ch]", "tokenizer/**/*.[ch]", "src/**/*.[ch]")
TARGETS = ["build/run.stamp", "build/logits", "build/test_kernels"]   # the opt variant
VARIANT = "opt:RUN=./run,LOGITS=build/logits,KERNELS=build/test_kernels,TOKUNIT=build/test_tokenizer_unit"

KERNELS = [("test_kernels.py", None)]
MUTATIONS = [
    ("the scalar twin (llm_matvec) returns NaN",
     "for (int r = 0; r < w->rows; r++) out[r] = tr->dot(&wp, r, x, xq, xs);",
     "for (int r = 0; r < w->rows; r++) out[r] = NAN;", KERNELS),
    ("a padded q4 row's activation codes are not zeroed past the real columns",
     "memset(xq + (size_t)n * (size_t)a, 0, (size_t)(np - n) * (size_t)a);",
     "memset(xq + (size_t)n * (size_t)a, 1, (size_t)(np - n) * (size_t)a);", KERNELS),
    ("the q4_K embedding lookup writes its last sub-block's padding past the row",
     "for (int l = 0; l < len; l++) out[256 * k + 32 * j + l]",
     "for (int l = 0; l < 32; l++) out[256 * k + 32 * j + l]", KERNELS),
    ("the int8 KV quantizer truncates instead of rounding",
     "long q = lroundf(vh[i] * inv);",
     "long q = (long)(vh[i] * inv);", KERNELS),
    ("the top-k / top-p draw is not renormalised over the kept tokens",
     "float r = coin * mass, cdf = 0.0f;",
     "float r = coin, cdf = 0.0f;", [("test_sampling.py", None)]),
    ("chat prefills a later turn one position early",
     "prefill(e, ids, n, pos);",
     "prefill(e, ids, n, pos > 0 ? pos - 1 : 0);", [("test_cli.py", "chat")]),
    ("chat does not forward the EOS that ends a reply",
     "if (!end) print_token(e, token, next);",
     "if (end) break;\n            print_token(e, token, next);", [("test_cli.py", "chat")]),
    ("batched LayerNorm perturbed by 4 ulp in one value per later token (prefill != decode)",
     "llm_layernorm(out + (size_t)t * n, x + (size_t)t * n, g, b, n, c->norm_eps);",
     "{ llm_layernorm(out + (size_t)t * n, x + (size_t)t * n, g, b, n, c->norm_eps); "
     "if (t) out[(size_t)t * n] *= 1.0000005f; }",
     [("test_reference.py", "prefill_equals_decode")]),
    ("LayerNorm drops its bias",
     "out[i] = (g ? g[i] : 1.0f) * ((x[i] - mean) * inv) + (b ? b[i] : 0.0f);",
     "out[i] = (g ? g[i] : 1.0f) * ((x[i] - mean) * inv);", KERNELS),
]


def engine_files(tree):
    """The engine's source files in tree, relative paths."""
    found = set()
    for pattern in ENGINE_SOURCES:
        found.update(os.path.relpath(p, tree) for p in glob.glob(os.path.join(tree, pattern), recursive=True))
    return sorted(found)


def locate(tree, old):
    """The one engine file holding old (ValueError if none or several places do)."""
    hits = [(f, open(os.path.join(tree, f), encoding="utf-8").read().count(old)) for f in engine_files(tree)]
    hits = [(f, n) for f, n in hits if n]
    if sum(n for _, n in hits) != 1:
        raise ValueError(f"the old text occurs {sum(n for _, n in hits)} times in the engine's sources "
                         f"({', '.join(f for f, _ in hits) or 'none'}), not once")
    return hits[0][0]


def copy_tree(dest):
    """The working tree's sources (not its builds, binaries or .git) in dest."""
    ignore = shutil.ignore_patterns(".git", "build", "run", "run-*", "models", "__pycache__")
    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)


def build(tree, log):
    p = subprocess.run(["make", "--no-print-directory", "-s"] + TARGETS, cwd=tree, stdout=log, stderr=log)
    return p.returncode == 0


def run_suite(tree, selections, log):
    """True if every selection passes in tree."""
    env = dict(os.environ, LLM_MODELS=MODELS)
    ok = True
    for test_file, pattern in selections:
        cmd = [PYTHON, "tests/run_tests.py", "--variant", VARIANT] + (["-k", pattern] if pattern else [])
        p = subprocess.run(cmd + [os.path.join("tests", test_file)], cwd=tree, env=env, stdout=log, stderr=log,
                           timeout=1800)
        ok = ok and p.returncode == 0
    return ok


def main(argv):
    only = argv[argv.index("-k") + 1] if "-k" in argv else None
    chosen = [m for m in MUTATIONS if not only or only in m[0]]
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        tree = os.path.join(tmp, "src")
        copy_tree(tree)
        log_path = os.path.join(tmp, "log.txt")
        with open(log_path, "w") as log:
            selections = sorted({s for m in chosen for s in m[3]}, key=str)
            if not build(tree, log) or not run_suite(tree, selections, log):
                log.flush()
                sys.stdout.write(open(log_path).read()[-4000:])
                print("error: the unmutated tree does not build or pass the selected tests")
                return 2
            survived = 0
            for description, old, new, sel in chosen:
                t0 = time.time()
                try:
                    path = os.path.join(tree, locate(tree, old))
                except ValueError as e:
                    print(f"ERROR    {description}: {e}")
                    survived += 1
                    continue
                original = open(path, encoding="utf-8").read()
                with open(path, "w", encoding="utf-8") as f:
                    f.write(original.replace(old, new))
                try:
                    built = build(tree, log)
                    killed = built and not run_suite(tree, sel, log)
                finally:
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(original)
                survived += not killed
                if not built:   # a mutation that does not compile proves nothing
                    print(f"ERROR    {description}: the mutated tree does not build (see make's output)")
                    continue
                where = ", ".join(f"{t}{' -k ' + k if k else ''}" for t, k in sel)
                print(f"{'killed  ' if killed else 'SURVIVED'} {description} "
                      f"[{os.path.relpath(path, tree)}; {where}; {time.time() - t0:.0f}s]")
                sys.stdout.flush()
    print(f"{len(chosen) - survived} of {len(chosen)} mutations killed")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
