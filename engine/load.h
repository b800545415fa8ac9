/* engine/load.h -- llm_load: the file's magic picks the reader (LLMW, ak42,
 * GGUF, else llama2.c legacy); llm_model_size asks the same readers for the
 * model arena's size. After the readers, so nothing here is declared ahead. */

int llm_load(llm_model *m, const void *bytes, size_t n_bytes, void *arena, size_t arena_size) {
    const unsigned char *b = (const unsigned char *)bytes;
    memset(m, 0, sizeof *m);
    if (!b) return llm__fail(m, LLM_ERR_ARG, "no checkpoint bytes given");
    if ((uintptr_t)b % 4 != 0) return llm__fail(m, LLM_ERR_ARG, "checkpoint bytes must be 4-byte aligned in memory");
    if (n_bytes >= 4 && memcmp(b, LLM_MAGIC, 4) == 0) return llm__load_llmw(m, b, n_bytes, arena, arena_size);
    if (n_bytes >= 4 && llm__u32(b) == 0x616b3432u) return llm__load_ak42(m, b, n_bytes, arena, arena_size);
    if (n_bytes >= 4 && memcmp(b, "GGUF", 4) == 0) return llm__load_gguf(m, b, n_bytes, arena, arena_size);
    return llm__load_legacy(m, b, n_bytes, arena, arena_size);
}

/* The arena is the last thing a loader checks: a file that gets as far as
 * asking for it is one llm_load accepts. */
size_t llm_model_size(const void *bytes, size_t n_bytes) {
    llm_model m;
    if (llm_load(&m, bytes, n_bytes, NULL, 0) != LLM_ERR_ARENA) return 0;
    uint64_t need = llm__model_bytes(&m.cfg);
    return need > (uint64_t)SIZE_MAX ? 0 : (size_t)need;
}
