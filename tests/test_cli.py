"""The command-line program: llama2.c's published outputs reproduced byte for
byte, the same tokens from every build and thread count, and a clear one-line
error with a non-zero exit for every kind of bad input."""
import array
import os
import re
import struct
import subprocess

import common
import twin
from common import model, run, scratch

CKPT = model("stories260K.bin")
TOK = model("tok512.bin")
BASE = [CKPT, "-z", TOK]


def golden(name):
    with open(model(name), "rb") as f:
        return f.read()


def test_greedy200_matches_llama2c():
    rc, out, err = run(BASE + ["-t", "0", "-n", "200"])
    assert rc == 0, err
    want = golden("stories260K.greedy200.txt")
    assert out == want, f"stdout differs from stories260K.greedy200.txt\n got: {out[:300]!r}\nwant: {want[:300]!r}"


def test_sampled_t1_p09_s133742_matches_llama2c():
    rc, out, err = run(BASE + ["-t", "1.0", "-p", "0.9", "-s", "133742", "-n", "256"])
    assert rc == 0, err
    want = golden("stories260K.t1-p0.9-s133742.txt")
    assert out == want, f"stdout differs from stories260K.t1-p0.9-s133742.txt\n got: {out[:300]!r}\nwant: {want[:300]!r}"


PROMPT = "Once upon a time, a little fox found a shiny stone by the river"


def test_same_tokens_across_threads_and_builds():
    """1 and 2 threads, and (in the portable run) the optimised ./run, print the same text."""
    reference = os.path.join(common.ROOT, "run")
    for args in (["-t", "0", "-n", "180"], ["-t", "0.8", "-p", "0.95", "-s", "7", "-n", "300"],
                 ["-t", "1", "-k", "40", "-p", "0.9", "-s", "11", "-n", "200"]):
        outs = []
        for binary, threads in ((None, 1), (None, 2), (reference, 1)):
            rc, out, err = run(BASE + ["-i", PROMPT, "--threads", threads] + args, binary=binary)
            assert rc == 0, err
            outs.append(out)
        assert outs[0].startswith(PROMPT.encode()), outs[0][:100]
        assert outs[0] == outs[1], f"{args}: 1 vs 2 threads differ:\n{outs[0]!r}\n{outs[1]!r}"
        assert outs[0] == outs[2], f"{args}: this build vs ./run differ:\n{outs[0]!r}\n{outs[2]!r}"


def openmp_build():
    rc, out, err = run(BASE + ["-t", "0", "-n", "2", "--threads", "2"])
    assert rc == 0, err
    return "built without OpenMP" not in err


def test_wait_policies():
    """--wait spin|sleep|auto: the same text as one thread, the policy stated on
    stderr, and (with OpenMP) libgomp's spin count set as stated, spinning
    threads bound to cores unless the user placed them; a user's
    OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept under auto."""
    args = ["-i", PROMPT, "-t", "0.8", "-p", "0.95", "-s", "7", "-n", "200"]
    rc, want, err = run(BASE + args + ["--threads", "1"])
    assert rc == 0, err
    omp = openmp_build()
    cases = [(["--wait", "spin"], {}, "spin", "10000", "TRUE"), (["--wait", "sleep"], {}, "sleep", "0", "FALSE"),
             (["--wait", "auto"], {"OMP_WAIT_POLICY": "passive"}, "sleep", "0", "FALSE"),
             ([], {"GOMP_SPINCOUNT": "5"}, "spin", "5", "TRUE"),
             (["--wait", "spin"], {"OMP_WAIT_POLICY": "passive"}, "spin", "10000", "TRUE"),
             (["--wait", "spin"], {"OMP_PROC_BIND": "false"}, "spin", "10000", "FALSE")]
    for flags, env, policy, spincount, bind in cases:
        rc, out, err = run(BASE + args + ["--threads", "2"] + flags, env=dict(env, OMP_DISPLAY_ENV="verbose"))
        assert rc == 0, err
        assert out == want, f"{flags} {env}: differs from one thread:\n{out!r}\n{want!r}"
        config = [l for l in err.splitlines() if l.startswith("norm:")]
        assert config, err
        if omp:
            assert f"threads 2 (idle threads {policy})" in config[0], (flags, env, config[0])
            counts = [l.split("=")[1].strip() for l in err.splitlines() if l.strip().startswith("GOMP_SPINCOUNT")]
            assert counts and counts[-1] == f"'{spincount}'", (flags, env, counts)
            binds = [l.split("=")[1].strip() for l in err.splitlines() if l.strip().startswith("OMP_PROC_BIND")]
            assert binds and binds[-1] == f"'{bind}'", (flags, env, binds)
        else:
            assert "threads 1 (built without OpenMP)" in config[0], config[0]


