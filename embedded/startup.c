/* startup.c -- vector table, reset handler, faults and semihosting for the
 * Cortex-M boards of QEMU (mps2-an386: Cortex-M4F; mps3-an547: Cortex-M55).
 *
 * Contract: reset turns the FPU on, copies .data from its load address, zeroes
 * .bss, paints the stack region with a pattern (so emb_stack_used() can read
 * the high-water mark after the run) and arms a stack guard -- MSPLIM on
 * Armv8-M, an MPU no-access region of 64 KiB below the stack, which starts
 * RAM, on Armv7-M -- so an overflow is a fault with a message, never silent
 * corruption or a lock-up.
 * Every fault prints one "error: ..." line on stderr and exits with status 70.
 * Symbols come from the linker script (common.ld).
 */
#include "board.h"

#include <stdint.h>
#include <string.h>

#if defined(__ARM_ARCH_8M_MAIN__) || defined(__ARM_ARCH_8_1M_MAIN__)
#define EMB_V8M 1
#else
#define EMB_V8M 0
#endif

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[];
extern uint32_t __stack_bottom[], __stack_top[];

int main(void);

#define EMB_PAINT 0xC5A5A5C5u
#define EMB_GUARD 0x10000u             /* bytes of MPU guard below the stack (Armv7-M) */
#define REG(addr) (*(volatile uint32_t *)(addr))

/* --------------------------------------------------------------------- */
/* Semihosting                                                            */
/* --------------------------------------------------------------------- */

enum { SYS_OPEN = 0x01, SYS_WRITE = 0x05, SYS_EXIT = 0x18, SYS_EXIT_EXTENDED = 0x20 };
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u

