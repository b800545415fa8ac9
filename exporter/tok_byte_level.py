"""Byte-level BPE tokenizer.json (GPT-2, Llama 3, Qwen2, SmolLM2): pieces as raw bytes,
merges, the pre-tokenizer, special tokens and the chat template, as one dict."""
import json
import os

from .common import ExportError, log
from .jsonconf import _cfg_type, _is_count, _json
from .tok_sentencepiece import _vocab_by_id
from .tok_chat import CHAT_CHATML, CHAT_GEMMA, CHAT_LLAMA3, CHAT_LLAMA31, chat_template_of


PRE_GPT2, PRE_LLAMA3, PRE_QWEN2, PRE_SMOLLM = 1, 2, 3, 4
NORM_NONE, NORM_NFC = 0, 1
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


def bytes_to_unicode():
    """GPT-2's map of the 256 byte values to printable characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def is_byte_level(data):
    """Does this tokenizer.json hold a byte-level BPE (a ByteLevel pre-tokenizer or decoder)?"""
    return '"ByteLevel"' in json.dumps([data.get("pre_tokenizer"), data.get("decoder")])


def _pre_tokenizer_id(path, pre):
    """The LTOK pre_tokenizer of tokenizer.json's pre_tokenizer, or ExportError naming it."""
    def bl(p, regex):
        if not (isinstance(p, dict) and p.get("type") == "ByteLevel"):
            return False
        if p.get("add_prefix_space"):
            raise ExportError(f"{path}: ByteLevel add_prefix_space=true is not supported")
        return bool(p.get("use_regex", True)) == regex
    steps = pre.get("pretokenizers") if isinstance(pre, dict) and pre.get("type") == "Sequence" else [pre]
    if not isinstance(steps, list):
        steps = [steps]
    if len(steps) == 1 and bl(steps[0], True):
        return PRE_GPT2
    if len(steps) == 2 and isinstance(steps[0], dict) and bl(steps[1], False) \
            and steps[0].get("type") == "Split" and not steps[0].get("invert", False) \
            and str(steps[0].get("behavior", "")).lower() == "isolated":
        pattern = (steps[0].get("pattern") or {}).get("Regex")
        if pattern == LLAMA3_PATTERN:
            return PRE_LLAMA3
        if pattern == QWEN2_PATTERN:
            return PRE_QWEN2
        raise ExportError(f"{path}: Split pattern {pattern!r:.120} is not one this engine "
                          f"implements (Llama 3's or Qwen2's)")
    if len(steps) == 2 and isinstance(steps[0], dict) and steps[0].get("type") == "Digits" \
            and steps[0].get("individual_digits") and bl(steps[1], True):
        return PRE_SMOLLM
    raise ExportError(f"{path}: pre_tokenizer {json.dumps(pre)[:160]} is not supported (GPT-2's "
                      f"ByteLevel, Llama 3's or Qwen2's Split + ByteLevel, or SmolLM2's Digits + ByteLevel)")


def _config_token(conf, key, where, p2id):
    """tokenizer_config.json's bos_token / eos_token as an id, None when absent/null."""
    x = conf.get(key)
    c = x.get("content") if isinstance(x, dict) else x
    if c is None:
        return None
    if not isinstance(c, str):
        raise ExportError(f"{where}: field {key} = {x!r:.80} must be a string or an object "
                          f"with a string content")
    if c not in p2id:
        raise ExportError(f"{where}: {key} {c!r} is not in the vocabulary")
    return p2id[c]


def _post_processor_bos(post):
    """The special token a TemplateProcessing post-processor puts first, else None."""
    procs = post.get("processors", []) if isinstance(post, dict) and post.get("type") == "Sequence" else [post]
    for p in procs:
        if isinstance(p, dict) and p.get("type") == "TemplateProcessing":
            single = p.get("single") or []
            if single and isinstance(single[0], dict) and "SpecialToken" in single[0]:
                return single[0]["SpecialToken"].get("id")
    return None


def added_tokens(data, path, id2piece):
    """tokenizer.json's added_tokens as (id, content, entry), each with an integer
    id >= 0 and a non-empty content that does not take another piece's id."""
    for at in _cfg_type(data, "added_tokens", path, list, "a list") or []:
        i, c = (at.get("id"), at.get("content")) if isinstance(at, dict) else (None, None)
        if not _is_count(i) or not isinstance(c, str) or not c:
            raise ExportError(f"{path}: added token {at!r:.80} needs an integer id >= 0 "
                              f"and a non-empty string content")
        if i in id2piece and id2piece[i] != c:
            raise ExportError(f"{path}: added token {c!r} reuses id {i} of {id2piece[i]!r}")
        yield i, c, at


def check_contiguous(path, id2piece):
    """The number of ids, which must be 0..n-1 with none missing."""
    n = len(id2piece)
    if sorted(id2piece) != list(range(n)):
        missing = next(i for i in range(n) if i not in id2piece)
        raise ExportError(f"{path}: token ids are not contiguous (id {missing} is missing)")
    return n


