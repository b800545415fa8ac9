"""Tiny test runner: no framework, stdlib only.

Collects tests/test_*.py (or the files named on the command line), runs every
function named test_*; a test that is a generator yields (name, callable) pairs,
each a test of its own (a generator that yields none is a failure). Prints one line per test and ends with
'N passed, N failed'. Exit status 1 if anything failed.

  python3 tests/run_tests.py [-k SUBSTRING] [--durations] [--jobs N] [--variant NAME:K=V,K=V ...] [tests/test_x.py ...]

--variant runs the whole suite once per build (e.g. opt, asan, portable) with
the given environment variables set, prefixing each test name with NAME;
one closing line counts them all. A module that sets BUILD_INDEPENDENT = True
tests no C build and runs with the first variant only; a module's tuple
FIRST_BUILD_ONLY names tests (function, or function[case]) that run with the
first variant only: slow repeats whose code paths the other builds reach
through smaller tests. A variant's SUBSET=a+b
runs only the tests named a or b (a module, or module::function) in that build.
--durations adds, before the closing line, each build's seconds per test module.
--jobs N runs the test modules in N worker processes (each module's builds in
one worker, one after another; the slowest modules of the last run first),
each worker with a scratch folder of its own; a module's lines are printed
together when it ends.
"""
import importlib.util
import inspect
import io
import json
import multiprocessing
import os
import shutil
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def load(path):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def failure(message):
    """A test case that fails with message."""
    def raiser():
        raise AssertionError(message)
    return raiser


def cases(mod, keep=None):
    for fname, fn in inspect.getmembers(mod, inspect.isfunction):
        if not fname.startswith("test_") or fn.__module__ != mod.__name__:
            continue
        if keep and not keep(f"{mod.__name__}::{fname}"):
            continue
        if inspect.isgeneratorfunction(fn):
            yielded = 0
            try:
                for sub, call in fn():
                    yielded += 1
                    yield f"{mod.__name__}::{fname}[{sub}]", call
            except Exception:  # the generator itself failed
                yield f"{mod.__name__}::{fname}[collect]", failure("collection failed:\n" + traceback.format_exc())
            else:
                if not yielded:  # a test that checks nothing must not count as nothing
                    yield f"{mod.__name__}::{fname}[collect]", failure("the generator yielded no test cases")
        else:
            yield f"{mod.__name__}::{fname}", fn


def subset_filter(subset, matched):
    """SUBSET 'a+b' -> a predicate on 'module::function' names (None: keep all);
    each of a, b that names a test is added to `matched`."""
    if not subset:
        return None
    def keep(name):
        hits = [n for n in subset.split("+") if name == n or name.startswith(n + "::")]
        matched.update(hits)
        return bool(hits)
    return keep


def not_left_out(module, files):
    """False only for a real test module that the command line did not name: a
    SUBSET name that matched nothing otherwise is misspelt (or the test gone)."""
    chosen = {os.path.splitext(os.path.basename(p))[0] for p in files}
    return module in chosen or not os.path.exists(os.path.join(HERE, module + ".py"))


def first_build_only(mod, name):
    """True for a test case that the module's FIRST_BUILD_ONLY names
    (name: 'module::function' or 'module::function[case]')."""
    short = name.partition("::")[2]
    return any(short == n or short.startswith(n + "[") for n in getattr(mod, "FIRST_BUILD_ONLY", ()))


def run_module(mod, variant, pattern, results, keep=None, first=True):
    for name, call in cases(mod, keep):
        if not first and first_build_only(mod, name):
            continue
        name = f"{variant}:{name}" if variant else name
        if pattern and pattern not in name:
            continue
        t0 = time.time()
        try:
            call()
        except Exception as e:  # a failed assertion or a crash in the test
            results.append((name, False, time.time() - t0))
            print(f"FAIL {name} ({results[-1][2]:.2f}s)")
            msg = traceback.format_exc() if not isinstance(e, AssertionError) else str(e)
            print("     " + msg.strip().replace("\n", "\n     "))
        else:
            results.append((name, True, time.time() - t0))
            print(f"ok   {name} ({results[-1][2]:.2f}s)")
        sys.stdout.flush()


def print_durations(results):
    """Seconds per build and, within each, per test module, slowest first."""
    per = {}   # build -> module -> seconds
    for name, _, secs in results:
        variant, _, module = name.split("::")[0].rpartition(":")
        modules = per.setdefault(variant, {})
        modules[module] = modules.get(module, 0.0) + secs
    for variant, modules in per.items():
        print(f"durations {variant or '-'}: {sum(modules.values()):.1f}s")
        for module, secs in sorted(modules.items(), key=lambda kv: -kv[1]):
            print(f"  {secs:8.1f}s  {module}")


def run_file(path, variants, pattern, base_env):
    """Every build's tests of one module, in order: (results, the SUBSET names
    each build matched)."""
    results, matched = [], {}
    for variant, env in variants:
        os.environ.clear()
        os.environ.update(base_env)
        os.environ.update(env)
        matched[variant] = set()
        keep = subset_filter(env.get("SUBSET"), matched[variant])
        for name, m in list(sys.modules.items()):   # modules re-read the environment for this build
            if os.path.dirname(os.path.abspath(getattr(m, "__file__", None) or "/")) == HERE and name != "__main__":
                sys.modules.pop(name)
        mod = load(path)
        if getattr(mod, "BUILD_INDEPENDENT", False) and variant != variants[0][0]:
            continue  # pure-Python tests: one build is enough
        run_module(mod, variant, pattern, results, keep, variant == variants[0][0])
    return results, matched