def test_statistics_on_stderr():
    rc, out, err = run(BASE + ["-t", "0", "-n", "40", "-i", PROMPT])
    assert rc == 0, err
    stats = [l for l in err.splitlines() if l.startswith("prompt:")]
    assert stats, err
    for word in ("tokens, prefill", "tok/s", "generated:", "decode", "time to first token"):
        assert word in stats[0], stats[0]
    n_prompt = int(stats[0].split()[1])
    assert n_prompt > 5, stats[0]
    # the sampler's own time, clocked around each draw after the first, and its share of decode
    m = re.search(r"\| sampling ([\d.]+) us a token \(([\d.]+)% of decode\)$", stats[0])
    assert m and float(m.group(1)) > 0 and 0 < float(m.group(2)) < 100, stats[0]
    assert b"prompt:" not in out and out.endswith(b"\n")


def test_topk_one_is_greedy():
    rc, a, err = run(BASE + ["-t", "1", "-k", "1", "-s", "5", "-n", "120"])
    assert rc == 0, err
    rc, b, err = run(BASE + ["-t", "0", "-n", "120"])
    assert a == b, f"-k 1 should equal argmax:\n{a!r}\n{b!r}"


def test_topk_changes_sampling():
    outs = set()
    for k in ("0", "5"):
        rc, out, err = run(BASE + ["-t", "1", "-p", "1", "-k", k, "-s", "3", "-n", "150"])
        assert rc == 0, err
        outs.add(out)
    assert len(outs) == 2, "top-k 5 gave the same text as top-k off"


def test_steps_beyond_seq_len_clamped():
    rc, out, err = run(BASE + ["-t", "0", "-n", "100000"])
    assert rc == 0, err
    assert "clamped to 512" in err, err


def test_ctx_limits_generation():
    rc, out, err = run(BASE + ["-t", "0", "-n", "0", "--ctx", "40"])
    assert rc == 0, err
    full = golden("stories260K.greedy200.txt")
    assert full.startswith(out.rstrip(b"\n")) and len(out) < len(full), out


def test_help():
    rc, out, err = run(["--help"])
    assert rc == 0
    for flag in (b"-t", b"-p", b"-k", b"-s", b"-n", b"-i", b"-z", b"-m", b"-y", b"--threads", b"--norm",
                 b"--norm-pos", b"--final-norm", b"--norm-eps", b"--qk-norm", b"--info", b"tokenize", b"eval", b"chat"):
        assert flag in out, flag


def test_tokenize_needs_no_checkpoint():
    rc, out, err = run(["-m", "tokenize", "-z", TOK, "-i", "Once upon a time"])
    assert rc == 0, err
    ids = [int(x) for x in out.split()]
    assert ids[0] == 1 and len(ids) > 2, ids


