"""The GGUF writer (`--format gguf`): llama.cpp's format with the tokenizer inside."""
import os
import struct

import numpy as np

from .common import ExportError, log
from .llmw import F16_MAX, NORM_POS_NAMES, tensor_plan, validate_config, WT_F32
from .quantizers import (dequantize_gguf, GG_F16, GG_F32, GG_Q4_0, GG_Q8_0, GGUF_BLOCK,
                         quantize_gguf_q4_0, quantize_gguf_q8_0)
from .writer import atomic_output, ROW_CHUNK_ELEMS
from .jsonconf import _json
from .read_hf import permute_rotary
from .tok_sentencepiece import check_vocab, hf_tokenizer_vocab, read_sentencepiece_model, sentencepiece_vocab
from .tok_byte_level import (byte_level_tokenizer, bytes_to_unicode, is_byte_level, PRE_GPT2,
                             PRE_LLAMA3, PRE_QWEN2, PRE_SMOLLM)

# ----------------------------------------------------------------------------
# GGUF output: llama.cpp's format (`--format gguf`)
#
# Written from the GGUF specification (ggml's docs/gguf.md): a little-endian
# header (magic "GGUF", version 3, tensor count, metadata count), the metadata
# as typed key/value pairs, one info record per tensor (name, dimensions
# innermost first, type, offset into the data section), then the data section
# at the next multiple of general.alignment, each tensor at such a multiple.
# Blocks of 32 values: Q8_0 = f16 scale d + 32 int8 (value = q * d); Q4_0 =
# f16 scale d + 16 bytes whose low nibbles hold values 0..15 and high nibbles
# values 16..31 (value = (nibble - 8) * d). The rounding follows the
# reference quantizers the specification points to, so a file written here
# holds the bytes llama.cpp's own quantizer would write.

GGUF_VERSION = 3
GGUF_ALIGN = 32
GGUF_TYPE_NAMES = {GG_F32: "f32", GG_F16: "f16", GG_Q4_0: "q4_0", GG_Q8_0: "q8_0"}
# metadata value types (gguf_type)
GV_UINT32, GV_INT32, GV_FLOAT32, GV_BOOL, GV_STRING, GV_ARRAY = 4, 5, 6, 7, 8, 9
# general.file_type: llama_ftype of the file's dominant type
GGUF_FILE_TYPE = {GG_F32: 0, GG_F16: 1, GG_Q4_0: 2, GG_Q8_0: 7}
GGUF_DTYPES = {"f32": GG_F32, "f16": GG_F16, "q8_0": GG_Q8_0, "q4_0": GG_Q4_0}
# token types of tokenizer.ggml.token_type
TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER_DEFINED, TT_UNUSED, TT_BYTE = 1, 2, 3, 4, 5, 6


def gguf_tensor_type(name, shape, kind, want):
    """The type a tensor is written in: norms f32; a matrix in `want`, unless its rows are
    not whole blocks of 32 (stories260K's hidden_dim 172): then f16 (write_gguf says so)."""
    if kind == "vec" or want in (GG_F32, GG_F16):
        return GG_F32 if kind == "vec" else want
    return GG_F16 if shape[-1] % GGUF_BLOCK else want


