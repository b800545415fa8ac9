"""The float64 Gemma 3 reference (tests/reference_gemma3.py), ready for the
engine's Gemma 3 tests (issue 26, item 2; the engine does not read Gemma 3
yet): on a scaled-down random folder with the 270M config's keys, whose text
crosses the sliding window, each likely implementation mistake moves the
mean NLL far past the 1e-3 the engine will be held to, so that comparison
can tell each one; and the window is what the mask makes it.

stdlib-only; the torch work runs under /usr/bin/python3 (env REF_PYTHON).
"""
import json
import os
import subprocess

import common

BUILD_INDEPENDENT = True
REF_PYTHON = os.environ.get("REF_PYTHON", "/usr/bin/python3")
# the 270M config's keys, scaled down: 6 layers (5 sliding, 1 full), one kv
# head, head_dim apart from hidden / heads, a window of 8 under a text of 48,
# bfloat16 (sqrt(72) = 8.485 rounds to 8.5), query_pre_attn_scalar != head_dim
CONFIG = dict(hidden_size=72, intermediate_size=160, num_hidden_layers=6, num_attention_heads=4,
              num_key_value_heads=1, head_dim=32, vocab_size=131, max_position_embeddings=128,
              sliding_window=8, rope_theta=1000000.0, rope_local_base_freq=10000.0,
              query_pre_attn_scalar=12, rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh",
              attn_logit_softcapping=None, final_logit_softcapping=None, torch_dtype="bfloat16",
              tie_word_embeddings=True, bos_token_id=2, eos_token_id=1,
              layer_types=["sliding_attention"] * 5 + ["full_attention"])
N_TOKENS = 48
SEED, FINAL_GAIN = 3, 8.0   # the final norm's gain sharpens the tied head's logits
NEED = 1e-2          # each mistake must move the NLL by more than this (10x the engine's 1e-3)
# except the GELU form: erf and tanh differ by at most a few 1e-4 anywhere, so
# it moves the NLL least (2.0e-3 here, the logits by 2.6e-4 of their largest):
# only above the engine's 1e-3. A folder that shows it better is still to find.
NEED_GELU = 1.5e-3


def _py(code):
    code = f"import sys; sys.path.insert(0, {common.TESTS!r})\n" + code
    p = subprocess.run([REF_PYTHON, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode()


def test_each_mistake_moves_the_nll():
    folder = common.scratch("gemma3_random")
    out = _py("import reference_gemma3 as g, random, json\n"
              f"g.write_random_folder({folder!r}, {CONFIG!r}, {SEED}, final_gain={FINAL_GAIN})\n"
              "w = g.load(" + repr(folder) + ")\n"
              f"toks = [2] + [random.Random(5).randrange(3, {CONFIG['vocab_size']}) for _ in range({N_TOKENS - 1})]\n"
              "base, good = g.nll(w, toks), g.forward(w, toks)\n"
              "rel = lambda m: float((g.forward(w, toks, {m}) - good).abs().max() / good.abs().max())\n"
              "print(json.dumps({'base': base, **{m: [g.nll(w, toks, {m}) - base, rel(m)] for m in g.MISTAKES}}))\n")
    r = json.loads(out)
    print(f"   NLL {r.pop('base'):.6f}; moved by (NLL, max rel logit): " +
          ", ".join(f"{k} {v[0]:+.4f} {v[1]:.3g}" for k, v in r.items()))
    small = {k: v for k, v in r.items() if not abs(v[0]) > (NEED_GELU if k == "gelu_erf" else NEED)}
    assert not small, f"these mistakes move the NLL too little: {small}"


def test_window_edge():
    """One sliding layer of window 8: the logits at position i change with the
    token at position p exactly when 0 <= i - p < 8 (HF's mask keeps key j for
    query i when j > i - window), so the test above's window mistake is the
    mask's edge and nothing else."""
    folder = common.scratch("gemma3_one_layer")
    conf = dict(CONFIG, num_hidden_layers=1, layer_types=["sliding_attention"])
    out = _py("import reference_gemma3 as g, random, json\n"
              f"g.write_random_folder({folder!r}, {conf!r}, {SEED})\n"
              "w = g.load(" + repr(folder) + ")\n"
              "toks = [2] + [random.Random(5).randrange(3, 131) for _ in range(23)]\n"
              "other = list(toks); other[5] = 3 if toks[5] != 3 else 4\n"
              "a, b = g.forward(w, toks), g.forward(w, other)\n"
              "print(json.dumps([bool((a[i] != b[i]).any()) for i in range(24)]))\n")
    changed = json.loads(out)
    want = [0 <= i - 5 < 8 for i in range(24)]
    assert changed == want, f"positions whose logits change with token 5: {changed}, want {want}"
