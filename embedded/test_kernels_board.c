/* test_kernels_board.c -- tests/test_kernels.c on the Cortex-M boards under
 * QEMU, so that the boards' own kernels (engine/mcu.h: the DSP's and
 * Helium's tiles, the activation rounding) meet their scalar twins on the
 * tests' awkward shapes, not only on stories260K's.
 *
 * Contract: tests/test_kernels.c is compiled with -Dmain=test_kernels_main
 * and linked with this file, startup.c and newlib's semihosting library
 * (librdimon: stdio and the model file through the host); EMB_TEST_MODELS
 * names the host's models folder. The heap is the linker script's HEAP
 * region past everything else (common.ld's __heap_start .. __heap_end);
 * nothing else here allocates.
 */
#include "board.h"

#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern char __heap_start[], __heap_end[];
void initialise_monitor_handles(void);
int test_kernels_main(int argc, char **argv);

/* newlib's malloc grows the heap here (librdimon's own _sbrk, weak, expects
 * the stack above the heap, and the boards keep it below RAM's data) */
void *_sbrk(ptrdiff_t incr) {
    static char *brk = __heap_start;
    if (incr < 0 || incr > __heap_end - brk) {
        errno = ENOMEM;
        return (void *)-1;
    }
    char *old = brk;
    brk += incr;
    return old;
}

/* newlib's nano library has memalign but not posix_memalign */
int posix_memalign(void **p, size_t align, size_t n) {
    void *q = memalign(align, n);
    if (!q) return ENOMEM;
    *p = q;
    return 0;
}

int main(void) {
    static char name[] = "test_kernels", models[] = EMB_TEST_MODELS;
    char *argv[] = { name, models, NULL };
    initialise_monitor_handles();
    int status = test_kernels_main(2, argv);
    printf("board %s: stack used %u of %u bytes\n", emb_board_name, (unsigned)emb_stack_used(), (unsigned)emb_stack_size());
    fflush(stdout);
    return status;
}
