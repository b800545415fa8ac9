"""The sampler: ./run's sampled text against an independent Python twin of
llama2.c's sampler plus top-k, min-p and llama.cpp's repeat penalty
(tests/twin.py), which draws from the engine's own logits with its own
xorshift64* coins; top-k is renormalised over the k kept tokens, top-p keeps
the shortest prefix whose mass exceeds p, min-p is llama.cpp's test on the
logits before temperature, and the penalty's window holds the prompt too."""
import common
import twin

CKPT = common.model("stories260K.bin")
TOK = common.model("tok512.bin")
STEPS = 48
MIN_MARGIN = 1e-6   # a coin closer than this to a boundary could go either way in float32

# (temperature, top-p, top-k, seed): top-k alone, top-k then top-p, llama2.c's
# top-p alone, and the plain multinomial draw
CASES = [(1.0, 1.0, 5, 42), (0.9, 0.9, 40, 7), (1.0, 0.9, 0, 133), (1.0, 1.0, 0, 5)]

# (temperature, top-p, top-k, seed, min-p, repeat penalty, window, prompt): min-p
# alone (index order), with top-p, with top-k, away from temperature 1 (where
# llama.cpp's test before temperature differs from one after it); the penalty
# greedy (so every token it changes shows), with top-p, with a short window
# and with the whole context (-1); both together
EXTRA = [
    (1.0, 1.0, 0, 11, 0.05, 1.0, 64, ""),
    (1.0, 0.9, 0, 12, 0.1, 1.0, 64, ""),
    (0.8, 1.0, 40, 13, 0.02, 1.0, 64, ""),
    (1.7, 0.95, 0, 14, 0.2, 1.0, 64, ""),
    (0.0, 0.9, 0, 1, 0.0, 1.3, 64, "Once upon a time"),
    (1.0, 0.9, 0, 15, 0.0, 1.5, 64, "Lily and Tom"),
    (0.0, 0.9, 0, 1, 0.0, 1.8, 6, ""),
    (0.0, 0.9, 0, 1, 0.0, 0.7, -1, "The dog"),
    (0.9, 0.9, 0, 16, 0.05, 1.2, 32, "Once"),
]


def check(t, p, k, seed, min_p=0.0, penalty=1.0, last_n=64, prompt=""):
    pieces = twin.load_pieces(TOK)
    window = 512 if last_n < 0 else last_n   # -1: the context, stories260K's 512
    sampler = twin.Sampler(len(pieces), t, p, k, seed, min_p, penalty, window)
    ids = [twin.BOS]
    if prompt:
        rc, out, err = common.run(["-m", "tokenize", "-z", TOK, "-i", prompt])
        assert rc == 0, err
        ids = [int(x) for x in out.split()]
    want = twin.generate(CKPT, pieces, sampler, STEPS, prompt=ids)
    assert sampler.min_margin > MIN_MARGIN, \
        f"a coin fell {sampler.min_margin:.2g} from a boundary: too close to call, pick another seed"
    args = [CKPT, "-z", TOK, "-t", t, "-p", p, "-k", k, "-s", seed, "-n", STEPS, "-i", prompt]
    if min_p:
        args += ["--min-p", min_p]
    if penalty != 1.0:
        args += ["--repeat-penalty", penalty, "--repeat-last-n", last_n]
    rc, got, err = common.run(args)
    assert rc == 0, err
    assert len(want) > 40, f"the twin drew too little to test: {want!r}"
    assert got == want, f"{' '.join(map(str, args[2:]))}:\n  run:  {got!r}\n  twin: {want!r}"


def test_sampled_text_equals_python_twin():
    for t, p, k, seed in CASES:
        yield f"t{t}-p{p}-k{k}-s{seed}", lambda t=t, p=p, k=k, seed=seed: check(t, p, k, seed)


def test_min_p_and_repeat_penalty_equal_python_twin():
    for case in EXTRA:
        t, p, k, seed, min_p, penalty, last_n, _ = case
        yield f"t{t}-p{p}-k{k}-s{seed}-minp{min_p}-rp{penalty}-n{last_n}", lambda case=case: check(*case)


def test_options_change_the_text():
    # the twin agreeing is not enough if neither option did anything: each
    # must change stories260K's greedy or seeded text here
    base = [CKPT, "-z", TOK, "-n", STEPS, "-s", 12, "-p", 0.9]
    outs = {}
    for name, extra in [("plain", []), ("minp", ["--min-p", 0.1]), ("penalty", ["--repeat-penalty", 1.5])]:
        rc, out, err = common.run(base + extra)
        assert rc == 0, err
        outs[name] = out
    assert outs["minp"] != outs["plain"] and outs["penalty"] != outs["plain"], outs


def test_defaults_leave_llama2c_text():
    # penalty 1 and min-p 0 are off: the same bytes as without the flags
    base = [CKPT, "-z", TOK, "-n", STEPS, "-s", 7]
    rc, a, err = common.run(base)
    assert rc == 0, err
    rc, b, err = common.run(base + ["--min-p", 0, "--repeat-penalty", 1, "--repeat-last-n", 64])
    assert rc == 0, err
    assert a == b


def test_sampling_flags_out_of_range():
    for flag, value, words in [("--min-p", "1.5", "--min-p 1.5 out of range"), ("--min-p", "-0.1", "out of range"),
                               ("--repeat-penalty", "0", "--repeat-penalty 0 out of range"),
                               ("--repeat-penalty", "nan", "expects a number"),
                               ("--repeat-last-n", "-2", "--repeat-last-n -2 out of range"),
                               ("--repeat-last-n", "x", "expects an integer")]:
        rc, out, err = common.run([CKPT, "-z", TOK, flag, value])
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1 and words in lines[0], (flag, value, rc, err)
