#!/usr/bin/python3
"""bench/bench.py -- the benchmark behind `make bench`: prefill and decode speed of
./run against limits this machine reaches, measured in the same run.

Usage (from anywhere; stdlib Python only (numpy and torch with anchors); needs ./run, i.e. `make` first):

    /usr/bin/python3 bench/bench.py                   # everything (~10 min on 2 quiet cores)
    BENCH_MODELS=260K,15M BENCH_RUNS=3 /usr/bin/python3 bench/bench.py

Environment:
    LLM_MODELS     folder with stories260K.bin, tok512.bin, tokenizer.bin
                   (default: ../shared/models relative to the repository root)
    BENCH_MODELS   rows to run, from 260K,15M,42M,110M (default: all)
    BENCH_DTYPES   from f32,f16,q8_0,q4_0,q4_K,Q4_K_M,Q5_K_M (default: all). Q4_K_M and
                   Q5_K_M are GGUF files llama-quantize makes (2. below): 15M rows only,
                   run when LLAMA_BENCH is given (else skipped, said under the table)
    BENCH_THREADS  thread counts (default: 1,2)
    BENCH_PROMPT   prompt tokens (default 128; 8 to 896), then 128 decoded tokens:
                   32 for short prompts (time to first token), 512 for long ones.
                   The models' contexts bound it: 128 for 15M and the sampler rows
                   (BENCH_SAMPLER=0 skips those), 384 for stories260K
    BENCH_RUNS     timed runs per row, the median is reported (default 5; stories260K
                   runs take ~30 ms, so its rows get 4 x BENCH_RUNS)
    BENCH_QUIET    background load, in cores, above which the machine counts as busy
                   (default 0.25)
    LLAMA_BENCH    path of llama.cpp's llama-bench: run it on the same checkpoints,
                   interleaved with ./run, and add its columns and the ratios
                   (bench/anchors.py says how each engine converts and runs)
    LLAMA2C        path of llama2.c's run (runq beside it for q8_0): the same
    BENCH_QUIET_WAIT, BENCH_BUSY_RETRIES, BENCH_QUIET_BUDGET
                   seconds to wait for a quiet machine before each run (3), repeats
                   of a run that was disturbed (2), and seconds in all that waits and
                   repeats may take (180)

What it does:
1. Compiles bench/membw.c and bench/fmapeak.c with `cc -O3 -march=native -fopenmp`
   (without -march=native where the compiler refuses it) into build/bench/; each
   takes the widest vectors the build targets (bench/isa.h: AVX-512, else AVX2
   with FMA, else NEON, else plain C) and the table names the ISA. It measures, for each thread count, at the start and again
   at the end (each program 3 times, the best kept; the shares use the better of
   start and end):
   - memory read bandwidth: a vector sum over a 1 GiB float buffer (DRAM) and a
     32 MiB one (cache-resident on this machine); best of the passes;
   - fp32 FMA peak: 16 independent vector FMA chains per thread, counted as
     2 flops per lane per FMA; best of the repetitions.
   A limit program that fails (a CPU or compiler it does not know) leaves its
   column "not measured" and the shares that need it blank; the rows still run.
2. Prepares the checkpoints, cached in build/bench/ and reused when present (a
   cached file that `./run --info` refuses is regenerated):
   - stories260K: $LLM_MODELS/stories260K.bin as is (f32, legacy llama2.c file),
     and `export.py --dtype f16|q8_0` of it; tokenizer tok512.bin;
   - random checkpoints (`export.py random --seed 0`, shared classifier) of the
     TinyStories shapes 15M (dim 288, 6 layers, 6 heads, hidden 768, seq 256),
     42M (512, 8, 8, 1376, seq 1024), 110M (768, 12, 12, 2048, seq 1024), vocab
     32000, in f32, f16 and q8_0 (group 32); tokenizer tokenizer.bin;
   - 15M only, GGUF presets Q4_K_M and Q5_K_M: the f32 checkpoint as an f32 GGUF
     (`export.py --format gguf --dtype f32 --tokenizer tokenizer.bin`), quantized by the
     llama-quantize beside LLAMA_BENCH (`llama-quantize F32.gguf OUT.gguf Q4_K_M`).
     Its rows of 288 are not whole 256-blocks, so llama-quantize's mix falls back
     (Q5_0 for Q4_K, Q5_1 for Q5_K, Q8_0 for Q6_K) on every matrix but ffn_down:
     the types a downloaded SmolLM2 or Qwen2.5 file holds. The project's writer
     cannot make that mix (export.py's GGUF types are f32, f16, q8_0, q4_0), so
     without LLAMA_BENCH these rows are skipped; llama.cpp runs the same files.
3. Builds, per tokenizer, a prompt text that tokenizes to exactly 128 tokens
   (BENCH_PROMPT) with BOS (checked with `./run -m tokenize`, and again from the
   stats line), saved as build/bench/prompt-<tokenizer>.txt (-<N>.txt for others).
4. Per checkpoint runs (256 steps: the prompt's and 128 more)
       ./run CKPT -z TOK -n 256 -t 1 -s SEED -i PROMPT --threads N
   once untimed (page cache), then BENCH_RUNS times per thread count (thread counts
   alternating, run r with seed r for all of them: the engine's tokens do not depend
   on the thread count), and reports the medians of the prefill and decode tok/s
   from the stats line on stderr, and the median peak RSS (ru_maxrss from
   os.wait4; it includes the mapped checkpoint pages). A run must decode 128
   tokens (prompt 128 + 128 = 256 steps); if the model samples BOS early, the run
   is repeated with seed + 1000 (up to 5 times).
5. Noise: the machine is shared. Around every run the bench reads /proc/stat and
   reports the CPU time other processes used meanwhile ("background", in cores).
   It waits (sleeping) for a quiet machine before each run and repeats disturbed
   runs, within the limits above. OpenMP runs with 2 threads on 2 cores suffer
   most: when another process holds a core, every parallel region's barrier waits
   for the scheduler. ./run's default --wait auto lets idle threads spin when
   every thread has an idle core at start, else sleep; a row notes the runs in
   which they slept.

6. The sampler's share (BENCH_SAMPLER=0 skips it): a random 15M with flat logits
   (`export.py random ... --emb-std 0.02`: logits with std ~0.34, so top-p 0.9 keeps
   about 85% of the 32000 tokens), 1 thread, decode tok/s greedy (-t 0) against
   sampled (-t 1 -p 0.9), the two alternating, BENCH_RUNS runs each (a disturbed run
   repeated as in 5); prints their medians, the ratio, the sampler's time per token
   (1/sampled - 1/greedy) and the runs' background load; then the sampler's time as
   ./run measures it inside each sampled run (its clock around every draw, on the
   stats line), which the machine's slow and fast spells between runs do not move.

Shares of the machine's limits (limits: the best measured figures, 1 GiB buffer):
    decode share  = file bytes x decode tok/s / read bandwidth(threads)
                    (weight bytes per token approximated by the checkpoint's file
                    size: every matrix is read once per token, the shared
                    embedding once as the LM head)
    prefill share = flops per token x prefill tok/s / FMA peak(threads), with
                    flops per token = 2 x the layers' matrix parameters (from the
                    shape), plus 2 x the LM head's once per prompt (prefill runs
                    it for the last token only; the embedding is a lookup);
                    attention flops are ignored. stories260K, whose shape comes
                    from its file: 2 x file bytes / bytes per weight.
Models smaller than the last-level cache can exceed 100% of the DRAM bandwidth.
The table goes to stdout, progress to stderr.
"""

import collections
import os
import platform
import re
import statistics
import subprocess
import sys
import time

anchor_engines = None  # bench/anchors.py (needs numpy and torch), imported when LLAMA_BENCH or LLAMA2C is set

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_SRC = os.path.join(ROOT, "bench")
CACHE = os.path.join(ROOT, "build", "bench")
RUN = os.path.join(ROOT, "run")
EXPORT = os.path.join(ROOT, "export.py")
MODELS = os.environ.get("LLM_MODELS") or os.path.join(ROOT, "..", "shared", "models")

PROMPT_TOKENS = os.environ.get("BENCH_PROMPT", "") or "128"   # checked in main()
PROMPT_TOKENS = int(PROMPT_TOKENS) if PROMPT_TOKENS.isdigit() else -1
DECODED = 128                    # forwards after the prefill
STEPS = PROMPT_TOKENS + DECODED  # 256 for the default prompt of 128
Q8_GROUP = 32
QUIET = float(os.environ.get("BENCH_QUIET", "0.25"))        # background cores counted as busy
QUIET_WAIT = float(os.environ.get("BENCH_QUIET_WAIT", "3"))  # seconds to wait for quiet before a run
BUSY_RETRIES = int(os.environ.get("BENCH_BUSY_RETRIES", "2"))
QUIET_BUDGET = float(os.environ.get("BENCH_QUIET_BUDGET", "180"))  # in all, for waits and repeats
TINY_RUNS = 4  # stories260K runs take ~30 ms: BENCH_RUNS x this many of them

# name: (dim, layers, heads, kv_heads, hidden, vocab, seq_len); None = stories260K
SHAPES = {
    "260K": None,
    "15M": (288, 6, 6, 6, 768, 32000, 256),
    "42M": (512, 8, 8, 8, 1376, 32000, 1024),
    "110M": (768, 12, 12, 12, 2048, 32000, 1024),
}
DTYPES = ("f32", "f16", "q8_0", "q4_0", "q4_K", "Q4_K_M", "Q5_K_M")
# llama-quantize's presets, as GGUF files it writes (checkpoint()): the 15M shape only,
# whose rows of 288 are not whole 256-blocks (issue 25)
GGUF_PRESETS = ("Q4_K_M", "Q5_K_M")
PRESET_MODELS = ("15M",)
PRESETS_SKIPPED = []   # why the preset rows did not run, told under the table
# q4_0: 18 bytes a block of 32; q4_K: 144 a superblock of 256 (its narrow rows
# are q4_0, FORMAT.md: the same 4.5 bits a weight)
BYTES_PER_WEIGHT = {"f32": 4.0, "f16": 2.0, "q8_0": 1.0 + 4.0 / Q8_GROUP, "q4_0": 18.0 / 32, "q4_K": 144.0 / 256}

def prefill_flops_per_token(model, size, dtype):
    """2 x the multiply-adds a prefill token costs: the layers' matrices, and the
    LM head's share of a PROMPT_TOKENS prompt (its last token's logits only)"""
    if SHAPES.get(model) is None:
        return 2.0 * size / BYTES_PER_WEIGHT[dtype]
    dim, layers, heads, kv, hidden, vocab, _ = SHAPES[model]
    hs = dim // heads
    per_layer = dim * heads * hs * 2 + 2 * dim * kv * hs + 3 * dim * hidden   # wq, wo; wk, wv; w1, w2, w3
    return 2.0 * (layers * per_layer + vocab * dim / PROMPT_TOKENS)


STATS_RE = re.compile(
    r"prompt: (\d+) tokens, prefill ([\d.]+) tok/s \| generated: (\d+) tokens, "
    r"decode ([\d.]+) tok/s \| time to first token ([\d.]+) ms \| sampling ([\d.]+) us a token \(([\d.]+)% of decode\)")
WAIT_RE = re.compile(r"idle threads (spin|sleep)")
KERNELS_RE = re.compile(r", ([\w+]+) kernels$", re.M)  # print_config's last words: the kernels ./run runs

