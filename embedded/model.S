/* model.S -- the checkpoint and the tokenizer as const data, read in place.
 *
 * Contract: EMB_CKPT_FILE and EMB_TOK_FILE (quoted paths, -D on the command
 * line) are copied byte for byte into the section .model, each 64-byte
 * aligned; the linker script puts .model in flash (code memory or QSPI),
 * never in RAM. main.c sees them as emb_ckpt..emb_ckpt_end, emb_tok..emb_tok_end.
 */
    .section .model, "a", %progbits
    .balign 64
    .global emb_ckpt, emb_ckpt_end, emb_tok, emb_tok_end
emb_ckpt:
    .incbin EMB_CKPT_FILE
emb_ckpt_end:
    .balign 64
emb_tok:
    .incbin EMB_TOK_FILE
emb_tok_end:
