"""The command line: options (argparse), the three commands, and main's one-line errors
and exit codes."""
import argparse
import os
import sys

from .common import ExportError, first_line, log, PROG
from .llmw import (DEFAULT_GROUP, DTYPE_NAMES, DTYPES, matrix_type, NORM_POS, NORM_POS_NAMES,
                   NORM_TYPES, ONOFF, ROPE_SCALING_NAMES, tensor_plan, V2_DEFAULTS, VERSION, WT_F32,
                   WT_Q8_0)
from .quantizers import GG_F32
from .writer import write_llmw
from .detect import describe, detect
from .random_model import random_source
from .tok_write import convert_tokenizer
from .gguf_writer import gguf_arch, GGUF_DTYPES, GGUF_VERSION, write_gguf

# ----------------------------------------------------------------------------
# command line

INPUTS_HELP = """\
input kinds (auto-detected; what was detected is printed on stderr):
  llama2.c legacy .bin     headerless: 7 int32 (dim hidden_dim n_layers n_heads
                           n_kv_heads vocab_size seq_len), then float32 weights;
                           vocab_size < 0 means a separate classifier at the end
  llama2.c v1 / v2 .bin    magic "ak42": version 1 fp32, version 2 Q8_0 (dequantized)
  LLMW .bin                this engine's format (re-export: change dtype/flags)
  llama2.c .pt             training checkpoint with model_args and model
  Hugging Face folder      config.json (LlamaForCausalLM with rope_scaling linear or
                           llama3, Qwen2ForCausalLM with q/k/v biases, Qwen3ForCausalLM
                           with q/k norms) + model.safetensors or
                           model.safetensors.index.json (else pytorch_model.bin,
                           read with torch); F32/F16/BF16 tensors;
                           q/k projections, biases and norms are un-permuted to
                           interleaved RoPE
  Meta folder              params.json + consolidated.*.pth (several shards are
                           concatenated)

defaults come from the input: RMSNorm (LayerNorm if it has norm biases), pre-norm,
final norm on, the input's eps (1e-5 for llama2.c files), rope_theta 10000 unless
the input says otherwise.

other commands:
  %(prog)s tokenizer INPUT OUTPUT.bin
      INPUT: sentencepiece tokenizer.model, a Llama-2-style tokenizer.json (BPE with
      byte fallback), or a folder holding one. Writes llama2.c's tokenizer.bin.
      A byte-level BPE tokenizer.json (GPT-2, Llama 3, Qwen2, SmolLM2) becomes an
      LTOK file (FORMAT.md), with BOS/EOS/end of turn and the chat template from
      tokenizer_config.json beside it.
  %(prog)s random [--dim 64 --hidden-dim 172 --layers 2 --heads 4 --kv-heads 2
      --vocab 97 --seq-len 128 --head-size N --seed 0 --shared|--unshared
      --norm-bias --qkv-bias --qk-norm] [model options] OUTPUT
      (--norm-pos peri or out also stores random output norms)
      a seeded random checkpoint (see `%(prog)s random --help`).

A conversion that runs longer than a second shows its progress on stderr (tensor n
of N, bytes, rate) when stderr is a terminal; EXPORT_PROGRESS=SECONDS shows it on any
stderr after that many seconds. Errors print one line and exit 1; no partial output
file is left behind.
"""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        raise SystemExit(2)


def dtype_name(name):
    """A --dtype as the engine spells it: ggml's q4_K (the older spelling q4_k is accepted)."""
    return "q4_K" if name == "q4_k" else name