def byte_level_tokenizer(path, data):
    """Everything an LTOK file holds, from a byte-level BPE tokenizer.json and the
    tokenizer_config.json / generation_config.json beside it."""
    model = _cfg_type(data, "model", path, dict, "an object") or {}
    if model.get("type", "BPE") != "BPE":
        raise ExportError(f"{path}: model.type {model.get('type')!r} is not supported (BPE only)")
    for k in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(k):
            raise ExportError(f"{path}: model.{k} = {model[k]!r} is not supported")
    if model.get("byte_fallback"):
        raise ExportError(f"{path}: byte_fallback in a byte-level BPE is not supported")
    norm = data.get("normalizer")
    if norm is None:
        normalizer = NORM_NONE
    elif isinstance(norm, dict) and norm.get("type") == "NFC":
        normalizer = NORM_NFC
    else:
        t = norm.get("type") if isinstance(norm, dict) else norm
        raise ExportError(f"{path}: normalizer {t!r} is not supported (none or NFC)")
    pre = _pre_tokenizer_id(path, data.get("pre_tokenizer"))
    vocab, merges = model.get("vocab"), model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list) or not vocab:
        raise ExportError(f"{path}: model.vocab (an object) / model.merges (a list) missing or empty")
    dec = {c: b for b, c in bytes_to_unicode().items()}
    id2piece, flags = _vocab_by_id(vocab, path), {}
    raw = {}
    for i, piece in id2piece.items():
        try:
            raw[i] = bytes(dec[c] for c in piece)
        except KeyError as e:
            raise ExportError(f"{path}: vocab entry {piece!r} (id {i}) has {e.args[0]!r}, "
                              f"not a byte-level character")
    for i, c, at in added_tokens(data, path, id2piece):
        id2piece[i] = c
        raw[i] = c.encode("utf-8")
        flags[i] = 1 if at.get("special") else 2
    n = check_contiguous(path, id2piece)
    pieces = [raw[i] for i in range(n)]
    first = {}
    for i, p in enumerate(pieces):
        if p in first:
            raise ExportError(f"{path}: tokens {first[p]} and {i} are the same bytes {p!r}")
        first[p] = i
    missing = [b for b in range(256) if flags.get(first.get(bytes([b]), -1), 0) or bytes([b]) not in first]
    if missing:
        raise ExportError(f"{path}: no token for the byte 0x{missing[0]:02x}: not a byte-level vocabulary")
    table = rank_merges(path, merges, {p: i for i, p in id2piece.items()}, flags, added_ok=False)
    return dict(pieces=pieces, flags=[flags.get(i, 0) for i in range(n)], merges=table,
                pre=pre, normalizer=normalizer, ignore_merges=bool(model.get("ignore_merges")),
                **config_ids(path, data, id2piece, n))


def rank_merges(path, merges, p2id, flags, added_ok):
    """{(left id, right id): (rank, result id)} of tokenizer.json's merges (strings
    "a b" or [a, b] pairs); a merge may involve a special token never, an added one
    only when added_ok (flags: id -> 1 special, 2 added)."""
    table = {}
    for rank, m in enumerate(merges):
        parts = m.split(" ") if isinstance(m, str) else m
        if not (isinstance(parts, list) and len(parts) == 2 and all(isinstance(x, str) for x in parts)):
            raise ExportError(f"{path}: merge #{rank} {m!r:.80} is not a pair of strings")
        ids = [p2id.get(x) for x in parts] + [p2id.get(parts[0] + parts[1])]
        if None in ids:
            raise ExportError(f"{path}: merge #{rank} {m!r}: {parts[0] + parts[1]!r} or a part "
                              f"of it is not in the vocabulary")
        if any(flags.get(x, 0) & (1 if added_ok else 3) for x in ids):
            raise ExportError(f"{path}: merge #{rank} {m!r} involves {'a special' if added_ok else 'an added'} token")
        table[(ids[0], ids[1])] = (rank, ids[2])   # a repeated pair keeps its last rank, as tokenizers does
    return table


def config_ids(path, data, id2piece, n):
    """BOS, EOS, end of turn, add_bos, the chat template and its default system
    prompt, from tokenizer_config.json / generation_config.json beside path and the
    tokenizer.json's post-processor."""
    folder = os.path.dirname(os.path.abspath(path))
    tc = os.path.join(folder, "tokenizer_config.json")
    conf = _json(tc) if os.path.exists(tc) else {}
    if not conf:
        log(f"warning: no {tc}: no BOS/EOS from it, no chat template")
    piece_ids = {c: i for i, c in id2piece.items()}
    bos = _config_token(conf, "bos_token", tc, piece_ids)
    eos = _config_token(conf, "eos_token", tc, piece_ids)
    gc = os.path.join(folder, "generation_config.json")
    if eos is None and os.path.exists(gc):
        g = _json(gc).get("eos_token_id")
        g = g[0] if isinstance(g, list) and g else g
        if _is_count(g) and g < n:
            eos = g
    post_bos = _post_processor_bos(data.get("post_processor"))
    if "add_bos_token" in conf:
        add_bos = bool(conf["add_bos_token"])
    else:
        add_bos = post_bos is not None
    if add_bos and bos is None:
        bos = piece_ids.get(post_bos)
    if add_bos and bos is None:
        raise ExportError(f"{path}: BOS is added but no bos_token names it")
    template = conf.get("chat_template")
    if isinstance(template, list):   # [{"name": ..., "template": ...}]
        template = next((t.get("template") for t in template
                         if isinstance(t, dict) and t.get("name") == "default"), None)
    if template is not None and not isinstance(template, str):
        raise ExportError(f"{tc}: chat_template must be a string")
    chat, system = chat_template_of(template, tc)
    eot_piece = {CHAT_LLAMA3: "<|eot_id|>", CHAT_LLAMA31: "<|eot_id|>", CHAT_CHATML: "<|im_end|>",
                 CHAT_GEMMA: "<end_of_turn>"}.get(chat)
    eot = piece_ids.get(eot_piece, -1) if eot_piece else -1
    if eot_piece and eot < 0:
        log(f"warning: {path}: no {eot_piece} token: no end-of-turn id")
    return dict(add_bos=add_bos, bos=-1 if bos is None else bos, eos=-1 if eos is None else eos,
                eot=eot, chat=chat, system=(system or "").encode("utf-8"))