static uintptr_t semihost(uintptr_t op, const void *arg) {
    register uintptr_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static intptr_t handles[3] = { -1, -1, -1 };

/* ":tt" opened "w" is the host's stdout, opened "a" its stderr. */
static intptr_t handle(int fd) {
    if (handles[fd] < 0) {
        uintptr_t args[3] = { (uintptr_t)":tt", fd == EMB_STDOUT ? 4u : 8u, 3 };
        handles[fd] = (intptr_t)semihost(SYS_OPEN, args);
    }
    return handles[fd];
}

void emb_write(int fd, const char *buf, size_t n) {
    if (n == 0 || (fd != EMB_STDOUT && fd != EMB_STDERR)) return;
    uintptr_t args[3] = { (uintptr_t)handle(fd), (uintptr_t)buf, n };
    semihost(SYS_WRITE, args);
}

void emb_exit(int status) {
    uintptr_t args[2] = { ADP_STOPPED_APPLICATION_EXIT, (uintptr_t)status };
    semihost(SYS_EXIT_EXTENDED, args);
    semihost(SYS_EXIT, (const void *)(uintptr_t)ADP_STOPPED_APPLICATION_EXIT);  /* no extended exit */
    for (;;) {}
}

/* --------------------------------------------------------------------- */
/* Stack                                                                  */
/* --------------------------------------------------------------------- */

size_t emb_stack_size(void) { return (size_t)((uintptr_t)__stack_top - (uintptr_t)__stack_bottom); }

size_t emb_stack_used(void) {
    const uint32_t *p = __stack_bottom;
    while (p < __stack_top && *p == EMB_PAINT) p++;
    return (size_t)((uintptr_t)__stack_top - (uintptr_t)p);
}

static void arm_stack_guard(void) {
#if EMB_V8M
    __asm__ volatile("msr msplim, %0" : : "r"(__stack_bottom));
#else
    /* MPU region 0: the EMB_GUARD bytes below the stack (which starts RAM, 64 KiB
     * aligned): no access, never executed; everything else keeps the default map
     * for privileged code (PRIVDEFENA). */
    REG(0xE000ED98) = 0;                                      /* MPU_RNR */
    REG(0xE000ED9C) = (uint32_t)(uintptr_t)__stack_bottom - EMB_GUARD; /* MPU_RBAR */
    REG(0xE000EDA0) = (1u << 28) | (0u << 24) | (15u << 1) | 1u; /* MPU_RASR: XN, AP none, 2^(15+1) bytes, on */
    REG(0xE000ED94) = (1u << 2) | 1u;                         /* MPU_CTRL: PRIVDEFENA | ENABLE */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
    REG(0xE000ED24) |= (1u << 16) | (1u << 17) | (1u << 18);   /* SHCSR: MemManage, BusFault, UsageFault on */
}

/* --------------------------------------------------------------------- */
/* Reset and faults                                                       */
/* --------------------------------------------------------------------- */

void reset_handler(void) __attribute__((noreturn));
void reset_handler(void) {
    REG(0xE000ED88) |= 0xFu << 20;     /* CPACR: CP10, CP11 full access (the FPU) */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    for (uint32_t *s = __data_load, *d = __data_start; d < __data_end;) *d++ = *s++;
    for (uint32_t *d = __bss_start; d < __bss_end;) *d++ = 0;
    uint32_t *sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    for (uint32_t *p = __stack_bottom; p < sp - 32; p++) *p = EMB_PAINT;   /* 128 bytes below sp spared */
    arm_stack_guard();
    emb_exit(main());
}

static void put_hex(char *out, uint32_t v) {
    for (int i = 0; i < 8; i++) out[i] = "0123456789abcdef"[(v >> (28 - 4 * i)) & 0xF];
}

void fault_report(void) __attribute__((noreturn, used));
void fault_report(void) {
    uint32_t cfsr = REG(0xE000ED28), hfsr = REG(0xE000ED2C), mmfar = REG(0xE000ED34);
    uint32_t ipsr;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    char msg[] = "error: fault (exception xxxxxxxx, CFSR xxxxxxxx, HFSR xxxxxxxx, MMFAR xxxxxxxx)\n";
    put_hex(msg + 24, ipsr & 0x1ff);
    put_hex(msg + 39, cfsr);
    put_hex(msg + 54, hfsr);
    put_hex(msg + 70, mmfar);
    emb_write(EMB_STDERR, msg, sizeof msg - 1);
    int overflow = (cfsr & (1u << 20)) /* STKOF */ || (cfsr & (1u << 4)) /* MSTKERR */ ||
                   ((cfsr & (1u << 7)) && mmfar < (uint32_t)(uintptr_t)__stack_bottom &&
                    mmfar >= (uint32_t)(uintptr_t)__stack_bottom - EMB_GUARD);
    if (overflow) {
        static const char so[] = "error: stack overflow: the stack budget (EMB_STACK in embedded/embedded.mk) is too small\n";
        emb_write(EMB_STDERR, so, sizeof so - 1);
    }
    emb_exit(70);
}

/* The faulting stack may be the guard itself: take the top of the (dead)
 * main stack before anything is pushed. */
void fault_handler(void) __attribute__((naked));
void fault_handler(void) {
    __asm__ volatile(
#if EMB_V8M
        "movs r0, #0\n\t"
        "msr msplim, r0\n\t"
#endif
        "ldr r0, =__stack_top\n\t"
        "mov sp, r0\n\t"
        "b fault_report\n\t"
        ".ltorg");
}

typedef void (*vector)(void);
__attribute__((section(".vectors"), used)) const vector emb_vectors[16] = {
    (vector)(uintptr_t)__stack_top,    /* initial MSP */
    reset_handler,
    fault_handler,                     /* NMI */
    fault_handler,                     /* HardFault */
    fault_handler,                     /* MemManage */
    fault_handler,                     /* BusFault */
    fault_handler,                     /* UsageFault */
    fault_handler,                     /* SecureFault (Armv8-M) */
    0, 0, 0,
    fault_handler,                     /* SVCall: never enabled */
    fault_handler,                     /* DebugMonitor: never enabled */
    0,
    fault_handler,                     /* PendSV: never enabled */
    fault_handler,                     /* SysTick: never enabled */
};

#ifdef EMB_BOARD
const char emb_board_name[] = EMB_BOARD;
#else
const char emb_board_name[] = "cortex-m";
#endif