def add_model_options(p, converting=True):
    g = p.add_argument_group("output options")
    g.add_argument("--dtype", choices=list(DTYPES), default="f32", type=dtype_name,
                   help="matrix storage: f32, f16, q8_0, q4_0 or q4_K (q4_k too; default f32); norms "
                        "stay f32. q4_0: ggml's blocks of 32 (f16 scale, 4-bit codes); q4_K: "
                        "ggml's superblocks of 256 (6-bit sub-block scales and mins); rows "
                        "are zero-padded to whole blocks. --format gguf: f32, f16, q8_0, q4_0")
    g.add_argument("--group-size", type=int, default=DEFAULT_GROUP, metavar="N",
                   help="q8_0 group length along each row (default 32)")
    g.add_argument("--norm", choices=list(NORM_TYPES), default=None,
                   help="norm type written to the header: rms or layer (default: rms, "
                        "or layer when the input has norm biases)")
    g.add_argument("--norm-pos", choices=list(NORM_POS), default=None,
                   help="norm placement: pre (x + F(N(x))), post (N(x + F(x))), peri "
                        "(x + N(F(N(x))), Gemma 2/3) or out (x + N(F(x)), OLMo 2) (default: "
                        "the input's, else pre). `random` stores the output norms for peri and out")
    g.add_argument("--final-norm", choices=list(ONOFF), default=None,
                   help="apply the final norm before the LM head (default: the input's, else on)")
    g.add_argument("--norm-eps", type=float, default=None, metavar="E",
                   help="norm epsilon (default: the input's; 1e-5 for llama2.c files)")
    if converting:
        g.add_argument("--seq-len", type=int, default=None, metavar="N",
                       help="override the context length written to the header")
    g.add_argument("--rope-theta", type=float, default=None, metavar="T",
                   help="override the RoPE base (default: the input's, else 10000)")
    g.add_argument("--llmw-version", type=int, choices=(1, 2), default=VERSION, metavar="V",
                   help="LLMW version to write: 2 (default; a tensor directory, RoPE scaling, "
                        "q/k/v biases, q/k norms) or 1 (for older engines)")


def header_cfg(src_cfg, a):
    cfg = {k: src_cfg[k] for k in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads",
                                   "vocab_size", "seq_len", "head_size", "norm_eps",
                                   "rope_theta", "shared_classifier", "norm_bias")}
    has_bias = bool(src_cfg.get("norm_bias"))
    if a.norm == "rms" and has_bias:
        log("note: --norm rms with norm biases: the biases are kept (added after the RMSNorm)")
    cfg["norm_type"] = NORM_TYPES[a.norm] if a.norm else src_cfg.get("norm_type", int(has_bias))
    cfg["norm_pos"] = NORM_POS[a.norm_pos] if a.norm_pos else src_cfg.get("norm_pos", 0)
    cfg["final_norm"] = ONOFF[a.final_norm] if a.final_norm else src_cfg.get("final_norm", 1)
    if a.norm_eps is not None:
        cfg["norm_eps"] = a.norm_eps
    if a.seq_len is not None:
        cfg["seq_len"] = a.seq_len
    if a.rope_theta is not None:
        cfg["rope_theta"] = a.rope_theta
    cfg["rope_layout"] = 0
    for k, v in V2_DEFAULTS.items():
        cfg[k] = src_cfg.get(k, v)
    cfg["version"] = a.llmw_version
    cfg["weight_type"] = DTYPES[a.dtype]
    if cfg["weight_type"] == WT_Q8_0:
        if a.group_size <= 0:
            raise ExportError(f"--group-size must be > 0 (got {a.group_size})")
        cfg["group_size"] = a.group_size
    else:
        cfg["group_size"] = 0
    return cfg