# Prompt material: plain story sentences (tokenizes similarly under both vocabularies).
STORY = (
    "Once upon a time, in a small village near the sea, there lived a little girl "
    "named Lily. She loved to play outside with her friends and her big brown dog, "
    "Max. One sunny morning, Lily found a shiny red ball under an old tree. She was "
    "very happy and ran to show it to her mom. Her mom smiled and said, \"That is a "
    "very nice ball, Lily. Be careful not to lose it.\" Lily nodded and went to the "
    "park with Max. They played and played until the sun was low in the sky. Then "
    "the ball rolled into the pond, and Lily began to cry. Max jumped into the water "
    "and swam to the ball. He brought it back to Lily, and she hugged him tight. "
    "\"Thank you, Max. You are the best dog in the world,\" she said. When they got "
    "home, Lily told her mom the whole story. Her mom gave Max a big bone, and Lily "
    "gave him a warm bath. That night, Lily went to bed with the red ball next to "
    "her pillow, and she dreamed of the sea, the park and her brave little dog. The "
    "next day, her friend Tom came to play, and they built a tall castle of sand "
    "with a flag on the top and a moat all around it."
)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def die(msg):
    print("bench.py: error: " + msg, file=sys.stderr)
    sys.exit(1)


def env_list(name, default, allowed):
    raw = os.environ.get(name)
    items = [x.strip() for x in raw.split(",") if x.strip()] if raw else list(default)
    for x in items:
        if x not in allowed:
            die("%s: unknown %r (choose from %s)" % (name, x, ",".join(allowed)))
    return items


def rel(path):
    return os.path.relpath(path, ROOT)


# --------------------------------------------------------------------------- #
# machine limits
# --------------------------------------------------------------------------- #

def compile_tools():
    """{"membw"|"fmapeak": path}; a program no flags compile is left out (not measured)."""
    os.makedirs(CACHE, exist_ok=True)
    cc = os.environ.get("CC", "cc")
    out = {}
    for name in ("membw", "fmapeak"):
        src, exe = os.path.join(BENCH_SRC, name + ".c"), os.path.join(CACHE, name)
        deps = [src] + [os.path.join(BENCH_SRC, h) for h in ("timing.h", "isa.h")]
        if not os.path.exists(exe) or os.path.getmtime(exe) < max(os.path.getmtime(d) for d in deps):
            errors = []
            for march in (["-march=native"], []):   # a compiler may not know this CPU
                cmd = [cc, "-O3"] + march + ["-fopenmp", "-Wall", "-Wextra", "-o", exe, src, "-lm"]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode == 0:
                    break
                errors.append(" ".join(cmd) + ":\n" + r.stderr.strip())
            else:
                log("cannot compile %s, its limits are not measured:\n%s" % (rel(src), "\n".join(errors)))
                continue
        out[name] = exe
    return out


def kv_line(text):
    return dict(f.split("=", 1) for f in text.split())


LIMIT_TRIES = 3  # invocations of each limit program per measurement; the best is kept


def measure_limits(tools, threads):
    """One set of measurements, {"bw"|"bw32"|"fma": {threads: (best, median)}} and the ISA
    each program ran ({"bw"|"bw32"|"fma": "avx2 (8 lanes)"}): each program runs LIMIT_TRIES
    times (after waiting for a quiet machine) and the invocation with the best figure is
    kept, with the median of its repetitions. A program that is missing or fails leaves
    its entries out (not measured)."""
    progs = (("bw", "membw", ["1024", None, "15"], "best_gbs", "median_gbs"),
             ("bw32", "membw", ["32", None, "200"], "best_gbs", "median_gbs"),
             ("fma", "fmapeak", [None, "10000000", "15"], "best_gflops", "median_gflops"))
    lim = {k: {} for k, _, _, _, _ in progs}
    isa = {}
    for t in threads:
        for key, prog, args, best_k, med_k in progs:
            if prog not in tools:
                continue
            argv = [tools[prog]] + [str(t) if a is None else a for a in args]
            for _ in range(LIMIT_TRIES):
                wait_quiet(QUIET_WAIT)
                r = subprocess.run(argv, capture_output=True, text=True)
                try:
                    d = kv_line(r.stdout)
                    got = (float(d[best_k]), float(d[med_k]))
                except (ValueError, KeyError):
                    got = None
                if r.returncode != 0 or got is None:
                    log("%s failed (exit %d), not measured: %s" % (" ".join(argv), r.returncode, r.stderr.strip()))
                    break
                names = {"avx512": "AVX-512", "avx2": "AVX2", "neon": "NEON", "c": "plain C"}
                isa[key] = "%s, %s floats a vector" % (names.get(d.get("isa"), d.get("isa", "?")), d.get("lanes", "?"))
                if t not in lim[key] or got[0] > lim[key][t][0]:
                    lim[key][t] = got
        fmt = lambda k, f: f % lim[k][t][0] if t in lim[k] else "not measured"
        log("limits, %d thread(s): read %s (1 GiB), %s (32 MiB), FMA %s"
            % (t, fmt("bw", "%.1f GB/s"), fmt("bw32", "%.1f GB/s"), fmt("fma", "%.0f GFLOP/s")))
    return lim, isa


# --------------------------------------------------------------------------- #
# checkpoints and prompts
# --------------------------------------------------------------------------- #

def run_info_ok(path):
    r = subprocess.run([RUN, path, "--info"], capture_output=True, text=True)
    return r.returncode == 0


def export(args, out):
    log("  export.py %s" % " ".join(args + [rel(out)]))
    r = subprocess.run([sys.executable, EXPORT] + args + [out], capture_output=True, text=True)
    if r.returncode != 0:
        die("export.py failed for %s:\n%s" % (rel(out), r.stderr))


def llama_quantize():
    """The llama-quantize beside LLAMA_BENCH, or None (why: PRESETS_SKIPPED)."""
    bench = os.environ.get("LLAMA_BENCH")
    if not bench:
        return None
    q = os.path.join(os.path.dirname(os.path.abspath(bench)), "llama-quantize")
    return q if os.access(q, os.X_OK) else None


