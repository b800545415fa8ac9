/* board.h -- what startup.c gives main.c on a bare-metal Cortex-M under QEMU.
 *
 * Contract: startup.c owns the vector table, the reset handler (FPU on, .data
 * copied, .bss zeroed, stack painted, stack guard armed) and the fault
 * handlers; output and exit go through Arm semihosting (QEMU's
 * -semihosting-config enable=on,target=native). No heap: malloc is never linked.
 */
#ifndef EMB_BOARD_H
#define EMB_BOARD_H

#include <stddef.h>

enum { EMB_STDOUT = 1, EMB_STDERR = 2 };

/* Write n bytes to the host's stdout or stderr. */
void emb_write(int fd, const char *buf, size_t n);
/* End the program: QEMU exits with this status (SYS_EXIT_EXTENDED). */
void emb_exit(int status) __attribute__((noreturn));
/* Bytes of the stack region ever written since reset (the painted words
 * that changed), and the region's size (the linker script's budget). */
size_t emb_stack_used(void);
size_t emb_stack_size(void);
/* The board's name, for messages. */
extern const char emb_board_name[];

#endif