def gguf_tensor_bytes(name, arr, gtype):
    a = np.asarray(arr, dtype=np.float32)
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if gtype == GG_F32:
        return a.astype("<f4").tobytes()
    if gtype == GG_F16:
        big = float(np.abs(a).max(initial=0))
        if not big <= F16_MAX:
            raise ExportError(f"tensor {name} has a value of magnitude {big:g}, beyond the f16 "
                              f"range (65504): use --dtype f32")
        return a.astype("<f2").tobytes()
    step = max(1, ROW_CHUNK_ELEMS // a.shape[1])
    q = quantize_gguf_q8_0 if gtype == GG_Q8_0 else quantize_gguf_q4_0
    return b"".join(q(a[r:r + step]) for r in range(0, a.shape[0], step))


def _gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _gguf_kv(key, vtype, value):
    out = _gguf_str(key) + struct.pack("<I", vtype)
    if vtype == GV_STRING:
        return out + _gguf_str(value)
    if vtype == GV_ARRAY:
        etype, items = value
        out += struct.pack("<IQ", etype, len(items))
        if etype == GV_STRING:
            return out + b"".join(_gguf_str(s) for s in items)
        fmt = {GV_UINT32: "<u4", GV_INT32: "<i4", GV_FLOAT32: "<f4"}[etype]
        return out + np.asarray(items, dtype=fmt).tobytes()
    fmt = {GV_UINT32: "<I", GV_INT32: "<i", GV_FLOAT32: "<f", GV_BOOL: "<?"}[vtype]
    return out + struct.pack(fmt, value)


# llama.cpp's gemma3 (its src/models/gemma3.cpp): layer l is global when l % 6 == 5 (the
# default of attention.sliding_window_pattern, which its converter does not write)
GEMMA3_PERIOD = 6


def gemma3_local_mask(n_layers, period=GEMMA3_PERIOD):
    return sum(1 << l for l in range(n_layers) if l % period < period - 1)


def gguf_gemma3_check(cfg):
    """What llama.cpp's gemma3 computes for itself, against the model's fields: refused
    where they differ (named), a note where only the embedding scale's rounding does."""
    d, hs, L = cfg["dim"], cfg["head_size"], cfg["n_layers"]
    if cfg.get("ffn_act") != 1 or cfg.get("norm_pos") != 2 or not cfg.get("out_norm") or not cfg.get("qk_norm"):
        raise ExportError("--format gguf: this model has some of Gemma's fields but not Gemma 3's block (the peri "
                          "placement, per-head q/k norms, GELU-tanh gate): no llama.cpp architecture holds it")
    want_qs = d // cfg["n_heads"] if L == 62 else hs
    if float(cfg.get("query_scalar") or hs) != float(want_qs):
        raise ExportError(f"--format gguf: query_pre_attn_scalar {cfg.get('query_scalar'):g}: llama.cpp's gemma3 "
                          f"scales scores by 1/sqrt({want_qs}) ({'hidden / heads' if L == 62 else 'head_dim'}): "
                          f"write LLMW for this model")
    exact = float(np.float32(np.sqrt(np.float32(d))))
    scale = float(cfg.get("embed_scale") or 0.0)
    if abs(scale - exact) > 0.01 * exact:
        raise ExportError(f"--format gguf: embedding scale {scale:g}: llama.cpp's gemma3 uses sqrt(hidden) = "
                          f"{exact:g}: write LLMW for this model")
    if scale != exact:
        log(f"note: the embedding scale {scale:g} (sqrt({d}) in the checkpoint's dtype, as transformers "
            f"computes it) becomes llama.cpp's sqrtf({d}) = {exact:.7g} in a gemma3 GGUF")
    if cfg.get("sliding_window") and cfg.get("local_layers") != gemma3_local_mask(L):
        raise ExportError(f"--format gguf: the local (sliding-window) layers are not llama.cpp's gemma3 rule "
                          f"(layer l global when l % {GEMMA3_PERIOD} == {GEMMA3_PERIOD - 1}): write LLMW for this model")
    if cfg.get("rope_scaling") not in (0, None, 1):
        raise ExportError("--format gguf: gemma3 takes linear rope scaling only: write LLMW for this model")


def gguf_olmo2_check(cfg):
    """llama.cpp's olmo2 (src/models/olmo2.cpp): the out placement, whole q/k norms, SiLU,
    head_dim = hidden / heads, no sliding window, no rope scaling written here."""
    bad = [k for k in ("ffn_act", "embed_scale", "query_scalar", "sliding_window", "qkv_bias", "rope_scaling")
           if cfg.get(k)]
    if bad or cfg.get("norm_pos") != 3 or not cfg.get("out_norm") or not cfg.get("qk_norm"):
        raise ExportError(f"--format gguf: q/k norms over the whole projections fit llama.cpp's olmo2 only, "
                          f"whose block is the out placement with SiLU{' and none of ' + ', '.join(bad) if bad else ''}"
                          f": write LLMW for this model")
    if cfg["head_size"] * cfg["n_heads"] != cfg["dim"]:
        raise ExportError(f"--format gguf: head_size {cfg['head_size']} x {cfg['n_heads']} heads is not hidden "
                          f"{cfg['dim']}, as llama.cpp's olmo2 requires: write LLMW for this model")


def gguf_arch(cfg):
    """The llama.cpp architecture that holds `cfg`: olmo2 (whole q/k norms, the out
    placement), gemma3 (Gemma's fields, the peri placement), qwen2 (q/k/v biases), qwen3
    (per-head q/k norms) or llama (neither); what its llama.cpp graph would compute
    differently is refused, named."""
    if cfg.get("qk_norm_whole"):
        gguf_olmo2_check(cfg)
        return "olmo2"
    gemma = [k for k in ("ffn_act", "embed_scale", "query_scalar", "sliding_window") if cfg.get(k)]
    if gemma:
        gguf_gemma3_check(cfg)
        return "gemma3"
    if cfg.get("qkv_bias") and cfg.get("qk_norm"):
        raise ExportError("--format gguf: q/k/v biases and q/k norms together fit no llama.cpp "
                          "architecture (qwen2 has the biases, qwen3 the norms): write LLMW for this model")
    return "qwen2" if cfg.get("qkv_bias") else "qwen3" if cfg.get("qk_norm") else "llama"


def gguf_tensor_name(name):
    """The engine's canonical tensor name -> llama.cpp's (all five archs share them; the
    output norms of gemma3 and olmo2 are post_attention_norm and post_ffw_norm)."""
    fixed = {"tok_embeddings": "token_embd.weight", "final_norm": "output_norm.weight",
             "classifier": "output.weight"}
    if name in fixed:
        return fixed[name]
    _, l, part = name.split(".", 2)
    per_layer = {"attn_norm": "attn_norm.weight", "wq": "attn_q.weight", "wk": "attn_k.weight",
                 "wv": "attn_v.weight", "wo": "attn_output.weight", "ffn_norm": "ffn_norm.weight",
                 "w1": "ffn_gate.weight", "w2": "ffn_down.weight", "w3": "ffn_up.weight",
                 "q_bias": "attn_q.bias", "k_bias": "attn_k.bias", "v_bias": "attn_v.bias",
                 "q_norm": "attn_q_norm.weight", "k_norm": "attn_k_norm.weight",
                 "attn_out_norm": "post_attention_norm.weight", "ffn_out_norm": "post_ffw_norm.weight"}
    if part not in per_layer:
        raise ExportError(f"tensor {name} has no place in a GGUF model")
    return f"blk.{l}.{per_layer[part]}"


def gguf_rows(arch, cfg, name, arr):
    """`arr` in the row order llama.cpp expects. The engine keeps q/k rows (and the q/k
    biases, and a head's q/k norm weights) as interleaved rotary pairs, which is what
    llama.cpp's llama holds; qwen2, qwen3, gemma3 and olmo2 rotate halves (NEOX) on rows
    in Hugging Face's order (llama.cpp's converter permutes none of them), so those go
    back to it (olmo2's q/k norm weights span every head: each head's part)."""
    part = name.rsplit(".", 1)[-1]
    whole = bool(cfg.get("qk_norm_whole"))
    heads = {"wq": cfg["n_heads"], "wk": cfg["n_kv_heads"], "q_bias": cfg["n_heads"],
             "k_bias": cfg["n_kv_heads"], "q_norm": cfg["n_heads"] if whole else 1,
             "k_norm": cfg["n_kv_heads"] if whole else 1}
    if arch == "llama" or part not in heads:
        return arr
    a = np.asarray(arr, dtype=np.float32)
    if a.ndim == 1:
        return permute_rotary(a.reshape(-1, 1), heads[part], cfg["head_size"]).reshape(-1)
    return permute_rotary(a, heads[part], cfg["head_size"])


def tokenizer_bin_vocab(path):
    """llama2.c's tokenizer.bin -> (pieces in sentencepiece spelling, scores, bos, eos):
    ' ' back to U+2581, and ids 0/1/2 as <unk>/<s>/</s>, as the file implies them."""
    data = open(path, "rb").read()
    if len(data) < 4:
        raise ExportError(f"{path}: too short for a tokenizer.bin")
    pos, pieces, scores = 4, [], []
    while pos < len(data):
        if pos + 8 > len(data):
            raise ExportError(f"{path}: truncated at byte {pos} (token {len(pieces)})")
        score, n = struct.unpack_from("<fi", data, pos)
        if n < 0 or pos + 8 + n > len(data):
            raise ExportError(f"{path}: token {len(pieces)} has length {n}, past the end of the file")
        try:
            text = data[pos + 8:pos + 8 + n].decode("utf-8")
        except UnicodeDecodeError:
            raise ExportError(f"{path}: token {len(pieces)} is not valid UTF-8")
        pieces.append(text.replace(" ", "\u2581"))
        scores.append(score)
        pos += 8 + n
    if len(pieces) < 3:
        raise ExportError(f"{path}: {len(pieces)} tokens; a llama2.c vocabulary has <unk>, <s>, </s> first")
    pieces[:3] = ["<unk>", "<s>", "</s>"]
    return pieces, scores, 1, 2


def gguf_vocab(path):
    """(path, pieces, scores, token types, bos, eos) for tokenizer.ggml.model "llama" from any
    sentencepiece-style tokenizer input: tokenizer.model, a Llama-2-style tokenizer.json,
    llama2.c's tokenizer.bin, or a folder holding one; ("gpt2", path, {...}) from a
    byte-level BPE tokenizer.json (gguf_byte_level_vocab)."""
    if os.path.isdir(path):
        for name in ("tokenizer.model", "tokenizer.json", "tokenizer.bin"):
            if os.path.exists(os.path.join(path, name)):
                path = os.path.join(path, name)
                break
        else:
            raise ExportError(f"{path}: no tokenizer.model, tokenizer.json or tokenizer.bin in it: "
                              f"give --tokenizer")
    if not os.path.isfile(path):
        raise ExportError(f"tokenizer {path} does not exist")
    with open(path, "rb") as fh:
        first = fh.read(64).lstrip()
    if first[:1] == b"{" and is_byte_level(_json(path)):
        return gguf_byte_level_vocab(path)
    if first[:1] == b"{":
        pieces, scores, bos, eos = hf_tokenizer_vocab(path)
    elif path.endswith(".model"):
        pieces, scores, bos, eos = sentencepiece_vocab(path)
    else:
        pieces, scores, bos, eos = tokenizer_bin_vocab(path)
    check_vocab(path, pieces, scores, bos, eos)
    types = []
    for i, p in enumerate(pieces):
        if p == "<unk>":
            types.append(TT_UNKNOWN)
        elif i in (bos, eos) or p == "":
            types.append(TT_CONTROL)
        elif len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
            types.append(TT_BYTE)
        else:
            types.append(TT_NORMAL)
    return path, pieces, scores, types, bos, eos


def _looks_special(text):
    """llama.cpp's converter (does_token_look_special): added tokens it makes control
    tokens though tokenizer_config.json does not call them special"""
    return text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or \
        (text.startswith("<|") and text.endswith("|>")) or (text.startswith("<\uff5c") and text.endswith("\uff5c>")) or \
        (text.startswith("<unused") and text.endswith(">"))


def gemma3_vocab(vocab):
    """A sentencepiece vocabulary (gguf_vocab's "llama" tuple) typed and completed as
    llama.cpp's converter does for gemma3 (_create_vocab_sentencepiece): a
    tokenizer.model's unknown, control, unused and byte pieces keep their type, the
    others are normal; then added_tokens.json's ids become user-defined and
    tokenizer_config.json's added_tokens_decoder control (special, or looking special)
    or user-defined (U+2581 as a space), each scored -1000."""
    path, pieces, scores, types, bos, eos = vocab
    pieces, scores = list(pieces), list(scores)
    if path.endswith(".model"):
        types = [t if t in (TT_UNKNOWN, TT_CONTROL, TT_UNUSED, TT_BYTE) else TT_NORMAL
                 for t in read_sentencepiece_model(path)[2]]
    types = list(types)
    folder = os.path.dirname(os.path.abspath(path))
    added = os.path.join(folder, "added_tokens.json")
    for text, i in (_json(added).items() if os.path.exists(added) else ()):
        if isinstance(i, int) and 0 <= i < len(pieces):
            pieces[i], scores[i], types[i] = text, -1000.0, TT_USER_DEFINED
    tc = os.path.join(folder, "tokenizer_config.json")
    decoder = (_json(tc) if os.path.exists(tc) else {}).get("added_tokens_decoder") or {}
    for key, tok in decoder.items():
        i, text = int(key), tok.get("content") if isinstance(tok, dict) else None
        if not isinstance(text, str) or not 0 <= i < len(pieces):
            continue
        special = tok.get("special") or _looks_special(text)
        pieces[i] = text if special else text.replace("\u2581", " ")
        scores[i], types[i] = -1000.0, TT_CONTROL if special else TT_USER_DEFINED
    return path, pieces, scores, types, bos, eos


GGUF_PRE_NAMES = {PRE_GPT2: "gpt-2", PRE_LLAMA3: "llama-bpe", PRE_QWEN2: "qwen2", PRE_SMOLLM: "smollm"}


def gguf_byte_level_vocab(path):
    """A byte-level BPE tokenizer.json (GPT-2, Llama 3, Qwen2, SmolLM2) as llama.cpp's
    "gpt2" tokenizer: pieces in GPT-2's byte-to-character spelling (added tokens as their
    text), token types 1 normal / 3 control (special added) / 4 user-defined (other added),
    the merges as "left right" strings in rank order, and tokenizer.ggml.pre naming the
    pre-tokenizer as llama.cpp names it. Returns ("gpt2", path, {...})."""
    t = byte_level_tokenizer(path, _json(path))
    spell = bytes_to_unicode()
    tokens = [p.decode("utf-8") if f else "".join(spell[b] for b in p) for p, f in zip(t["pieces"], t["flags"])]
    types = [{0: TT_NORMAL, 1: TT_CONTROL, 2: TT_USER_DEFINED}[f] for f in t["flags"]]
    merges = [f"{tokens[a]} {tokens[b]}" for (a, b), _ in sorted(t["merges"].items(), key=lambda kv: kv[1][0])]
    tc = os.path.join(os.path.dirname(os.path.abspath(path)), "tokenizer_config.json")
    template = (_json(tc) if os.path.exists(tc) else {}).get("chat_template")
    if isinstance(template, list):   # [{"name": ..., "template": ...}]
        template = next((x.get("template") for x in template if isinstance(x, dict) and x.get("name") == "default"), None)
    return "gpt2", path, dict(tokens=tokens, types=types, merges=merges, pre=GGUF_PRE_NAMES[t["pre"]],
                              bos=t["bos"], eos=t["eos"], eot=t["eot"], add_bos=t["add_bos"],
                              template=template if isinstance(template, str) else None)


def gguf_tokenizer_kv(vocab, vocab_size):
    """The tokenizer.ggml.* pairs of gguf_vocab()'s result for a model of vocab_size rows."""
    if len(vocab) == 3:   # ("gpt2", path, {...})
        v = vocab[2]
        n = len(v["tokens"])
        if n > vocab_size:
            raise ExportError(f"the tokenizer has {n} tokens, more than the model's vocab_size {vocab_size}")
        # the model's extra rows, as llama.cpp's converter fills them: [PADi], type unused
        tokens = v["tokens"] + [f"[PAD{i}]" for i in range(n, vocab_size)]
        types = v["types"] + [TT_UNUSED] * (vocab_size - n)
        kv = [("tokenizer.ggml.model", GV_STRING, "gpt2"),
              ("tokenizer.ggml.pre", GV_STRING, v["pre"]),
              ("tokenizer.ggml.tokens", GV_ARRAY, (GV_STRING, tokens)),
              ("tokenizer.ggml.token_type", GV_ARRAY, (GV_INT32, types)),
              ("tokenizer.ggml.merges", GV_ARRAY, (GV_STRING, v["merges"])),
              ("tokenizer.ggml.add_bos_token", GV_BOOL, bool(v["add_bos"]))]
        for key, i in (("bos", v["bos"]), ("eos", v["eos"]), ("eot", v["eot"])):
            if i >= 0:
                kv.append((f"tokenizer.ggml.{key}_token_id", GV_UINT32, i))
        if v["template"]:
            kv.append(("tokenizer.chat_template", GV_STRING, v["template"]))
        return kv
    _, pieces, scores, types, bos, eos = vocab
    if vocab_size != len(pieces):
        raise ExportError(f"the tokenizer has {len(pieces)} tokens, the model's vocab_size is {vocab_size}")
    kv = [("tokenizer.ggml.model", GV_STRING, "llama"),
          ("tokenizer.ggml.tokens", GV_ARRAY, (GV_STRING, pieces)),
          ("tokenizer.ggml.scores", GV_ARRAY, (GV_FLOAT32, scores)),
          ("tokenizer.ggml.token_type", GV_ARRAY, (GV_INT32, types)),
          ("tokenizer.ggml.bos_token_id", GV_UINT32, bos),
          ("tokenizer.ggml.eos_token_id", GV_UINT32, eos),
          ("tokenizer.ggml.add_bos_token", GV_BOOL, True),
          ("tokenizer.ggml.add_eos_token", GV_BOOL, False)]
    if TT_UNKNOWN in types:
        kv.append(("tokenizer.ggml.unknown_token_id", GV_UINT32, types.index(TT_UNKNOWN)))
    return kv


def gguf_metadata(cfg, vocab, want):
    """The key/value pairs of the file; `vocab` None: no tokenizer (tokenizer.ggml.model
    "none", which llama.cpp loads as a model without a vocabulary)."""
    arch = gguf_arch(cfg)
    pos = {"gemma3": 2, "olmo2": 3}.get(arch, 0)
    why = [k for k, ok in (("--norm layer", cfg["norm_type"] == 0), (f"--norm-pos {NORM_POS_NAMES[cfg['norm_pos']]}", cfg["norm_pos"] == pos),
                          ("output norms", bool(cfg.get("out_norm")) == (pos != 0)),
                          ("--final-norm off", cfg["final_norm"] == 1), ("norm biases", not cfg["norm_bias"]))
           if not ok]
    if why:
        raise ExportError(f"GGUF's {arch} architecture is {NORM_POS_NAMES[pos]}-RMSNorm with a final norm: it "
                          f"cannot hold {', '.join(why)}")
    if cfg.get("rope_scaling") and arch != "gemma3":
        raise ExportError(f"--format gguf writes {arch} without rope scaling so far: write LLMW for this model")
    a = arch
    kv = [("general.architecture", GV_STRING, arch),
          ("general.name", GV_STRING, "export.py"),
          ("general.alignment", GV_UINT32, GGUF_ALIGN),
          ("general.file_type", GV_UINT32, GGUF_FILE_TYPE[want]),
          (f"{a}.vocab_size", GV_UINT32, cfg["vocab_size"]),
          (f"{a}.context_length", GV_UINT32, cfg["seq_len"]),
          (f"{a}.embedding_length", GV_UINT32, cfg["dim"]),
          (f"{a}.block_count", GV_UINT32, cfg["n_layers"]),
          (f"{a}.feed_forward_length", GV_UINT32, cfg["hidden_dim"]),
          (f"{a}.attention.head_count", GV_UINT32, cfg["n_heads"]),
          (f"{a}.attention.head_count_kv", GV_UINT32, cfg["n_kv_heads"]),
          (f"{a}.attention.key_length", GV_UINT32, cfg["head_size"]),
          (f"{a}.attention.value_length", GV_UINT32, cfg["head_size"]),
          (f"{a}.rope.dimension_count", GV_UINT32, cfg["head_size"]),
          (f"{a}.rope.freq_base", GV_FLOAT32, cfg["rope_theta"]),
          (f"{a}.attention.layer_norm_rms_epsilon", GV_FLOAT32, cfg["norm_eps"])]
    if arch == "gemma3":   # as llama.cpp's Gemma3Model writes them (pattern and scales: its defaults)
        if cfg.get("rope_scaling"):
            kv += [(f"{a}.rope.scaling.type", GV_STRING, "linear"),
                   (f"{a}.rope.scaling.factor", GV_FLOAT32, cfg["rope_factor"])]
        if cfg.get("sliding_window"):
            kv += [(f"{a}.attention.sliding_window", GV_UINT32, cfg["sliding_window"]),
                   (f"{a}.rope.freq_base_swa", GV_FLOAT32, cfg["rope_local_theta"])]
    if vocab is None:
        return kv + [("tokenizer.ggml.model", GV_STRING, "none")]
    kv += gguf_tokenizer_kv(vocab, cfg["vocab_size"])
    if arch == "gemma3" and len(vocab) != 3:   # sentencepiece without the dummy-prefix space
        kv += [("tokenizer.ggml.pre", GV_STRING, "default"), ("tokenizer.ggml.add_space_prefix", GV_BOOL, False)]
    return kv


def gguf_plan(arch, cfg):
    """[(engine name, shape, kind, source name)]: the LLMW plan as llama.cpp's arch holds it.
    olmo2 has no input norms (the out placement: they are weight 1, unused) and requires
    output.weight, so a tied model writes its embedding there too."""
    plan = [(n, s, k, n) for n, s, k in tensor_plan(dict(cfg, norm_bias=0))]
    if arch == "olmo2":
        plan = [x for x in plan if x[0].rsplit(".", 1)[-1] not in ("attn_norm", "ffn_norm")]
        if cfg["shared_classifier"]:
            plan.append(("classifier", (cfg["vocab_size"], cfg["dim"]), "mat", "tok_embeddings"))
    return plan


def write_gguf(path, cfg, src, want, tok_path):
    """Write `src` as a GGUF llama, qwen2, qwen3, gemma3 or olmo2 model with its tokenizer
    (tok_path None: none); returns (bytes, max abs error)."""
    validate_config(dict(cfg, weight_type=WT_F32, group_size=0))
    vocab = gguf_vocab(tok_path) if tok_path else None
    arch = gguf_arch(cfg)
    if arch == "gemma3" and vocab and len(vocab) != 3:
        vocab = gemma3_vocab(vocab)
    kv = gguf_metadata(cfg, vocab, want)
    plan = gguf_plan(arch, cfg)
    src.check([(sname, shape) for _, shape, _, sname in plan])
    infos, offset = [], 0
    for name, shape, kind, sname in plan:
        gtype = gguf_tensor_type(gguf_tensor_name(name), shape, kind, want)
        rows, cols = (1, shape[0]) if kind == "vec" else shape
        nbytes = {GG_F32: 4 * rows * cols, GG_F16: 2 * rows * cols,
                  GG_Q8_0: rows * cols // GGUF_BLOCK * 34, GG_Q4_0: rows * cols // GGUF_BLOCK * 18}[gtype]
        infos.append((name, shape, kind, gtype, offset, nbytes, sname))
        offset = -(-(offset + nbytes) // GGUF_ALIGN) * GGUF_ALIGN
    fell = [(gguf_tensor_name(n), s[-1]) for n, s, k, t, _, _, _ in infos if k == "mat" and t != want]
    if fell:
        log(f"note: {len(fell)} tensor(s) have rows of {sorted(set(c for _, c in fell))} values, not whole "
            f"{GGUF_TYPE_NAMES[want]} blocks of {GGUF_BLOCK}: written as f16 ({', '.join(n for n, _ in fell[:3])}"
            f"{', ...' if len(fell) > 3 else ''})")
    head = [b"GGUF", struct.pack("<IQQ", GGUF_VERSION, len(infos), len(kv))]
    head += [_gguf_kv(*x) for x in kv]
    for name, shape, kind, gtype, off, _, _ in infos:
        dims = list(reversed(shape))                      # innermost (columns) first
        head.append(_gguf_str(gguf_tensor_name(name)) + struct.pack("<I", len(dims)) +
                    struct.pack("<%dQ" % len(dims), *dims) + struct.pack("<IQ", gtype, off))
    head = b"".join(head)
    data_start = -(-len(head) // GGUF_ALIGN) * GGUF_ALIGN
    max_err = 0.0
    with atomic_output(path) as f:
        f.write(head + b"\0" * (data_start - len(head)))
        for name, shape, kind, gtype, off, nbytes, sname in infos:
            f.write(b"\0" * (data_start + off - f.tell()))
            arr = src.load(sname)
            if tuple(arr.shape) != tuple(shape):
                raise ExportError(f"tensor {src.src_name(name)} has shape {list(arr.shape)}, "
                                  f"expected {list(shape)}")
            if not np.isfinite(arr).all():
                raise ExportError(f"tensor {src.src_name(name)} contains NaN or Inf")
            arr = gguf_rows(arch, cfg, name, arr)
            raw = gguf_tensor_bytes(name, arr, gtype)
            if len(raw) != nbytes:   # a bug, not bad input
                raise ExportError(f"internal error: {name} is {len(raw)} bytes, planned {nbytes}")
            if gtype != GG_F32:
                rows, cols = (1, shape[0]) if kind == "vec" else shape
                back = dequantize_gguf(raw, gtype, rows, cols)
                max_err = max(max_err, float(np.abs(back - np.asarray(arr, np.float32).reshape(rows, cols)).max(initial=0)))
            f.write(raw)
            del arr, raw
        size = f.tell()
    if vocab:
        v = vocab[2] if len(vocab) == 3 else dict(tokens=vocab[1], bos=vocab[4], eos=vocab[5], pre="")
        log(f"tokenizer for the GGUF: {vocab[1] if len(vocab) == 3 else vocab[0]} ({len(v['tokens'])} tokens"
            f"{', byte-level BPE, pre-tokenizer ' + v['pre'] if v['pre'] else ''}, BOS {v['bos']}, EOS {v['eos']})")
    else:
        log("note: no tokenizer in the GGUF (tokenizer.ggml.model \"none\"): give --tokenizer to embed one")
    return size, max_err