def preset_checkpoint(model, preset):
    """build/bench/random<model>-<preset>.gguf: the row's f32 checkpoint as an f32 GGUF
    (export.py), quantized into the preset by llama-quantize; None without it."""
    quantize = llama_quantize()
    if quantize is None:
        return None
    f32 = os.path.join(CACHE, "random%s-f32.gguf" % model)
    if not (os.path.exists(f32) and run_info_ok(f32)):
        export(["--format", "gguf", "--dtype", "f32", "--tokenizer", os.path.join(MODELS, "tokenizer.bin"),
                checkpoint(model, "f32")], f32)
    out = os.path.join(CACHE, "random%s-%s.gguf" % (model, preset))
    if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(f32) and run_info_ok(out):
        return out
    log("  %s %s %s %s" % (quantize, rel(f32), rel(out), preset))
    r = subprocess.run([quantize, f32, out + ".tmp", preset], capture_output=True, text=True)
    if r.returncode != 0:
        die("llama-quantize %s failed for %s:\n%s" % (preset, rel(f32), (r.stderr or r.stdout)[-2000:]))
    os.replace(out + ".tmp", out)
    if not run_info_ok(out):
        die("./run refuses %s (llama-quantize's %s)" % (rel(out), preset))
    return out


def checkpoint(model, dtype):
    """Path of the checkpoint for a row, generating (and caching) it if needed."""
    if dtype in GGUF_PRESETS:
        return preset_checkpoint(model, dtype)
    if SHAPES[model] is None:
        src = os.path.join(MODELS, "stories260K.bin")
        if dtype == "f32":
            return src
        out = os.path.join(CACHE, "stories260K-%s.llmw" % dtype)
        args = ["--dtype", dtype, src]
    else:
        dim, layers, heads, kv, hidden, vocab, seq = SHAPES[model]
        out = os.path.join(CACHE, "random%s-%s.llmw" % (model, dtype))
        args = ["random", "--dim", str(dim), "--layers", str(layers), "--heads", str(heads),
                "--kv-heads", str(kv), "--hidden-dim", str(hidden), "--vocab", str(vocab),
                "--seq-len", str(seq), "--seed", "0", "--shared", "--dtype", dtype]
    if dtype == "q8_0":
        i = args.index("--dtype")
        args[i:i] = ["--group-size", str(Q8_GROUP)]
    if os.path.exists(out) and run_info_ok(out):
        return out
    export(args, out)
    if not run_info_ok(out):
        die("./run refuses the freshly exported %s" % rel(out))
    return out


def tokenize(tok, text):
    r = subprocess.run([RUN, "-m", "tokenize", "-z", tok, "-i", text], capture_output=True, text=True)
    if r.returncode != 0:
        die("./run -m tokenize failed: %s" % r.stderr.strip())
    return r.stdout.split()


def make_prompt(tok):
    """A text that tokenizes to exactly PROMPT_TOKENS ids with BOS; cached per tokenizer."""
    name = os.path.splitext(os.path.basename(tok))[0]
    path = os.path.join(CACHE, "prompt-%s.txt" % name if PROMPT_TOKENS == 128 else
                        "prompt-%s-%d.txt" % (name, PROMPT_TOKENS))
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if len(tokenize(tok, text)) == PROMPT_TOKENS:
            return text, path
    words = (STORY + " ") * (4 + PROMPT_TOKENS // 32)
    words = words.split()
    count = lambda k: len(tokenize(tok, " ".join(words[:k])))
    lo, hi = 1, len(words)  # largest k with count(k) <= PROMPT_TOKENS
    if count(hi) < PROMPT_TOKENS:
        die("prompt material too short for %s" % tok)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(mid) <= PROMPT_TOKENS:
            lo = mid
        else:
            hi = mid - 1
    text = " ".join(words[:lo])
    n = len(tokenize(tok, text))
    fillers = [" " + words[lo][:j] for j in range(1, len(words[lo]) + 1)] + [" a", " the", ".", "!", ","]
    guard = 0
    while n < PROMPT_TOKENS and guard < 64:
        guard += 1
        for f in fillers:
            if len(tokenize(tok, text + f)) == n + 1:
                text, n = text + f, n + 1
                break
        else:
            die("cannot build a %d-token prompt for %s" % (PROMPT_TOKENS, tok))
    if n != PROMPT_TOKENS:
        die("prompt for %s has %d tokens, wanted %d" % (tok, n, PROMPT_TOKENS))
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return text, path


# --------------------------------------------------------------------------- #
# runs
# --------------------------------------------------------------------------- #

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_busy():
    """Seconds of non-idle CPU time of the whole machine so far (all CPUs, steal included)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice: inside user]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / CLK_TCK


RUN_SEEN = set()  # identities of the ./run binary the current row ran
KERNELS_SEEN = set()  # the kernels ./run said it ran ("avx512+vnni", "avx2", "neon", ...)


def run_identity():
    """Tells rebuilds of ./run apart (others may run `make` while the bench runs)."""
    st = os.stat(RUN)
    return (st.st_ino, st.st_size, st.st_mtime_ns)


# the vector extensions worth naming beside a figure, as /proc/cpuinfo spells them
CPU_FLAGS = ("avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx_vnni", "avx2", "fma", "f16c",
             "asimddp", "i8mm", "sve", "fphp")


def cpu_description():
    """The CPU as /proc/cpuinfo names it, with what a model name alone hides (a VM's "AMD EPYC" is
    any of four generations): vendor, family, model and stepping, and the vector extensions
    present; the platform's name where there is no /proc/cpuinfo."""
    fields, flags = {}, set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key in ("flags", "Features") and not flags:
                    flags = set(value.split())
                elif key and key not in fields:
                    fields[key] = value
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine() or "unknown CPU"
    ident = ", ".join("%s %s" % (label, fields[key]) for key, label in
                      (("vendor_id", "vendor"), ("cpu family", "family"), ("model", "model"),
                       ("stepping", "stepping"), ("CPU implementer", "implementer"), ("CPU part", "part"))
                      if fields.get(key))
    present = " ".join(f for f in CPU_FLAGS if f in flags)
    extra = "; ".join(x for x in (ident, present and "has " + present) if x)
    return "%s (%s)" % (name, extra) if extra else name


def git_describe():
    try:
        return subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                              capture_output=True, text=True).stdout.strip() or "?"
    except OSError:
        return "?"


# One ./run's figures (run_once)
Run = collections.namedtuple("Run", "prefill decode generated rss background wall wait sample_us sample_share")


