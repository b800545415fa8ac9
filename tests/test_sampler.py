"""sampler.h against a plain reference (tests/test_sampler.c, built beside
test_kernels in each variant: env SAMPLER, else KERNELS' name with
test_sampler for test_kernels), and the sampler's edge cases through ./run.
SAMPLER_QUICK=1 (the emulated i386 build) runs test_sampler --quick: the
largest vocabulary with fewer kinds of logits."""
import os

import common

KERNELS = os.environ.get("KERNELS", os.path.join(common.ROOT, "build", "test_kernels"))
SAMPLER = os.environ.get("SAMPLER", KERNELS.replace("test_kernels", "test_sampler"))


def test_sampler_matches_reference():
    assert os.path.exists(SAMPLER), f"missing {SAMPLER}: run make test-bins"
    quick = os.environ.get("SAMPLER_QUICK") == "1"
    rc, out, err = common.run(["--quick"] if quick else [], binary=SAMPLER, timeout=900)
    lines = out.decode().strip().splitlines()
    assert lines, f"no output from {SAMPLER}: {err}"
    passed, failed = (int(w) for w in lines[-1].replace(",", "").split()[::2][:2])
    assert rc == 0 and failed == 0 and passed >= (21528 if quick else 21864), "\n".join(lines[-20:]) + err


def test_tiny_topp_over_a_flat_distribution():
    # temperature 1e6 flattens stories260K's 512 probabilities to within 1e-5
    # of 1/512, below llama2.c's cutoff (1 - 1e-4) / 511 for top-p 1e-4: no
    # token is left, and llama2.c reads before its array. Here the most
    # probable token is taken, whatever the seed.
    outs = []
    for seed in ["1", "7"]:
        rc, out, err = common.run([common.model("stories260K.bin"), "-z", common.model("tok512.bin"), "-t", "1000000",
                                   "-p", "0.0001", "-s", seed, "-n", "24", "-i", "Once"])
        assert rc == 0, err
        assert len(out) > len(b"Once"), out
        outs.append(out)
    assert outs[0] == outs[1], outs
