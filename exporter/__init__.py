"""exporter -- convert Llama-style checkpoints and tokenizers for the C engine.

`python3 export.py ...` is the command line (exporter.cli.main). It writes the
engine's own checkpoint format, "LLMW" version 2 (a 256-byte little-endian header,
a tensor directory, then every tensor at a 64-byte aligned offset; version 1,
without the directory, on request: see FORMAT.md), llama2.c's tokenizer.bin, the
LTOK tokenizer file, and GGUF (`--format gguf`).

Modules, each with one job (a module imports only those above it):
  common             the program name, ExportError, one-line messages
  llmw               the LLMW format: constants, tensor plan, layout, header, checks
  quantizers         ggml's blocks of 32 (shared with GGUF), LLMW's q8_0, q4_0, q4_K
  writer             writing an LLMW file
  jsonconf           strict JSON and checked config fields
  source             Source (a model's tensors by name) and the readers' helpers
  read_llama2c       llama2.c .bin: legacy and ak42
  read_llmw          LLMW files (re-export)
  safetensors        safetensors files (numpy only)
  torchfile          PyTorch files read safely (pickles checked first)
  read_hf            Hugging Face folders: Llama, Qwen2, Qwen3
  read_pt            llama2.c training checkpoints (.pt)
  read_meta          Meta folders (params.json + consolidated.*.pth)
  detect             which reader an input needs; read_checkpoint
  random_model       seeded random checkpoints (`export.py random`)
  tok_sentencepiece  tokenizer.model, Llama-2-style tokenizer.json, tokenizer.bin
  tok_chat           chat template detection
  tok_byte_level     byte-level BPE tokenizer.json
  tok_spm_bpe        sentencepiece-style BPE tokenizer.json by rank (Gemma 3)
  tok_write          the LTOK file and the tokenizer command
  gguf_writer        the GGUF writer
  cli                options, commands, exit codes

Needs numpy (and torch only for .pt/.pth inputs). Safetensors files are read
with numpy alone. For use from Python (tests, references):

  from exporter.detect import read_checkpoint
  cfg, tensors = read_checkpoint(path)   # LLMW or any input kind; float32 arrays

Tensor names used by read_checkpoint() and the writer:
  tok_embeddings (vocab, dim)
  layers.{l}.attn_norm (dim,), layers.{l}.attn_norm_bias (dim,) [norm_bias]
  layers.{l}.wq (n_heads*hs, dim), .wk/.wv (n_kv_heads*hs, dim), .wo (dim, n_heads*hs)
  layers.{l}.q_bias (n_heads*hs,), .k_bias/.v_bias (n_kv_heads*hs,)  [qkv_bias]
  layers.{l}.q_norm (hs,), .k_norm (hs,)  [qk_norm]; with qk_norm_whole (n_heads*hs,), (n_kv_heads*hs,)
  layers.{l}.ffn_norm (dim,), layers.{l}.ffn_norm_bias (dim,) [norm_bias]
  layers.{l}.w1 (hidden, dim) gate, .w2 (dim, hidden) down, .w3 (hidden, dim) up
  layers.{l}.attn_out_norm (dim,) [+ _bias], .ffn_out_norm (dim,) [+ _bias]  [out_norm]
  final_norm (dim,), final_norm_bias (dim,) [norm_bias]
  classifier (vocab, dim)  [only when not shared_classifier]
"""
