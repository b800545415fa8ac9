"""Chat template detection: which built-in template (and default system text) a
tokenizer_config.json's chat_template is."""
import re

from .common import ExportError, log


CHAT_LLAMA2, CHAT_LLAMA3, CHAT_CHATML, CHAT_LLAMA31, CHAT_GEMMA = 0, 1, 2, 3, 4
CHAT_NAMES = {CHAT_LLAMA2: "llama2", CHAT_LLAMA3: "llama3", CHAT_CHATML: "chatml", CHAT_LLAMA31: "llama3.1",
              CHAT_GEMMA: "gemma"}


def _jinja_unescape(s):
    return s.replace("\\n", "\n").replace("\\'", "'").replace('\\"', '"')


def chat_template_of(template, where):
    """(LTOK chat template id, default system prompt or None) from a jinja string."""
    if template is None:
        log(f"warning: {where}: no chat_template; -m chat uses Llama 2's [INST] format")
        return CHAT_LLAMA2, None
    if "<|start_header_id|>" in template:
        # Llama 3.1 and 3.2 open every conversation with a dated system block
        kind = CHAT_LLAMA31 if "Cutting Knowledge Date" in template else CHAT_LLAMA3
    elif "<|im_start|>" in template:
        kind = CHAT_CHATML
    elif "<start_of_turn>" in template:
        kind = CHAT_GEMMA
    elif "[INST]" in template:
        kind = CHAT_LLAMA2
    else:
        raise ExportError(f"{where}: chat_template is none of Llama 2's, Llama 3's, ChatML or Gemma's "
                          f"(no [INST], <|start_header_id|>, <|im_start|> or <start_of_turn> in it)")
    system = None
    if kind == CHAT_CHATML:
        # a literal system turn, used when the conversation has none:
        # '<|im_start|>system\n...<|im_end|>' with no quote, brace or + inside
        m = re.search(r"<\|im_start\|>system(?:\\n|\n)([^'\"{}+]*?)<\|im_end\|>", template)
        if m:
            system = _jinja_unescape(m.group(1))
    elif kind in (CHAT_LLAMA3, CHAT_LLAMA31) and "system" in template:
        log(f"warning: {where}: the Llama 3 template's default system text (if any) is not "
            f"a literal; none recorded")
    return kind, system
