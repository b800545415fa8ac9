"""Sentencepiece-style BPE tokenizer.json merged by rank with byte fallback (Gemma 3):
pieces with spaces for U+2581, merges, added tokens and the chat template, as the
dict tok_write.ltok_bytes writes (LTOK kind 2, FORMAT.md).

What @huggingface/tokenizers does with such a file, and the LTOK kind repeats:
added tokens (normalized false) are cut out of the raw text; each piece between
them has its spaces replaced by U+2581 (the normalizer), is one word (the Split
on " " finds no space left), and is merged by rank from its characters; a
character no piece holds comes out as the <0xNN> tokens of its bytes. The
decoder turns U+2581 back into spaces and <0xNN> into bytes. Storing the pieces
with spaces makes both sides of that one equivalence; the added tokens made of
U+2581 (Gemma's "▁▁".."▁"x31) keep a flag saying their spaces match U+2581 in
the raw text. Anything else this cannot reproduce exactly is refused, one line each."""
import json

from .common import ExportError
from .jsonconf import _cfg_type
from .tok_sentencepiece import _normalizers, _vocab_by_id
from .tok_byte_level import added_tokens, check_contiguous, config_ids, rank_merges

U2581 = "\u2581"
FLAG_SPECIAL, FLAG_ADDED, FLAG_U2581 = 1, 2, 4
NORM_NONE, PRE_NONE = 0, 0


def is_spm_bpe(data):
    """A BPE with byte fallback whose normalizer writes spaces as U+2581 and prepends
    nothing, with no Metaspace pre-tokenizer (Gemma 2/3's tokenizer.json)?"""
    model = data.get("model")
    if not isinstance(model, dict) or model.get("type", "BPE") != "BPE" or not model.get("byte_fallback"):
        return False
    steps = _normalizers(data)
    replaces = any(x.get("type") == "Replace" and x.get("content") == U2581 for x in steps)
    prepends = any(x.get("type") == "Prepend" for x in steps)
    return replaces and not prepends and "Metaspace" not in json.dumps(data.get("pre_tokenizer"))


def _check_pipeline(path, data, model):
    """Refuse every part of the pipeline the LTOK kind would not reproduce."""
    norm = data.get("normalizer")
    steps = norm.get("normalizers") if isinstance(norm, dict) and norm.get("type") == "Sequence" else [norm]
    if not (isinstance(steps, list) and len(steps) == 1 and steps[0] == {
            "type": "Replace", "pattern": {"String": " "}, "content": U2581}):
        raise ExportError(f"{path}: normalizer {json.dumps(norm)[:160]} is not supported for a "
                          f"sentencepiece-style BPE (only Replace ' ' -> U+2581)")
    pre = data.get("pre_tokenizer")
    if pre is not None and pre != {"type": "Split", "pattern": {"String": " "},
                                   "behavior": "MergedWithPrevious", "invert": False}:
        raise ExportError(f"{path}: pre_tokenizer {json.dumps(pre)[:160]} is not supported for a "
                          f"sentencepiece-style BPE (none, or Split on ' ' which finds no space left)")
    for k in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(k):
            raise ExportError(f"{path}: model.{k} = {model[k]!r} is not supported")
    dec = json.dumps(data.get("decoder"))
    if '"ByteFallback"' not in dec or "Strip" in dec:
        raise ExportError(f"{path}: decoder {dec[:160]} is not supported (Replace U+2581 -> ' ', "
                          f"ByteFallback, Fuse; no Strip)")


def spm_bpe_tokenizer(path, data):
    """Everything an LTOK kind-2 file holds, from the tokenizer.json and the
    tokenizer_config.json / generation_config.json beside it."""
    model = _cfg_type(data, "model", path, dict, "an object") or {}
    _check_pipeline(path, data, model)
    vocab, merges = model.get("vocab"), model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list) or not vocab:
        raise ExportError(f"{path}: model.vocab (an object) / model.merges (a list) missing or empty")
    id2piece, flags = _vocab_by_id(vocab, path), {}
    for i, piece in id2piece.items():
        if " " in piece:
            raise ExportError(f"{path}: vocab entry {piece!r} (id {i}) has a space, which this "
                              f"kind stores for U+2581")
    for i, c, at in added_tokens(data, path, id2piece):
        for k in ("lstrip", "rstrip", "single_word"):
            if at.get(k):
                raise ExportError(f"{path}: added token {c!r} has {k} true, not supported")
        if at.get("normalized") and (" " in c or U2581 in c):
            raise ExportError(f"{path}: added token {c!r} is normalized and has a space or U+2581, "
                              f"not supported")
        if U2581 in c and set(c) != {U2581}:
            raise ExportError(f"{path}: added token {c!r} mixes U+2581 with other characters, not supported")
        if " " in c:
            raise ExportError(f"{path}: added token {c!r} has a space, which this kind stores for U+2581")
        id2piece[i] = c
        flags[i] = FLAG_SPECIAL if at.get("special") else FLAG_ADDED | (FLAG_U2581 if U2581 in c else 0)
    n = check_contiguous(path, id2piece)
    if any(i >= len(vocab) and not flags.get(i, 0) & FLAG_SPECIAL for i in range(n)):
        i = next(i for i in range(len(vocab), n) if not flags.get(i, 0) & FLAG_SPECIAL)
        raise ExportError(f"{path}: added token {id2piece[i]!r} (id {i}) is past the model's "
                          f"vocabulary and not special")
    pieces = [id2piece[i].replace(U2581, " ").encode("utf-8") for i in range(n)]
    first = {}
    for i, p in enumerate(pieces):
        if p in first:
            raise ExportError(f"{path}: tokens {first[p]} and {i} are the same text {p!r}")
        first[p] = i
    for b in range(256):
        j = first.get(f"<0x{b:02X}>".encode())
        if j is None or flags.get(j):
            raise ExportError(f"{path}: no <0x{b:02X}> token: byte fallback needs all 256")
    table = rank_merges(path, merges, {p: i for i, p in id2piece.items()}, flags, added_ok=True)
    conf = config_ids(path, data, id2piece, len(vocab))
    if conf["bos"] >= len(vocab):
        raise ExportError(f"{path}: bos token id {conf['bos']} is past the model's vocabulary")
    return dict(pieces=pieces, flags=[flags.get(i, 0) for i in range(n)], merges=table,
                pre=PRE_NONE, normalizer=NORM_NONE, ignore_merges=bool(model.get("ignore_merges")), **conf)