def test_compact_kv_cache():
    """f16 cache: the greedy text unchanged; int8 cache: runs, and --info shows its smaller plan."""
    rc, out, err = run(BASE + ["-t", "0", "-n", "200", "--kv", "f16"])
    assert rc == 0 and out == golden("stories260K.greedy200.txt"), err
    rc, out, err = run(BASE + ["-t", "0", "-n", "200", "--kv", "q8", "--ctx", "256"])
    assert rc == 0 and out.startswith(b"Once upon a time"), err
    rc, out, err = run(BASE + ["--info", "--kv", "q8", "--ctx", "256"])
    # int8 keys and values: 5 layers * 256 positions * 32 bytes each, plus f16 scales per kv head
    assert f"{2 * 5 * 256 * 32 + 2 * 5 * 256 * 4 * 2:12d} bytes" in out.decode(), out


def test_info_prints_plan():
    rc, out, err = run(BASE + ["--info", "--ctx", "128"])
    assert rc == 0, err
    text = out.decode()
    for word in ("weights", "kv cache", "activations", "tokenizer", "total"):
        assert word in text, text
    # KV cache: 2 (k,v) * layers 5 * ctx 128 * kv_dim 32 * 4 bytes
    assert f"{2 * 5 * 128 * 32 * 4:12d} bytes" in text, text
    assert "norm: rms, pre-norm, final norm on, eps 1e-05" in err, err


def test_norm_placements_info():
    """--norm-pos pre|post|peri|out on stories260K (a llama2.c file: no output
    norms, so peri and out run them with weight 1): --info names the placement
    and where the output norms come from; the final norm defaults to off for
    post only; each placement gives its own text; a bad name is refused."""
    texts = {}
    for pos, outs, final in (("pre", "", "on"), ("post", "", "off"),
                             ("peri", " (output norms: weight 1, not in the checkpoint)", "on"),
                             ("out", " (output norms: weight 1, not in the checkpoint)", "on")):
        rc, out, err = run(BASE + ["--info", "--norm-pos", pos])
        assert rc == 0, err
        assert f"norm: rms, {pos}-norm{outs}, final norm {final}, eps 1e-05" in err, err
        rc, texts[pos], err = run(BASE + ["-t", "0", "-n", "30", "--norm-pos", pos])
        assert rc == 0 and texts[pos], err
    assert len(set(texts.values())) == 4, texts
    rc, out, err = run(BASE + ["--norm-pos", "sandwich"])
    assert rc == 2 and "--norm-pos expects pre, post, peri or out, got 'sandwich'" in err, err


def test_chat_mode():
    """A story model never says EOS, so the first answer runs to the step limit."""
    rc, out, err = run(BASE + ["-m", "chat", "-t", "0", "-n", "120", "-y", "You are kind."], input=b"Hi there\n")
    assert rc == 0, err
    assert out.startswith(b"User: Assistant: ") and len(out) > 100, out[:500]
    rc, out2, err = run(BASE + ["-m", "chat", "-t", "0", "-n", "120", "-y", "You are kind.", "-i", "Hi there"], input=b"")
    assert rc == 0, err
    assert out2 == out[len(b"User: "):], f"-i as the first turn should equal typing it:\n{out!r}\n{out2!r}"


def chat_checkpoint():
    """A random llama2.c checkpoint (vocabulary of tok512.bin, unshared
    classifier) whose replies end: every token embedding gets +5 in dimension
    0, and the classifier's EOS row reads that dimension alone (weight 1), so
    EOS is drawn with a probability of about 0.1 at every step."""
    path = scratch("chat_eos.bin")
    code = (f"import sys; sys.path.insert(0, {common.TESTS!r}); import reference; "
            f"reference.write_random_legacy({path!r}, 48, 100, 2, 6, 2, 512, 256, 21, False)")
    subprocess.run([os.environ.get("REF_PYTHON", "/usr/bin/python3"), "-c", code], check=True, timeout=300)
    raw = open(path, "rb").read()
    dim, vocab = 48, 512
    w = array.array("f")
    w.frombytes(raw[28:])
    for t in range(vocab):
        w[t * dim] += 5.0
    eos_row = len(w) - vocab * dim + twin.EOS * dim
    w[eos_row:eos_row + dim] = array.array("f", [1.0] + [0.0] * (dim - 1))
    with open(path, "wb") as f:
        f.write(raw[:28] + w.tobytes())
    return path


