/* fuzz_chat.c -- tok_render_chat and tok_chat_render, the chat templates.
 *
 * Input: the system prompt, a NUL, then the user's turn (up to the next
 * NUL); without a NUL the whole input is the user's turn and there is no
 * system prompt. Invariants: the Llama 2 rendering equals llama2.c's
 * snprintf formats; for every buffer size (each malloc'd at exactly that
 * size) the length returned is the full one and the buffer holds its
 * NUL-terminated prefix; an unknown template renders nothing and returns 0;
 * every template's first and later turns render the same text into buffers
 * of every size, and contain the user's text, trimmed where the template trims.
 */
#include "tokenizer.h"
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama2.c's text for one turn, malloc'd. */
static char *llama2_reference(const char *system, const char *user) {
    const char *with = "[INST] <<SYS>>\n%s\n<</SYS>>\n\n%s [/INST]", *without = "[INST] %s [/INST]";
    int has_system = system && system[0];
    int len = has_system ? snprintf(NULL, 0, with, system, user) : snprintf(NULL, 0, without, user);
    char *out = (char *)malloc((size_t)len + 1);
    if (len < 0 || !out) fuzz_fail("cannot build the reference text");
    if (has_system) snprintf(out, (size_t)len + 1, with, system, user);
    else snprintf(out, (size_t)len + 1, without, user);
    return out;
}

/* Render into a buffer of exactly cap bytes: full length back, prefix in the buffer. */
static void check_cap(size_t cap, const char *system, const char *user, const char *want, size_t want_len) {
    char *out = cap ? (char *)malloc(cap) : NULL;
    size_t len = tok_render_chat(out, cap, TOK_CHAT_LLAMA2, system, user);
    if (len != want_len) fuzz_fail("buffer of %zu: returned %zu, the text is %zu bytes", cap, len, want_len);
    if (cap) {
        size_t kept = want_len < cap ? want_len : cap - 1;
        if (memcmp(out, want, kept) || out[kept] != '\0')
            fuzz_fail("buffer of %zu: not the text's NUL-terminated first %zu bytes", cap, kept);
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *input = (char *)malloc(size + 1);
    char out[4] = "xyz";
    if (!input) fuzz_fail("out of memory");
    memcpy(input, data, size);
    input[size] = '\0';
    size_t sys_len = strlen(input);
    const char *system = sys_len < size ? input : NULL;
    const char *user = system ? input + sys_len + 1 : input;

    char *want = llama2_reference(system, user);
    size_t want_len = strlen(want);
    size_t caps[] = { 0, 1, 2, want_len / 2, want_len, want_len + 1, want_len + 2 };
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) check_cap(caps[i], system, user, want, want_len);
    if (tok_render_chat(out, sizeof out, -1, system, user) != 0 || out[0] != '\0' ||
        tok_render_chat(out, sizeof out, TOK_CHAT_LLAMA2 + 1000, system, user) != 0 || out[0] != '\0')
        fuzz_fail("an unknown template rendered something");
    for (int tmpl = 0; tmpl < TOK_CHAT_COUNT; tmpl++)
        for (int kind = 0; kind < 3; kind++) {   /* a first turn, a later one, a later one that closes the reply */
            int first = kind == 0;
            tok_chat_turn turn = { tmpl, first, system, user, NULL, kind == 2 };
            size_t len = tok_chat_render(NULL, 0, NULL, &turn);
            char *full = (char *)malloc(len + 1);
            if (!len || !full || tok_chat_render(full, len + 1, NULL, &turn) != len || full[len])
                fuzz_fail("template %d (first %d): no full rendering", tmpl, first);
            size_t sizes[] = { 1, 2, len / 2 + 1, len };
            for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
                char *part = (char *)malloc(sizes[i]);
                if (!part || tok_chat_render(part, sizes[i], NULL, &turn) != len || part[sizes[i] - 1] ||
                    memcmp(part, full, sizes[i] - 1))
                    fuzz_fail("template %d (first %d): a buffer of %zu is not the text's prefix", tmpl, first, sizes[i]);
                free(part);
            }
            /* the user's text from its first to its last byte that is neither
             * whitespace nor non-ASCII (which may be Unicode whitespace) is in the turn */
            size_t a = 0, b = strlen(user);
#define FUZZ_BLANK(c) ((c) == ' ' || ((c) >= 9 && (c) <= 13) || ((c) >= 0x1c && (c) <= 0x1f) || (c) >= 0x80)
            while (a < b && FUZZ_BLANK((unsigned char)user[a])) a++;
            while (b > a && FUZZ_BLANK((unsigned char)user[b - 1])) b--;
            int found = a == b;
            for (size_t i = 0; !found && i + (b - a) <= len; i++) found = !memcmp(full + i, user + a, b - a);
            if (!found) fuzz_fail("template %d (first %d): the user's text is missing", tmpl, first);
            free(full);
        }
    fuzz_note("rendered %zu bytes (%s system prompt)", want_len, system && system[0] ? "with a" : "no");
    free(want);
    free(input);
    return 0;
}