def do_export(src, out, a):
    cfg = header_cfg(src.cfg, a)
    size, err = write_llmw(out, cfg, src)
    extra = f", max abs rounding error {err:.3g}" if cfg["weight_type"] != WT_F32 else ""
    gs = f" group {cfg['group_size']}" if cfg["weight_type"] == WT_Q8_0 else ""
    narrow = sorted({shape[1] for _, shape, kind in tensor_plan(cfg)
                     if kind == "mat" and matrix_type(cfg, shape[1]) != cfg["weight_type"]})
    if narrow:
        gs += f" (rows of {', '.join(map(str, narrow))} as q4_0: not whole superblocks of 256)"
    feats = "".join([f", {ROPE_SCALING_NAMES[cfg['rope_scaling']]} rope scaling x{cfg['rope_factor']:g}"
                     if cfg["rope_scaling"] else "", ", q/k/v biases" if cfg["qkv_bias"] else "",
                     ", q/k norms" if cfg["qk_norm"] else "",
                     " over the whole q and k" if cfg.get("qk_norm_whole") else "",
                     ", output norms" if cfg["out_norm"] else ""])
    log(f"wrote {out}: LLMW v{cfg['version']}, {size} bytes, {DTYPE_NAMES[cfg['weight_type']]}{gs}, "
        f"norm {'layer' if cfg['norm_type'] else 'rms'} {NORM_POS_NAMES[cfg['norm_pos']]}, "
        f"final norm {'on' if cfg['final_norm'] else 'off'}, eps {cfg['norm_eps']:g}, "
        f"theta {cfg['rope_theta']:g}{feats}{extra}")


def do_export_gguf(src, out, a):
    if a.group_size != DEFAULT_GROUP:
        raise ExportError("--group-size is for LLMW's q8_0; GGUF's blocks hold 32 values")
    want = GGUF_DTYPES[a.dtype]
    cfg = header_cfg(src.cfg, argparse.Namespace(**dict(vars(a), dtype="f32")))
    arch = gguf_arch(cfg)
    tok = a.tokenizer or (a.input if os.path.isdir(a.input) else None)
    if tok and not a.tokenizer and arch != "llama" and not any(
            os.path.exists(os.path.join(tok, n)) for n in ("tokenizer.model", "tokenizer.json", "tokenizer.bin")):
        tok = None     # a qwen2/qwen3 folder without a tokenizer: the weights alone
    if tok is None and arch == "llama":
        raise ExportError(f"{a.input} holds no tokenizer and a GGUF llama model needs one: give --tokenizer")
    size, err = write_gguf(out, cfg, src, want, tok)
    extra = f", max abs rounding error {err:.3g}" if want != GG_F32 else ""
    log(f"wrote {out}: {size} bytes, GGUF v{GGUF_VERSION} {arch}, {a.dtype}{extra}")


def cmd_convert(argv):
    p = Parser(prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
               usage="%(prog)s [options] INPUT OUTPUT\n"
                     "       %(prog)s tokenizer INPUT OUTPUT.bin\n"
                     "       %(prog)s random [options] OUTPUT",
               description="Convert a Llama-style checkpoint to the engine's LLMW format "
                           "(version 2; --llmw-version 1 for the older layout).",
               epilog=INPUTS_HELP)
    p.add_argument("input", metavar="INPUT", help="checkpoint file or folder (see input kinds)")
    p.add_argument("output", metavar="OUTPUT", help="the LLMW (or GGUF) file to write")
    p.add_argument("--format", choices=("llmw", "gguf"), default="llmw",
                   help="llmw (default): the engine's own format; gguf: llama.cpp's, with the "
                        "tokenizer inside (architecture llama, qwen2 or qwen3 as the model's q/k/v biases and "
                        "q/k norms say, gemma3 or olmo2 for those models; tensors in f32/f16/q8_0/q4_0)")
    p.add_argument("--tokenizer", metavar="TOK", default=None,
                   help="with --format gguf: the tokenizer to embed (tokenizer.model, a byte-level BPE or a "
                        "Llama-2-style tokenizer.json, llama2.c's tokenizer.bin, or a folder); "
                        "default: the one in the input folder")
    add_model_options(p)
    a = p.parse_args(argv)
    if a.format != "gguf" and a.tokenizer:
        raise ExportError("--tokenizer is for --format gguf (an LLMW file holds no tokenizer)")
    if a.format == "gguf" and a.dtype not in GGUF_DTYPES:
        raise ExportError(f"--dtype {a.dtype} is for LLMW; --format gguf writes f32, f16, q8_0 and q4_0")
    src = detect(a.input)
    log(f"detected {src.desc}: {describe(src.cfg)}")
    if a.format == "gguf":
        do_export_gguf(src, a.output, a)
    else:
        do_export(src, a.output, a)