def run_once(ckpt, tok, prompt, threads, seed, temperature="1"):
    """One ./run as a Run: prefill and decode tok/s, tokens generated, maxrss bytes, background
    load, wall seconds, how idle threads waited, and the sampler's us a token and % of the
    decode time as ./run timed it around each draw; the background load being the CPUs' busy
    time not spent by this run, per second of the run (0 = a quiet machine; 1 = one core
    busy elsewhere), the wait "spin" or "sleep" as ./run chose it (--wait auto), "" for one
    thread. Temperature 1 samples with top-p 0.9 (./run's default); 0 is greedy."""
    cmd = [RUN, ckpt, "-z", tok, "-n", str(STEPS), "-t", temperature, "-s", str(seed),
           "-i", prompt, "--threads", str(threads)]
    RUN_SEEN.add(run_identity())
    busy0, t0 = cpu_busy(), time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read().decode("utf-8", "replace")
    p.stderr.close()
    _, status, ru = os.wait4(p.pid, 0)
    wall, busy = time.monotonic() - t0, cpu_busy() - busy0
    background = max(0.0, busy - ru.ru_utime - ru.ru_stime) / wall if wall > 0 else 0.0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        die("%s exited with %d:\n%s" % (" ".join(cmd[:2]), p.returncode, err))
    m = STATS_RE.search(err)
    if not m:
        die("no stats line from ./run:\n" + err)
    n_prompt, prefill, generated, decode = int(m.group(1)), float(m.group(2)), int(m.group(3)), float(m.group(4))
    if n_prompt != PROMPT_TOKENS:
        die("the prompt ran as %d tokens, not %d" % (n_prompt, PROMPT_TOKENS))
    w = WAIT_RE.search(err)
    k = KERNELS_RE.search(err)
    KERNELS_SEEN.add(k.group(1) if k else "not reported")
    return Run(prefill, decode, generated, ru.ru_maxrss * 1024, background, wall, w.group(1) if w else "",
               float(m.group(6)), float(m.group(7)))


BUDGET = {"left": QUIET_BUDGET}  # seconds still allowed for waiting and repeated runs


def wait_quiet(max_wait):
    """Sleep up to max_wait seconds (and what is left of the budget) until, over a 0.2 s
    window, the machine's other processes keep less than QUIET cores busy."""
    t_start = time.monotonic()
    deadline = t_start + max(0.0, min(max_wait, BUDGET["left"]))
    while True:
        b0, t0 = cpu_busy(), time.monotonic()
        time.sleep(0.2)
        bg = (cpu_busy() - b0) / (time.monotonic() - t0)
        if bg < QUIET or time.monotonic() >= deadline:
            break
    BUDGET["left"] -= max(0.0, time.monotonic() - t_start - 0.2)


def run_anchors(engines, t, tok, prompt, res):
    """One run of each anchor engine at t threads, right after ./run's (interleaved)."""
    for a, path in engines:
        wait_quiet(QUIET_WAIT)
        try:
            pp, tg = a.measure(path, t, PROMPT_TOKENS, DECODED, tok=tok, prompt=prompt)
        except anchor_engines.AnchorError as e:
            die(str(e))
        res[t]["anchors"].setdefault(a.name, []).append((pp, tg))


def bench_rows(ckpt, tok, prompt, threads, runs, engines=()):
    """Per thread count, the lists of figures of the kept runs. Each thread count runs as a
    block of its own, this engine and the anchors interleaved inside it: a 1-thread run
    right after a 2-thread one measured slower here (110M q8_0 decode 123-167 tok/s against
    172-182 back to back, on Zen 5), and alternating thread counts put this engine's
    1-thread runs always there. Run r uses seed 1 + r for every thread count (the same
    tokens: the engine's output does not depend on threads);
    a seed that samples BOS before DECODED tokens is replaced by seed + 1000 (up to 5 times).
    A run during which other processes kept more than QUIET cores busy is repeated up to
    BUSY_RETRIES times while the budget lasts, and the quietest attempt kept."""
    keys = ("prefill", "decode", "rss", "bg")
    res = {t: dict({k: [] for k in keys}, short=0, bos_retries=0, busy_retries=0, slept=0, anchors={})
           for t in threads}
    run_once(ckpt, tok, prompt, threads[-1], 1)  # warm the page cache, untimed
    seeds = [1 + r for r in range(runs)]
    for t in threads:
        for r in range(runs):
            seed = seeds[r]
            best, busy_left, bos_left = None, BUSY_RETRIES, 5
            while True:
                wait_quiet(QUIET_WAIT)
                o = run_once(ckpt, tok, prompt, t, seed)
                if o.generated != DECODED + 1 and bos_left > 0:
                    bos_left -= 1
                    res[t]["bos_retries"] += 1
                    seed = seeds[r] = seed + 1000  # the model sampled BOS early: another seed, for later threads too
                    best = None
                    continue
                if best is None or o.background < best.background:
                    best = o
                if best.background > QUIET and busy_left > 0 and BUDGET["left"] > 0:
                    busy_left -= 1
                    BUDGET["left"] -= o.wall
                    res[t]["busy_retries"] += 1
                    continue
                break
            res[t]["slept"] += best.wait == "sleep"
            for k, v in zip(keys, (best.prefill, best.decode, best.rss, best.background)):
                res[t][k].append(v)
            if best.generated != DECODED + 1:
                res[t]["short"] += 1
            run_anchors(engines, t, tok, prompt, res)
    return res


def anchor_files(engines, model, dtype, tok):
    """[(engine, its file for this row)], converted by each engine's own tools from the
    row's f32 checkpoint; an engine with no kernel for the type is left out."""
    if not engines:
        return []
    key = "stories260K" if SHAPES[model] is None else "random" + model
    if dtype in GGUF_PRESETS:   # llama.cpp runs the very file; llama2.c reads no GGUF
        for a in engines:
            if a.name != "llama.cpp":
                anchor_engines.SKIPPED.append((a.name, key, dtype, "%s reads no GGUF" % a.name))
        return [(a, checkpoint(model, dtype)) for a in engines if a.name == "llama.cpp"]
    log("  anchors: converting %s %s" % (key, dtype))
    try:
        legacy = anchor_engines.legacy_f32(checkpoint(model, "f32"), key, engines)
        out = []
        for a in engines:
            path = a.prepare(key, dtype, legacy, tok)
            if path:
                out.append((a, path))
        return out
    except anchor_engines.AnchorError as e:
        die(str(e))


