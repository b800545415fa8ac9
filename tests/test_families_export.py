"""The export side of today's model families (tests/test_families.py runs them through
the engine): export.py's permutations carry the model (the reference on the exported
LLMW equals the reference on the HF files), each feature moves the logits far beyond
the tolerance (so a missing one cannot pass), the config fields the engine cannot
honour are refused by name, pytorch_model.bin folders convert like safetensors ones,
and the progress display. No C build is involved."""
import os
import shutil
import subprocess

import common
from common import scratch
from test_families import (EXPORT, FAMILIES, N_TOKENS, REF_PYTHON, TOL, compare, converted, export, make_family,
                           py, read_f32, reference, tokens_for)

BUILD_INDEPENDENT = True  # export.py and the reference only


def test_export_permutes_to_the_same_model():
    """The reference on the exported f32 LLMW (interleaved RoPE, export.py's permuted
    q/k rows, biases and q/k norm weights) equals the reference on the HF files
    (rotate_half, as stored): the permutations and the header fields carry the model."""
    for name in FAMILIES:
        def one(name=name):
            compare(reference(name, "f32"), reference(name), f"{name}: reference LLMW vs HF", 1e-9)
        yield name, one


def test_tolerance_catches_family_errors():
    """Each feature moves the logits far beyond TOL, so leaving one out (or mis-permuting
    it) cannot pass: computed by the reference on altered models."""
    cases = [("llama3", "rope scaling ignored", dict(rope_scaling=None)),
             ("llama3", "llama3 middle band left unscaled", dict(blend=True)),
             ("linear", "rope scaling ignored", dict(rope_scaling=None)),
             ("qwen2", "q/k/v biases ignored", dict(no_bias=True)),
             ("qwen2", "q/k biases not permuted", dict(shuffle="bias")),
             ("qwen3", "q/k norm ignored", dict(qk_norm="off")),
             ("qwen3", "q/k norm weights not permuted", dict(shuffle="norm")),
             ("qwen3", "rotate_half read as interleaved", dict(rope_layout="interleaved"))]
    for name, what, change in cases:
        def one(name=name, what=what, change=change):
            folder, _ = converted(name)
            out = scratch(f"fam_wrong_{name}.f32")
            py("import reference, torch\n"
               f"w = reference.load_checkpoint({folder!r})\n"
               f"change = {change!r}\n"
               "hs = w['config']['head_size']\n"
               "perm = torch.arange(hs).view(2, hs // 2).t().reshape(-1)   # rotate_half -> interleaved\n"
               "if change.get('blend'):   # no middle band: the blended pair keeps f\n"
               "    sc = w['config']['rope_scaling']\n"
               "    w['config']['rope_scaling'] = dict(sc, high_freq_factor=sc['high_freq_factor'] * 1e-3 + sc['low_freq_factor'],\n"
               "                                       low_freq_factor=sc['low_freq_factor'])\n"
               "for k in ('rope_scaling', 'rope_layout'):\n"
               "    if k in change: w['config'][k] = change[k]\n"
               "for lw in w['layers']:\n"
               "    if change.get('no_bias'): lw['q_bias'] = None\n"
               "    if change.get('shuffle') == 'bias':\n"
               "        for k in ('q_bias', 'k_bias'): lw[k] = lw[k].view(-1, hs)[:, perm].reshape(-1)\n"
               "    if change.get('shuffle') == 'norm':\n"
               "        for k in ('q_norm', 'k_norm'): lw[k] = lw[k][perm]\n"
               f"reference.forward(w, {tokens_for(name)!r}, qk_norm=change.get('qk_norm'))"
               f".numpy().astype('<f4').tofile({out!r})\n")
            wrong = read_f32(out, N_TOKENS, FAMILIES[name]["V"])
            rel = common.rel_diff(wrong, reference(name))[0]
            print(f"   {name}: {what}: {rel:.3g}")
            assert rel > 100 * TOL, f"{name}: '{what}' changes the logits by only {rel:.3g}"
        yield f"{name}-{what.replace(' ', '-')}", one