def cmd_random(argv):
    p = Parser(prog=f"{PROG} random",
               description="Write a seeded random LLMW checkpoint of any shape and variant. "
                           "Linear weights ~ N(0, 1/in_features) (wo, w2 scaled down by "
                           "(2*layers)^-1/4), embeddings/classifier ~ N(0, dim^-1/2), norm "
                           "weights 1 +- 0.2, norm biases +-[0.05, 0.2] (nonzero).")
    p.add_argument("output", metavar="OUTPUT")
    g = p.add_argument_group("shape")
    g.add_argument("--dim", type=int, default=64)
    g.add_argument("--hidden-dim", type=int, default=172)
    g.add_argument("--layers", type=int, default=2)
    g.add_argument("--heads", type=int, default=4)
    g.add_argument("--kv-heads", type=int, default=2)
    g.add_argument("--vocab", type=int, default=97)
    g.add_argument("--seq-len", type=int, default=128)
    g.add_argument("--head-size", type=int, default=0, help="default dim / heads")
    g.add_argument("--seed", type=int, default=0)
    sh = g.add_mutually_exclusive_group()
    sh.add_argument("--shared", dest="shared", action="store_true", default=True,
                    help="LM head = token embedding (default)")
    sh.add_argument("--unshared", dest="shared", action="store_false",
                    help="a separate classifier matrix")
    g.add_argument("--norm-bias", action="store_true", help="store random nonzero norm biases")
    g.add_argument("--qkv-bias", action="store_true", help="store random q, k and v biases (Qwen2)")
    g.add_argument("--qk-norm", action="store_true",
                   help="store random per-head q and k RMSNorm weights (Qwen3)")
    g.add_argument("--emb-std", type=float, default=0.0,
                   help="std of the embedding (and LM head), default dim^-0.25; 0.02 gives flat logits")
    add_model_options(p, converting=False)
    a = p.parse_args(argv)
    src = random_source(a)
    a.seq_len = None            # already in the source config
    if a.norm_bias and a.norm is None:
        a.norm = "layer"
    log(f"random model, seed {a.seed}: {describe(src.cfg)}")
    do_export(src, a.output, a)


def cmd_tokenizer(argv):
    p = Parser(prog=f"{PROG} tokenizer",
               description="Convert a sentencepiece tokenizer.model or a Llama-2-style "
                           "tokenizer.json to llama2.c's tokenizer.bin (int32 max_token_length, "
                           "then per token float32 score, int32 length, bytes; U+2581 -> ' '; "
                           "BOS/EOS written as '\\n<s>\\n' / '\\n</s>\\n'), or a byte-level "
                           "BPE tokenizer.json (GPT-2, Llama 3, Qwen2, SmolLM2) to an LTOK file "
                           "(FORMAT.md).")
    p.add_argument("input", metavar="INPUT")
    p.add_argument("output", metavar="OUTPUT.bin")
    a = p.parse_args(argv)
    convert_tokenizer(a.input, a.output)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] == "tokenizer":
            cmd_tokenizer(argv[1:])
        elif argv and argv[0] == "random":
            cmd_random(argv[1:])
        else:
            cmd_convert(argv)
    except ExportError as e:
        sys.stderr.write(f"{PROG}: error: {e}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except Exception as e:  # an unexpected failure still gets one line (EXPORT_DEBUG=1: traceback)
        if os.environ.get("EXPORT_DEBUG"):
            raise
        msg = first_line(e)
        sys.stderr.write(f"{PROG}: error: {type(e).__name__}: {msg}\n")
        return 1
    return 0