def test_chat_later_turns():
    """Three turns with a model that says EOS: the text equals the twin's
    (tests/twin.py), which draws from the engine's logits over the whole
    conversation at positions 0, 1, 2, ...: so each later turn is prefilled
    right after the previous reply and the EOS that ended it."""
    ckpt = chat_checkpoint()
    users = ["Hi there", "Tell me a story", "Thanks"]
    texts = [f"[INST] <<SYS>>\nYou are kind.\n<</SYS>>\n\n{users[0]} [/INST]"] + [f"[INST] {u} [/INST]" for u in users[1:]]
    turns = []
    for text in texts:
        rc, out, err = run(["-m", "tokenize", "-z", TOK, "-i", text])
        assert rc == 0, err
        turns.append([int(t) for t in out.split()])
    steps, seed = 200, 6
    sampler = twin.Sampler(512, 1.0, 0.9, 0, seed)
    want, seq, ended = twin.chat(ckpt, twin.load_pieces(TOK), sampler, turns, steps)
    assert ended == 3 and sampler.min_margin > 1e-6, (ended, sampler.min_margin)
    replies = want.split(b"Assistant: ")[1:]
    assert len(replies) == 3 and all(len(r) > 2 for r in replies[1:]), f"later replies too short to test: {want!r}"
    rc, got, err = run([ckpt, "-z", TOK, "-m", "chat", "-t", "1", "-p", "0.9", "-s", seed, "-n", steps,
                        "-y", "You are kind."], input=("\n".join(users) + "\n").encode())
    assert rc == 0, err
    assert got == want, f"chat differs from the twin's conversation:\n  run:  {got!r}\n  twin: {want!r}"


# ---- bad input: one line on stderr starting with "error:", non-zero exit ----

