"""The sampler: ./run's sampled text against an independent Python twin of
llama2.c's sampler plus top-k (tests/twin.py), which draws from the engine's
own logits with its own xorshift64* coins; top-k is renormalised over the k
kept tokens, top-p keeps the shortest prefix whose mass exceeds p."""
import common
import twin

CKPT = common.model("stories260K.bin")
TOK = common.model("tok512.bin")
STEPS = 48
MIN_MARGIN = 1e-6   # a coin closer than this to a boundary could go either way in float32

# (temperature, top-p, top-k, seed): top-k alone, top-k then top-p, llama2.c's
# top-p alone, and the plain multinomial draw
CASES = [(1.0, 1.0, 5, 42), (0.9, 0.9, 40, 7), (1.0, 0.9, 0, 133), (1.0, 1.0, 0, 5)]


def test_sampled_text_equals_python_twin():
    pieces = twin.load_pieces(TOK)
    for t, p, k, seed in CASES:
        def one(t=t, p=p, k=k, seed=seed):
            sampler = twin.Sampler(len(pieces), t, p, k, seed)
            want = twin.generate(CKPT, pieces, sampler, STEPS)
            assert sampler.min_margin > MIN_MARGIN, \
                f"a coin fell {sampler.min_margin:.2g} from a boundary: too close to call, pick another seed"
            rc, got, err = common.run([CKPT, "-z", TOK, "-t", t, "-p", p, "-k", k, "-s", seed, "-n", STEPS])
            assert rc == 0, err
            assert len(want) > 40, f"the twin drew too little to test: {want!r}"
            assert got == want, f"-t {t} -p {p} -k {k} -s {seed}:\n  run:  {got!r}\n  twin: {want!r}"
        yield f"t{t}-p{p}-k{k}-s{seed}", one