def flat_checkpoint():
    """The random 15M shape with an embedding (and LM head) of std 0.02: flat logits."""
    dim, layers, heads, kv, hidden, vocab, seq = SHAPES["15M"]
    out = os.path.join(CACHE, "random15M-flat-f32.llmw")
    if not (os.path.exists(out) and run_info_ok(out)):
        export(["random", "--dim", str(dim), "--layers", str(layers), "--heads", str(heads),
                "--kv-heads", str(kv), "--hidden-dim", str(hidden), "--vocab", str(vocab),
                "--seq-len", str(seq), "--seed", "0", "--shared", "--emb-std", "0.02"], out)
    return out


def sampler_rows(tok, prompt, runs):
    """Decode tok/s of the flat random 15M at 1 thread, greedy and top-p 0.9, alternating;
    as bench_rows, a run that other processes disturbed (more than QUIET cores busy) is
    repeated up to BUSY_RETRIES times while the budget lasts, the quietest attempt kept.
    Returns {mode: [decode tok/s]}, with "bg": [background load], "busy_retries", and
    "inside": [(us a token, % of decode)] of the sampled runs, as ./run timed its draws."""
    ckpt = flat_checkpoint()
    modes = (("greedy", "0"), ("sampled", "1"))
    res = dict({name: [] for name, _ in modes}, bg=[], busy_retries=0, inside=[])
    run_once(ckpt, tok, prompt, 1, 1)  # warm the page cache, untimed
    for r in range(runs):
        for name, temperature in modes:
            best, busy_left = None, BUSY_RETRIES
            while True:
                wait_quiet(QUIET_WAIT)
                o = run_once(ckpt, tok, prompt, 1, 1 + r, temperature)
                if best is None or o.background < best.background:
                    best = o
                if best.background > QUIET and busy_left > 0 and BUDGET["left"] > 0:
                    busy_left -= 1
                    BUDGET["left"] -= o.wall
                    res["busy_retries"] += 1
                    continue
                break
            res[name].append(best.decode)
            res["bg"].append(best.background)
            if name == "sampled":
                res["inside"].append((best.sample_us, best.sample_share))
    return res


def spread(xs):
    m = statistics.median(xs)
    return (max(xs) - min(xs)) / m * 100 if m else 0.0


def fmt_rate(x):
    return "%.0f" % x if x >= 100 else "%.1f" % x


def anchor_cells(names, r):
    """The anchor columns of a row: each engine's medians, then ./run over the best."""
    if not names:
        return ""
    cells, best_p, best_d = "", 0.0, 0.0
    for n in names:
        if n not in r["anchors"]:
            cells += " - |"
            continue
        p, d, sp, sd = r["anchors"][n]
        best_p, best_d = max(best_p, p), max(best_d, d)
        cells += " %s (%.0f%%) / %s (%.0f%%) |" % (fmt_rate(p), sp, fmt_rate(d), sd)
    ratio = lambda ours, best: "%.2f" % (ours / best) if best > 0 else "-"
    return cells + " %s / %s |" % (ratio(r["prefill"], best_p), ratio(r["decode"], best_d))