DURATIONS = os.path.join(os.path.dirname(HERE), "build", "test-durations.json")


def worker_init():
    """A worker's own scratch folder (common.scratch), so two modules that
    happen to use the same scratch name never meet."""
    os.environ["LLM_SCRATCH"] = os.path.join(os.path.dirname(HERE), "build", "scratch", f"w{os.getpid()}")


def worker_run(args):
    path, variants, pattern, base_env = args
    out, saved, t0 = io.StringIO(), sys.stdout, time.time()
    sys.stdout = out
    try:
        results, matched = run_file(path, variants, pattern, dict(base_env, LLM_SCRATCH=os.environ["LLM_SCRATCH"]))
    except BaseException:   # a module that fails to load fails, and the others go on
        results, matched = [(f"{os.path.basename(path)}[load]", False, 0.0)], {}
        print(f"FAIL {os.path.basename(path)}[load]\n     " + traceback.format_exc().replace("\n", "\n     "))
    finally:
        sys.stdout = saved
    return path, out.getvalue(), results, matched, time.time() - t0


# Seconds per module, all five builds, of a fresh clone's run (Zen 4, 2 workers):
# the order of a run with no record of its own
FIRST_RUN = {"test_formats.py": 230, "test_cli.py": 221, "test_reference.py": 191, "test_eval.py": 131,
             "test_sampler.py": 130, "test_gguf.py": 105, "test_families.py": 90}


def last_durations():
    try:
        with open(DURATIONS) as f:
            return json.load(f)
    except (OSError, ValueError):
        return dict(FIRST_RUN)


def slowest_first(files):
    """The modules, those that took longest in the last run first (then the largest files)."""
    last = last_durations()
    key = lambda p: (last.get(os.path.basename(p), 0.0), os.path.getsize(p))
    return sorted(files, key=key, reverse=True)


def run_parallel(files, variants, pattern, jobs):
    """The modules across `jobs` worker processes; (results, matched) as run_file's, merged."""
    results, matched = [], {}
    shutil.rmtree(os.path.join(os.path.dirname(HERE), "build", "scratch"), ignore_errors=True)
    tasks = [(p, variants, pattern, dict(os.environ)) for p in slowest_first(files)]
    with multiprocessing.get_context("fork").Pool(jobs, initializer=worker_init, maxtasksperchild=1) as pool:
        per_module = last_durations()   # a module's wall time, its builds and its collection (test_kernels runs its binary there)
        for path, text, res, m, secs in pool.imap_unordered(worker_run, tasks):
            sys.stdout.write(text)
            sys.stdout.flush()
            results.extend(res)
            for v, names in m.items():
                matched.setdefault(v, set()).update(names)
            per_module[os.path.basename(path)] = round(secs, 1)
    os.makedirs(os.path.dirname(DURATIONS), exist_ok=True)
    with open(DURATIONS, "w") as f:
        json.dump(per_module, f, indent=0, sort_keys=True)
    return results, matched


def usage(message):
    print(f"run_tests.py: error: {message} (--help shows the usage)", file=sys.stderr)
    return 2


def main(argv):
    pattern = None
    durations = False
    jobs = 1
    files = []
    variants = []
    it = iter(argv)
    for a in it:
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        value = next(it, None) if a in ("-k", "--variant", "--jobs") else ""
        if value is None:
            return usage(f"{a} needs a value")
        if a == "-k":
            pattern = value
        elif a == "--durations":
            durations = True
        elif a == "--jobs":
            if not value.isdigit() or int(value) < 1:
                return usage(f"--jobs wants a whole number of at least 1, not {value!r}")
            jobs = int(value)
        elif a == "--variant":
            name, _, assigns = value.partition(":")
            if not name or any("=" not in kv for kv in assigns.split(",") if kv):
                return usage(f"--variant wants NAME:K=V,K=V, not {name + ':' + assigns!r}")
            env = dict(kv.split("=", 1) for kv in assigns.split(",") if kv)
            variants.append((name, env))
        elif a.startswith("-"):
            return usage(f"unknown option {a}")
        elif not os.path.isfile(a):
            return usage(f"no test file {a}")
        else:
            files.append(a)
    if not variants:
        variants = [("", {})]
    if not files:
        files = sorted(os.path.join(HERE, f) for f in os.listdir(HERE)
                       if f.startswith("test_") and f.endswith(".py"))
    sys.path.insert(0, HERE)
    for variant, env in variants:
        if env.get("SUBSET"):
            print(f"note: {variant} runs only {env['SUBSET'].replace('+', ', ')}")
    if jobs > 1:
        results, matched = run_parallel(files, variants, pattern, jobs)
    else:
        results, matched, base_env = [], {}, dict(os.environ)
        for path in files:
            res, m = run_file(path, variants, pattern, base_env)
            results.extend(res)
            for v, names in m.items():
                matched.setdefault(v, set()).update(names)
    for variant, env in variants:   # a SUBSET name that matched nothing is misspelt (or the test gone)
        for n in (env["SUBSET"].split("+") if env.get("SUBSET") else ()):
            if n not in matched.get(variant, set()) and not_left_out(n.split("::")[0], files):
                results.append((f"{variant}:SUBSET[{n}]", False, 0.0))
                print(f"FAIL {variant}:SUBSET[{n}]: names no test")
    if durations:
        print_durations(results)
    failures = [name for name, ok, _ in results if not ok]
    passed, failed = len(results) - len(failures), len(failures)
    if failures:
        print("failed:\n  " + "\n  ".join(failures))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