def bad_files():
    with open(CKPT, "rb") as f:
        data = f.read()
    files = {}
    def put(name, blob):
        path = scratch(name)
        with open(path, "wb") as f:
            f.write(blob)
        files[name] = path
    put("truncated.bin", data[:len(data) // 2])
    put("tiny.bin", data[:10])
    put("odd_heads.bin", data[:12] + struct.pack("<i", 7) + data[16:])
    put("kv_heads.bin", data[:16] + struct.pack("<i", 3) + data[20:])
    put("negative_dim.bin", struct.pack("<i", -64) + data[4:])
    put("huge_layers.bin", data[:8] + struct.pack("<i", 2**31 - 1) + data[12:])
    put("overflow.bin", struct.pack("<7i", 65536, 524288, 1024, 256, 256, 4194304, 1048576) + data[28:])
    put("trailing.bin", data + b"\0" * 8)
    put("random.bin", os.urandom(1000))
    put("empty.bin", b"")
    return files


def expect_error(args, words, status=None, input=None):
    rc, out, err = run(args, input=input)
    lines = [l for l in err.splitlines() if l.strip()]
    assert rc != 0, f"{args}: exit 0, stderr {err!r}"
    assert 0 < rc < 128, f"{args}: exit {rc} (crash?) stderr {err[-2000:]!r}"
    if status is not None:
        assert rc == status, f"{args}: exit {rc}, want {status}"
    errors = [l for l in lines if l.startswith("error:")]
    assert len(errors) == 1, f"{args}: want one 'error:' line, got {lines!r}"
    for w in words:
        assert w in errors[0], f"{args}: {w!r} not in {errors[0]!r}"


def test_bad_checkpoints():
    files = bad_files()
    cases = {
        "truncated.bin": ["truncated"], "tiny.bin": ["too short"], "odd_heads.bin": ["n_heads"],
        "kv_heads.bin": ["n_kv_heads"], "negative_dim.bin": ["dim"], "huge_layers.bin": ["n_layers"],
        "overflow.bin": ["implies"], "trailing.bin": ["implies"], "random.bin": [], "empty.bin": ["empty"],
    }
    for name, words in cases.items():
        yield name, (lambda name=name, words=words: expect_error([files[name], "-z", TOK, "-n", "5"], [name] + words, 1))


def test_bad_arguments():
    cases = [
        (BASE + ["-t", "-1"], ["-t"]), (BASE + ["-t", "abc"], ["-t"]), (BASE + ["-p", "1.5"], ["-p"]),
        (BASE + ["-p", "nan"], ["-p"]), (BASE + ["-n", "-5"], ["-n"]), (BASE + ["-k", "-1"], ["-k"]),
        (BASE + ["--threads", "0"], ["--threads"]), (BASE + ["-m", "dance"], ["dance"]),
        (BASE + ["--bogus", "1"], ["--bogus"]), (BASE + ["-t"], ["-t"]), (BASE + ["--norm", "batch"], ["--norm"]),
        (BASE + ["--norm-pos", "middle"], ["--norm-pos"]), (BASE + ["--final-norm", "maybe"], ["--final-norm"]),
        (BASE + ["--norm-eps", "0"], ["--norm-eps"]), (BASE + ["--norm-eps", "-1e-5"], ["--norm-eps"]),
        (BASE + ["--ctx", "0"], ["--ctx"]), (BASE + ["--kv", "int4"], ["--kv"]), (BASE + ["--ctx", "513"], ["seq_len"]),
        (["-n", "5"], ["checkpoint"]), (BASE + ["-m", "eval"], ["-f"]),
        (BASE + ["extra.bin"], ["extra.bin"]), (BASE + ["-s", "12x"], ["-s"]),
        (BASE + ["--wait", "busy"], ["--wait"]),
        (BASE + ["--qk-norm", "maybe"], ["--qk-norm"]), (BASE + ["--qk-norm", "on"], ["--qk-norm", "q/k norm"]),
    ]
    for i, (args, words) in enumerate(cases):
        yield f"{i}_{'_'.join(a.strip('-') for a in args[3:5])}", (lambda a=args, w=words: expect_error(a, w, 2))


def test_missing_and_wrong_files():
    yield "missing_checkpoint", lambda: expect_error([scratch("nope.bin"), "-z", TOK], ["nope.bin"], 1)
    yield "missing_tokenizer", lambda: expect_error([CKPT, "-z", scratch("nope_tok.bin")], ["nope_tok.bin"], 1)
    yield "checkpoint_is_a_directory", lambda: expect_error([common.TESTS, "-z", TOK], ["regular file"], 1)
    yield "wrong_tokenizer", lambda: expect_error([CKPT, "-z", model("tokenizer.bin")], ["tokenizer"], 1)
    yield "missing_eval_file", lambda: expect_error(BASE + ["-m", "eval", "-f", scratch("nope.txt")], ["nope.txt"], 1)


def test_prompt_longer_than_context():
    expect_error(BASE + ["--ctx", "16", "-i", PROMPT * 3], ["prompt", "context"], 1)


def test_prompt_longer_than_steps():
    expect_error(BASE + ["-n", "4", "-i", PROMPT], ["-n"], 2)


def test_mmap_flag_same_text_either_way():
    """--mmap on reads the weights in place from the mapped file, --mmap off
    from a copy in RAM: llama2.c's two published outputs from both, the same
    scores in eval mode; --info names which and counts the copy in the total;
    auto maps a file this small; a copy above --max-memory and a bad value
    are refused in one line"""
    for mode in ("on", "off", "auto"):
        for args, name in ((["-t", "0", "-n", "200"], "stories260K.greedy200.txt"),
                           (["-t", "1.0", "-p", "0.9", "-s", "133742", "-n", "256"], "stories260K.t1-p0.9-s133742.txt")):
            rc, out, err = run(BASE + args + ["--mmap", mode])
            assert rc == 0, err
            assert out == golden(name), (mode, name, out[:200])
    text = scratch("mmap_eval.txt")
    with open(text, "w") as f:
        f.write("Once upon a time, there was a little girl named Lily. She liked to play outside in the sun.\n")
    scores = []
    for mode in ("on", "off"):
        rc, out, err = run(BASE + ["-m", "eval", "-f", text, "--mmap", mode])
        assert rc == 0, err
        scores.append(re.search(rb"tokens \d+ +nll [\d.]+ +ppl [\d.]+", out))
    assert scores[0] and scores[1] and scores[0].group(0) == scores[1].group(0), scores
    size = os.path.getsize(CKPT)
    info = {}
    for mode in ("on", "off", "auto"):
        rc, out, err = run(BASE + ["--info", "--mmap", mode])
        assert rc == 0, err
        info[mode] = out.decode()
        weights = re.search(r"weights +(\d+) bytes .*\((.*)\)", info[mode])
        assert weights and int(weights.group(1)) == size, info[mode]
        copied = mode == "off"
        assert weights.group(2).startswith("copied into RAM" if copied else "read in place"), (mode, weights.group(2))
    total = {m: int(re.search(r"total RAM +(\d+) bytes", info[m]).group(1)) for m in info}
    assert total["off"] == total["on"] + size and total["auto"] == total["on"], total
    rc, out, err = run(BASE + ["-n", "8", "--mmap", "off", "--max-memory", "512K"])
    line = err.strip().splitlines()
    assert rc == 1 and len(line) == 1 and "--mmap off" in line[0] and str(size) in line[0], err
    rc, out, err = run(BASE + ["-n", "8", "--mmap", "maybe"])
    assert rc == 2 and "--mmap expects auto, on or off, got 'maybe'" in err, err


def transparent_huge_pages():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            line = f.read()
    except OSError:
        return False
    return "[always]" in line or "[madvise]" in line


def test_mmap_auto_copies_files_of_16_mib():
    """--mmap auto copies a file of 16 MiB and more into RAM where Linux has
    transparent huge pages (decode misses the TLB less), a smaller one stays
    mapped, and a copy above a quarter of --max-memory is mapped instead
    (llama2.c legacy files of zero weights, dim 768, one layer)"""
    def legacy(name, hidden):
        dim, layers, heads, vocab, seq = 768, 1, 8, 512, 64
        floats = (vocab * dim + 2 * layers * dim + 4 * layers * dim * dim + 3 * layers * dim * hidden + dim
                  + seq * (dim // heads))
        path = scratch(name)
        with open(path, "wb") as f:   # zeros: a sparse file
            f.write(struct.pack("<7i", dim, hidden, layers, heads, heads, vocab, seq))
            f.truncate(28 + 4 * floats)
        return path

    mib16, short = legacy("mmap_auto_16mib.bin", 768), legacy("mmap_auto_short.bin", 512)
    size = os.path.getsize(mib16)
    assert os.path.getsize(short) < 16 << 20 <= size

    def weights(path, *more):
        rc, out, err = run([path, "-z", TOK, "--info", "--mmap", "auto", *more])
        assert rc == 0, err
        found = re.search(r"weights +(\d+) bytes .*\((.*)\)", out.decode())
        assert found and int(found.group(1)) == os.path.getsize(path), out
        return found.group(2)

    assert weights(mib16).startswith("copied into RAM" if transparent_huge_pages() else "read in place")
    assert weights(short).startswith("read in place")
    assert weights(mib16, "--max-memory", str(4 * size - 4)).startswith("read in place")
    rc, out, err = run([mib16, "-z", TOK, "-n", "4", "-t", "0", "-i", "Once", "--mmap", "auto"])
    assert rc == 0 and out.startswith(b"Once"), (out, err)
