/* chat_turns.c -- a chat's turns through the tokenizer's chat API (tokenizer/chat.c), for tests/test_chat.py.
 *
 *   build/chat_turns TOKENIZER TEMPLATE [-y SYSTEM] [-D DEFAULT_SYSTEM] [-d DATE] [-c] [-r] USER...
 *
 * The first USER is the first turn (with -y's system prompt; without -y the
 * system prompt is NULL, so -D's default applies), the others later turns
 * (with -c, each after a reply that ended at another token than the
 * template's end of turn).
 * Prints one line per turn: its ids, space-separated, or with -r its
 * rendered text as hex. Every buffer is malloc'd at its exact size (an ASan
 * build catches any access outside it) and the sizes are checked on the way:
 * the text cut short for smaller buffers, the ids refused for one id or one
 * byte of scratch less. Exit 0; 1 when the API refuses a turn ("error: ..."
 * on stdout); 3 when a check fails ("FAIL ..."); 2 for bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tokenizer.h"

static void fail(const char *what, int turn) {
    printf("FAIL turn %d: %s\n", turn, what);
    exit(3);
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    unsigned char *b;
    long sz;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = (unsigned char *)malloc(sz > 0 ? (size_t)sz : 1);
    if (!b || fread(b, 1, (size_t)sz, f) != (size_t)sz) exit(2);
    fclose(f);
    *n = (size_t)sz;
    return b;
}

/* The rendered text, checked against smaller buffers, as hex. */
static void render(const tok_tokenizer *t, const tok_chat_turn *turn, int k) {
    size_t len = tok_chat_render(NULL, 0, t, turn), cap, i;
    char *full = (char *)malloc(len + 1);
    if (!len) fail("rendered nothing", k);
    if (tok_chat_render(full, len + 1, t, turn) != len || full[len] != '\0' || strlen(full) > len) fail("full render", k);
    for (cap = 1; cap <= len; cap += cap < 8 ? 1 : len / 7 + 1) {
        char *part = (char *)malloc(cap);
        if (tok_chat_render(part, cap, t, turn) != len || part[cap - 1] != '\0' || memcmp(part, full, cap - 1))
            fail("a smaller buffer does not hold the text's first bytes", k);
        free(part);
    }
    for (i = 0; i < len; i++) printf("%02x", (unsigned char)full[i]);
    printf("\n");
    free(full);
}

static void encode(tok_tokenizer *t, const tok_chat_turn *turn, int k) {
    size_t ss = tok_chat_scratch_size(t, turn), most = tok_chat_max_ids(t, turn);
    void *scratch = malloc(ss);
    int *ids = (int *)malloc(most * sizeof(int)), n, i;
    if (!ss || !most) fail("no scratch or id bound", k);
    n = tok_chat_encode(t, turn, ids, (int)most, scratch, ss);
    if (n < 0) {
        printf("error: %s\n", tok_error(t));
        free(ids);
        free(scratch);
        exit(1);
    }
    if ((size_t)n > most || n == 0) fail("more ids than tok_chat_max_ids, or none", k);
    {   /* exactly n ids fit; n - 1 and a byte of scratch less do not */
        int *exact = (int *)malloc((size_t)n * sizeof(int)), *fewer = (int *)malloc((size_t)n * sizeof(int));
        void *small = malloc(ss - 1);
        if (tok_chat_encode(t, turn, exact, n, scratch, ss) != n || memcmp(exact, ids, (size_t)n * sizeof(int)))
            fail("exactly n ids", k);
        if (tok_chat_encode(t, turn, fewer, n - 1, scratch, ss) != TOK_ERR_SPACE) fail("n - 1 ids accepted", k);
        if (tok_chat_encode(t, turn, exact, n, small, ss - 1) != TOK_ERR_SPACE) fail("a smaller scratch accepted", k);
        free(exact);
        free(fewer);
        free(small);
    }
    for (i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    free(ids);
    free(scratch);
}

int main(int argc, char **argv) {
    const char *system = NULL, *date = NULL, *dflt = NULL;
    int i, as_text = 0, tmpl, k = 0, close = 0;
    size_t n, need;
    unsigned char *bytes;
    void *arena;
    tok_tokenizer t;
    if (argc < 3) return 2;
    bytes = slurp(argv[1], &n);
    if (!bytes) return 2;
    tmpl = tok_chat_template_id(argv[2]);
    if (tmpl < 0 || strcmp(tok_chat_template_name(tmpl), argv[2])) {
        printf("error: unknown template %s\n", argv[2]);
        return 2;
    }
    need = tok_arena_size(bytes, n, 0);
    arena = malloc(need);
    if (!need || tok_init(&t, bytes, n, 0, arena, need) != TOK_OK) {
        printf("error: %s\n", tok_error(&t));
        free(arena);
        free(bytes);
        return 2;
    }
    for (i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "-y") && i + 1 < argc) system = argv[++i];
        else if (!strcmp(argv[i], "-D") && i + 1 < argc) dflt = argv[++i];
        else if (!strcmp(argv[i], "-d") && i + 1 < argc) date = argv[++i];
        else if (!strcmp(argv[i], "-r")) as_text = 1;
        else if (!strcmp(argv[i], "-c")) close = 1;
        else break;
    }
    if (dflt) {   /* as a tokenizer file that carries a default system prompt sets it */
        t.default_system = dflt;
        t.default_system_len = strlen(dflt);
    }
    if (!as_text && tok_chat_check(&t, tmpl) != TOK_OK) {
        printf("error: %s\n", tok_error(&t));
        free(arena);
        free(bytes);
        return 1;
    }
    printf("end %d\n", tok_chat_end_id(&t, tmpl));
    for (; i < argc; i++, k++) {
        tok_chat_turn turn;
        turn.chat_template = tmpl;
        turn.first = k == 0;
        turn.system = system;
        turn.user = argv[i];
        turn.date = date;
        turn.close_reply = close;
        if (as_text) render(&t, &turn, k);
        else encode(&t, &turn, k);
    }
    free(arena);
    free(bytes);
    return 0;
}
