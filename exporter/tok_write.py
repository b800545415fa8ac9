"""The tokenizer command: the LTOK file's bytes (FORMAT.md) and convert_tokenizer, which
writes tokenizer.bin or LTOK from any tokenizer input."""
import os
import struct

from .common import ExportError, log
from .writer import atomic_output
from .jsonconf import _json
from .tok_sentencepiece import (check_vocab, hf_tokenizer_vocab, sentencepiece_vocab,
                                tokenizer_bin_bytes)
from .tok_chat import CHAT_NAMES
from .tok_byte_level import byte_level_tokenizer, is_byte_level
from .tok_spm_bpe import is_spm_bpe, spm_bpe_tokenizer

# --- BPE merged by rank: the LTOK file ---------------------------------------
# FORMAT.md, "The tokenizer file". Byte-level BPE (GPT-2, Llama 3, Qwen2,
# SmolLM2): pieces are stored as the raw bytes they stand for (GPT-2's
# bytes-to-unicode map undone); sentencepiece-style BPE (Gemma 3): as UTF-8 with
# spaces for U+2581. Special tokens as their text.

LTOK_MAGIC = b"LTOK"
LTOK_VERSION = 1
LTOK_KIND_BYTE_LEVEL = 1
LTOK_KIND_SPM_BPE = 2


def ltok_bytes(t, kind=LTOK_KIND_BYTE_LEVEL):
    """The LTOK file (FORMAT.md) for byte_level_tokenizer()'s or spm_bpe_tokenizer()'s dict."""
    pieces, V = t["pieces"], len(t["pieces"])
    order = sorted(range(V), key=lambda i: pieces[i])
    merges = sorted((l, r, rank, res) for (l, r), (rank, res) in t["merges"].items())
    blob = b"".join(pieces)
    ends, e = [], 0
    for p in pieces:
        e += len(p)
        ends.append(e)
    flags = int(t["add_bos"]) | (2 if t["ignore_merges"] else 0)
    header = struct.pack("<4s3I3I2i3iI3I", LTOK_MAGIC, LTOK_VERSION, 64, kind,
                         t["pre"], t["normalizer"], flags, V, len(merges),
                         t["bos"], t["eos"], t["eot"], t["chat"], max(len(p) for p in pieces),
                         len(t["system"]), len(blob))
    assert len(header) == 64
    out = [header, bytes(t["flags"]), b"\0" * (-V % 4), struct.pack(f"<{V}I", *ends),
           struct.pack(f"<{V}I", *order)]
    out += [struct.pack("<4I", *m) for m in merges]
    out += [t["system"], blob]
    return b"".join(out)


def convert_tokenizer(inp, outp):
    if os.path.isdir(inp):
        tj = os.path.join(inp, "tokenizer.json")
        for name in ("tokenizer.model", "tokenizer.json"):
            if os.path.exists(os.path.join(inp, name)):
                inp = os.path.join(inp, name)
                break
        else:
            raise ExportError(f"{inp}: no tokenizer.model or tokenizer.json in it")
        # Gemma's folders hold both; its tokenizer.model has no dummy prefix (refused): take the json
        if inp.endswith(".model") and os.path.isfile(tj) and is_spm_bpe(_json(tj)):
            inp = tj
    if not os.path.exists(inp):
        raise ExportError(f"input {inp} does not exist")
    if not os.path.isfile(inp):
        raise ExportError(f"input {inp} is not a regular file")
    with open(inp, "rb") as fh:
        first = fh.read(64).lstrip()
    if first[:1] == b"{":
        data = _json(inp)
        spm = not is_byte_level(data) and is_spm_bpe(data)
        if is_byte_level(data) or spm:
            log(f"detected a {'sentencepiece-style' if spm else 'byte-level'} BPE tokenizer.json: {inp}")
            t = spm_bpe_tokenizer(inp, data) if spm else byte_level_tokenizer(inp, data)
            out = ltok_bytes(t, LTOK_KIND_SPM_BPE if spm else LTOK_KIND_BYTE_LEVEL)
            with atomic_output(outp) as f:
                f.write(out)
            log(f"wrote {outp}: LTOK kind {2 if spm else 1}, {len(t['pieces'])} tokens, {len(t['merges'])} merges, "
                f"BOS {t['bos']} (added: {int(t['add_bos'])}), EOS {t['eos']}, end of turn {t['eot']}, "
                f"template {CHAT_NAMES[t['chat']]}, default system prompt {len(t['system'])} bytes, "
                f"{len(out)} bytes")
            return
        log(f"detected a Hugging Face tokenizer.json: {inp}")
        pieces, scores, bos, eos = hf_tokenizer_vocab(inp)
    else:
        log(f"detected a sentencepiece model: {inp}")
        pieces, scores, bos, eos = sentencepiece_vocab(inp)
    check_vocab(inp, pieces, scores, bos, eos)
    data = tokenizer_bin_bytes(pieces, scores, bos, eos)
    with atomic_output(outp) as f:
        f.write(data)
    log(f"wrote {outp}: {len(pieces)} tokens (BOS {bos}, EOS {eos}), {len(data)} bytes")