def main():
    runs = int(os.environ.get("BENCH_RUNS", "5"))
    if runs < 1:
        die("BENCH_RUNS must be >= 1")
    models = env_list("BENCH_MODELS", SHAPES, list(SHAPES))
    if not 8 <= PROMPT_TOKENS <= 896:
        die("BENCH_PROMPT must be a number of tokens from 8 to 896, not %r" % os.environ.get("BENCH_PROMPT"))
    sampler = os.environ.get("BENCH_SAMPLER", "1") != "0"
    for model in models + (["15M"] if sampler else []):   # the sampler rows run a 15M
        ctx = 512 if SHAPES[model] is None else SHAPES[model][6]
        if STEPS > ctx:
            die("BENCH_PROMPT=%d and %d decoded tokens exceed %s's context of %d: at most %d for it%s"
                % (PROMPT_TOKENS, DECODED, model, ctx, ctx - DECODED,
                   " (BENCH_SAMPLER=0 skips the sampler rows, which run a 15M)" if model == "15M" else ""))
    dtypes = env_list("BENCH_DTYPES", DTYPES, list(DTYPES))
    threads = sorted(int(t) for t in env_list("BENCH_THREADS", ("1", "2"), [str(i) for i in range(1, 257)]))
    if not os.access(RUN, os.X_OK):
        die("%s not found: run `make` first" % rel(RUN))
    for f in ("stories260K.bin", "tok512.bin", "tokenizer.bin"):
        if not os.path.exists(os.path.join(MODELS, f)):
            die("%s not found (set LLM_MODELS)" % os.path.join(MODELS, f))
    engines = []
    if os.environ.get("LLAMA_BENCH") or os.environ.get("LLAMA2C"):
        global anchor_engines
        import anchors as anchor_engines
        try:
            engines = anchor_engines.from_env()
        except anchor_engines.AnchorError as e:
            die(str(e))
    t_start = time.time()
    load0 = os.getloadavg()
    commit0, run0 = git_describe(), run_identity()

    tools = compile_tools()
    limits_start, isa = measure_limits(tools, threads)

    prompts = {}
    rows = []
    for model in models:
        tok = os.path.join(MODELS, "tok512.bin" if SHAPES[model] is None else "tokenizer.bin")
        if tok not in prompts:
            prompts[tok] = make_prompt(tok)
        text, _ = prompts[tok]
        for dtype in dtypes:
            if dtype in GGUF_PRESETS and model not in PRESET_MODELS:
                continue
            ckpt = checkpoint(model, dtype)
            if ckpt is None:
                PRESETS_SKIPPED.append("random %s %s" % (model, dtype))
                continue
            size = os.path.getsize(ckpt)
            row_engines = anchor_files(engines, model, dtype, tok)
            t0 = time.time()
            RUN_SEEN.clear()
            res = bench_rows(ckpt, tok, text, threads, runs * (TINY_RUNS if SHAPES[model] is None else 1),
                             row_engines)
            log("%s %s: %.0f s" % (model, dtype, time.time() - t0))
            for t in threads:
                r = res[t]
                rows.append({
                    "model": model, "dtype": dtype, "threads": t, "size": size, "ckpt": ckpt,
                    "prefill": statistics.median(r["prefill"]), "decode": statistics.median(r["decode"]),
                    "rss": statistics.median(r["rss"]), "bg": statistics.median(r["bg"]),
                    "pf_spread": spread(r["prefill"]), "dc_spread": spread(r["decode"]),
                    "short": r["short"], "bos_retries": r["bos_retries"], "n": len(r["decode"]),
                    "busy_retries": r["busy_retries"], "slept": r["slept"], "binaries": set(RUN_SEEN),
                    "anchors": {name: (statistics.median(p for p, _ in v), statistics.median(d for _, d in v),
                                       spread([p for p, _ in v]), spread([d for _, d in v]))
                                for name, v in r["anchors"].items()},
                })
                log("  %d thread(s): prefill %s tok/s, decode %s tok/s, background %.2f cores"
                    % (t, fmt_rate(rows[-1]["prefill"]), fmt_rate(rows[-1]["decode"]), rows[-1]["bg"]))

    samp = None
    if sampler:
        tok = os.path.join(MODELS, "tokenizer.bin")
        if tok not in prompts:
            prompts[tok] = make_prompt(tok)
        samp = sampler_rows(tok, prompts[tok][0], runs)
        log("sampler: greedy %s tok/s, sampled %s tok/s" % (fmt_rate(statistics.median(samp["greedy"])),
                                                           fmt_rate(statistics.median(samp["sampled"]))))

    limits_end, isa_end = measure_limits(tools, threads)
    isa = dict(isa_end, **isa)
    # the machine's limit: the best figure of either measurement (None: not measured)
    limits = {k: {t: max([L[k][t][0] for L in (limits_start, limits_end) if t in L[k]], default=None)
                  for t in threads} for k in limits_start}
    for r in rows:
        t, size = r["threads"], r["size"]
        flops_tok = prefill_flops_per_token(r["model"], size, r["dtype"])
        fma, bw = limits["fma"][t], limits["bw"][t]
        r["pf_share"] = flops_tok * r["prefill"] / (fma * 1e9) * 100 if fma else None
        r["dc_share"] = size * r["decode"] / (bw * 1e9) * 100 if bw else None
    elapsed = time.time() - t_start
    load1 = os.getloadavg()

    # ----------------------------------------------------------------- report
    cpu = cpu_description()
    commit1 = git_describe()
    commit = commit0 if commit1 == commit0 else "%s at the start, %s at the end" % (commit0, commit1)
    print("## Benchmark: ./run prefill and decode against this machine's limits")
    print()
    print("%s, %d CPUs; ./run's kernels: %s; commit %s; load average %.2f at the start, %.2f at the end; %d timed runs "
          "per row, medians; %.0f s in all." % (cpu, os.cpu_count() or 0, ", ".join(sorted(KERNELS_SEEN)) or "none ran", commit, load0[0], load1[0], runs, elapsed))
    print()
    omp_env = " ".join("%s=%s" % (k, v) for k, v in sorted(os.environ.items())
                       if k.startswith(("OMP_", "GOMP_", "KMP_")))
    if omp_env:
        print("OpenMP environment passed to ./run: `%s`." % omp_env)
        print()
    rebuilt = [r for r in rows if r["binaries"] != {run0}]
    if rebuilt:
        print("**Warning: ./run was rebuilt while the bench ran; %d of %d rows (marked `rebuilt`) did not run "
              "only the binary present at the start. Run again.**" % (len(rebuilt), len(rows)))
        print()
    busy_rows = [r for r in rows if r["bg"] > QUIET]
    if busy_rows:
        print("**Warning: other processes kept the machine busy during %d of %d rows (background column "
              "above %.2f cores); those figures, above all the 2-thread ones, measure the contention more than "
              "the engine. Run again on a quiet machine.**" % (len(busy_rows), len(rows), QUIET))
        print()
    print("Machine limits, measured by bench/membw.c (a vector sum of a float buffer; %s) and bench/fmapeak.c "
          "(16 independent vector FMA chains, 2 flops per lane per FMA; %s) at the start and at the end of this run: "
          "best of the repetitions (median in brackets), start / end. The shares below use the better of the two%s."
          % (isa.get("bw", "not built"), isa.get("fma", "not built"),
             "; a limit not measured leaves its shares blank" if any(None in v.values() for v in limits.values()) else ""))
    print()
    print("| threads | read BW, 1 GiB buffer | read BW, 32 MiB buffer | fp32 FMA peak |")
    print("| --- | --- | --- | --- |")
    for t in threads:
        cell = lambda k, unit, f: " / ".join(("%s (%s)" % (f % L[k][t][0], f % L[k][t][1])) if t in L[k] else "not measured"
                                             for L in (limits_start, limits_end)) + " " + unit
        print("| %d | %s | %s | %s |" % (t, cell("bw", "GB/s", "%.1f"), cell("bw32", "GB/s", "%.1f"), cell("fma", "GFLOP/s", "%.0f")))
    print()
    print("Command per run (prompts of exactly %d tokens with BOS, in build/bench/prompt-*.txt; "
          "run r uses seed r (1, 2, ...), +1000 when it samples BOS early; one untimed warm-up run per "
          "checkpoint; %d timed runs per row, %d for stories260K; `--wait auto`, the default, so idle "
          "threads spin on a quiet machine):"
          % (PROMPT_TOKENS, runs, runs * TINY_RUNS))
    print()
    print("```")
    for tok, (_, ppath) in prompts.items():
        print("./run CKPT -z %s -n %d -t 1 -s SEED -i \"$(cat %s)\" --threads N"
              % (os.path.relpath(tok, ROOT), STEPS, rel(ppath)))
    print("```")
    print()
    print("- prefill: %d prompt tokens in one batch; %% of FMA peak = 2 x (the layers' matrix parameters "
          "+ the LM head's / %d) x prefill tok/s / FMA peak(N) (the head runs for the last token only, the "
          "embedding is a lookup; attention flops ignored; for the quantized types a yardstick only: their "
          "products run in integers)." % (PROMPT_TOKENS, PROMPT_TOKENS))
    print("- decode: %d tokens, one at a time; %% of read BW = file bytes x decode tok/s / read BW(N, 1 GiB) "
          "(the file size stands for the weight bytes read per token)." % DECODED)
    print("- peak RSS: median ru_maxrss of the runs, mapped checkpoint pages included. "
          "spread: (max - min) / median of the runs, prefill / decode.")
    print("- background: median over the kept runs of the CPU time other processes used during the run, in "
          "cores (/proc/stat busy time minus the run's own; 1.00 = one of the %d cores busy elsewhere). "
          "Before each run the bench waits up to %.0f s for the machine to be quiet (< %.2f cores), and repeats "
          "a run that was not, up to %d times, keeping the quietest (%.0f s in all for waits and repeats, "
          "BENCH_QUIET_BUDGET; %.0f s left)." % (os.cpu_count() or 0, QUIET_WAIT, QUIET, BUSY_RETRIES,
                                                 QUIET_BUDGET, max(0.0, BUDGET["left"])))
    print()
    names = [a.name for a in engines]
    extra_head = "".join(" %s prefill / decode |" % n for n in names) + (" ratio prefill / decode |" if names else "")
    print("| model | weights | file MiB | threads | prefill tok/s | % FMA peak | decode tok/s | % read BW "
          "| peak RSS MiB | spread p / d | background |" + extra_head)
    print("| --- " * (11 + len(names) + (1 if names else 0)) + "|")
    for r in rows:
        name = "stories260K" if r["model"] == "260K" else "random " + r["model"]
        wt = r["dtype"] + (" (legacy)" if r["ckpt"].endswith("stories260K.bin") else
                           " (GGUF, llama-quantize)" if r["dtype"] in GGUF_PRESETS else "")
        note = " rebuilt" if r["binaries"] != {run0} else ""
        if r["short"]:
            note += " (%d of %d runs decoded < %d)" % (r["short"], r["n"], DECODED)
        if r["slept"]:
            note += " (idle threads slept in %d of %d runs)" % (r["slept"], r["n"])
        share = lambda v: "-" if v is None else "%.1f%%" % v
        print("| %s | %s | %.1f | %d | %s | %s | %s | %s | %.0f | %.0f%% / %.0f%% | %.2f%s |"
              % (name, wt, r["size"] / 2**20, r["threads"], fmt_rate(r["prefill"]), share(r["pf_share"]),
                 fmt_rate(r["decode"]), share(r["dc_share"]), r["rss"] / 2**20, r["pf_spread"], r["dc_spread"],
                 r["bg"], note) + anchor_cells(names, r))
    print()
    if PRESETS_SKIPPED:
        print("Not run: %s (GGUF files of llama-quantize's presets: give LLAMA_BENCH, and the llama-quantize "
              "beside it makes them; the project's writer cannot write that mix of types)."
              % ", ".join(PRESETS_SKIPPED))
        print()
    if names:
        print("Anchor cells: median tok/s (spread in brackets, as above); ratio: ./run over the best anchor "
              "of the cell, above 1.00 = ./run faster. bench/anchors.py gives each engine's command.")
        for engine, key, dtype, why in anchor_engines.SKIPPED:
            print("- %s, %s %s: not run (%s)." % (engine, key, dtype, why))
        print()
    if samp:
        g, t = statistics.median(samp["greedy"]), statistics.median(samp["sampled"])
        print("Sampler cost: random 15M with flat logits (`export.py random --emb-std 0.02`), f32, 1 thread, "
              "%d decoded tokens after the %d-token prompt, greedy and sampled runs alternating, medians of %d:"
              % (DECODED, PROMPT_TOKENS, len(samp["greedy"])))
        print()
        print("| decode | tok/s | spread |")
        print("| --- | --- | --- |")
        print("| greedy (`-t 0`) | %s | %.0f%% |" % (fmt_rate(g), spread(samp["greedy"])))
        print("| sampled (`-t 1 -p 0.9`) | %s | %.0f%% |" % (fmt_rate(t), spread(samp["sampled"])))
        print()
        print("sampled / greedy = %.2f; the sampler takes %.0f us a token, %.1f%% of the sampled decode time "
              "(target: at most 10%%). Background: median %.2f cores over these runs; %d run(s) repeated "
              "because other processes kept more than %.2f cores busy." % (
                  t / g, (1 / t - 1 / g) * 1e6, (1 - t / g) * 100, statistics.median(samp["bg"]),
                  samp["busy_retries"], QUIET))
        print()
        us = [u for u, _ in samp["inside"]]
        share = [s for _, s in samp["inside"]]
        print("Timed inside each sampled run (./run's clock around every draw, so the machine's slow and fast "
              "spells cancel out): the sampler takes %.0f us a token, %.1f%% of the decode time (medians of %d; "
              "%.1f-%.1f%%)." % (statistics.median(us), statistics.median(share), len(share), min(share), max(share)))
        print()
    bos = sum(r["bos_retries"] for r in rows)
    busy = sum(r["busy_retries"] for r in rows)
    print("%d run(s) sampled BOS before %d tokens and were repeated with another seed; %d run(s) were "
          "repeated because other processes kept more than %.2f cores busy (BENCH_QUIET)."
          % (bos, DECODED, busy, QUIET))


if __name__ == "__main__":
    main()