def test_export_refuses_what_changes_the_math():
    """config.json fields the engine cannot honour are refused, the field named, and no
    output is left behind."""
    cases = [("llama3", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, ["rope_scaling", "yarn"]),
             ("llama3", {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, ["rope_scaling", "dynamic"]),
             ("llama3", {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 64}}, ["low_freq_factor"]),
             ("llama3", {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0,
                                          "high_freq_factor": 1.0, "original_max_position_embeddings": 64}},
              ["high_freq_factor"]),
             ("linear", {"rope_scaling": {"type": "linear", "factor": -1.0}}, ["factor"]),
             ("llama3", {"rope_scaling": "llama3"}, ["rope_scaling"]),
             ("qwen2", {"use_sliding_window": True}, ["use_sliding_window"]),
             ("qwen2", {"layer_types": ["full_attention", "sliding_attention"]}, ["layer_types"]),
             ("qwen3", {"attention_bias": True}, ["attention_bias"]),
             ("qwen3", {"hidden_act": "gelu"}, ["hidden_act", "gelu"]),
             ("llama3", {"mlp_bias": True}, ["mlp_bias"]),
             ("llama3", {"partial_rotary_factor": 0.5}, ["partial_rotary_factor"]),
             ("qwen2", {"architectures": ["MistralForCausalLM"]}, ["architectures", "MistralForCausalLM"]),
             ("qwen2", {"model_type": "llama"}, ["model_type"])]
    for i, (name, extra, words) in enumerate(cases):
        def one(name=name, extra=extra, words=words, i=i):
            folder = make_family(name, scratch(f"fam_bad_{i}"), config_extra=extra)
            out = scratch(f"fam_bad_{i}.llmw")
            if os.path.exists(out):
                os.remove(out)
            rc, err = export(folder, out)
            lines = [l for l in err.splitlines() if l.strip()]
            assert rc == 1 and lines and lines[-1].startswith("export.py: error:"), err
            for w in words:
                assert w in lines[-1], (w, lines[-1])
            assert not os.path.exists(out), "a refused conversion left its output"
        yield f"{i}-{'-'.join(words)}", one
    # version 1 cannot hold these models: refused with the reason, not written wrongly
    for name, word in (("qwen3", "qk_norm"), ("qwen2", "qkv_bias"), ("llama3", "rope_scaling"),
                       ("headdim", "head_size")):
        def v1(name=name, word=word):
            folder, _ = converted(name)
            out = scratch(f"fam_v1_{name}.llmw")
            rc, err = export(folder, out, "--llmw-version", "1")
            assert rc == 1 and word in err and "version 2" in err, err
        yield f"v1-{name}", v1


def test_export_progress():
    """Progress (tensor n of N, bytes, rate) only where asked: a log (stderr not a
    terminal) keeps the one-line summaries; EXPORT_PROGRESS=0 shows it from the start."""
    folder, _ = converted("qwen3")
    out = scratch("fam_progress.llmw")
    for env, want in ((None, False), ("0", True)):
        e = dict(os.environ)
        e.pop("EXPORT_PROGRESS", None)
        if env is not None:
            e["EXPORT_PROGRESS"] = env
        p = subprocess.run([REF_PYTHON, EXPORT, folder, out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=600, env=e)
        err = p.stderr.decode()
        assert p.returncode == 0, err
        n = 2 + 2 * 11   # tok_embeddings, final_norm, and 11 tensors in each of 2 layers
        shown = f"tensor {n} of {n}, " in err and "MiB/s" in err
        assert shown == want, (env, err)
        assert err.rstrip("\n").splitlines()[-1].startswith("export.py: wrote "), err


def test_pytorch_model_bin_same_as_safetensors():
    """A folder with pytorch_model.bin (torch.save of the same HF state dict) converts
    to the same bytes as the safetensors folder."""
    for name in ("qwen2", "qwen3"):
        def one(name=name):
            folder, path = converted(name)
            pt = scratch(f"fam_{name}_pt")
            shutil.rmtree(pt, ignore_errors=True)
            os.makedirs(pt)
            shutil.copy(os.path.join(folder, "config.json"), pt)
            py("import reference, torch\n"
               f"t = reference.read_safetensors({os.path.join(folder, 'model.safetensors')!r})\n"
               f"torch.save({{k: v.to(torch.float32) for k, v in t.items()}}, {os.path.join(pt, 'pytorch_model.bin')!r})\n")
            out = scratch(f"fam_{name}_pt.llmw")
            rc, err = export(pt, out)
            assert rc == 0, err
            assert open(out, "rb").read() == open(path, "rb").read(), f"{name}: pytorch_model.bin export differs"
        yield name, one
