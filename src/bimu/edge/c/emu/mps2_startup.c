/*
 * mps2_startup.c - bare-metal start-up, instruction counter and console of the emulated benchmarks
 * (bimu.edge.emulate) on QEMU's mps2-an386 (Cortex-M4) and mps2-an500 (Cortex-M7) boards.
 *
 * Reset: enable the FPU (CPACR), zero .bss, run main(), report its return value to QEMU through the
 * semihosting SYS_EXIT_EXTENDED call. Output: semihosting SYS_WRITE0 (QEMU runs with
 * -semihosting-config enable=on,target=native). No C library start-up code and no stdio.
 *
 * Counting: with `-icount shift=0` QEMU advances virtual time by 1 ns per executed instruction, and
 * SysTick, clocked by the 25 MHz system clock (CLKSOURCE = 1), then decrements once every 40
 * instructions. bimu_emu_ticks() returns the ticks elapsed since bimu_emu_counter_start(), so a
 * measurement is 40 x ticks instructions to within 40 - INSTRUCTIONS, not cycles: QEMU models no
 * pipeline, caches or wait states. The 24-bit counter wraps after 2^24 ticks (671 million
 * instructions): SysTick runs freely from reset and a measurement must stay below that.
 */
#include <stdint.h>

#include "bimu_emu.h"

extern uint32_t __bss_start__[], __bss_end__[], __stack_top__[];
int main(void);
void bimu_reset_handler(void);

static void bimu_fault_handler(void) {
    bimu_emu_puts("BIMU_EMU fault\n");
    bimu_emu_exit(3);
}

__attribute__((section(".vectors"), used)) static void (*const bimu_vectors[16])(void) = {
    (void (*)(void))__stack_top__, bimu_reset_handler, bimu_fault_handler, bimu_fault_handler,
    bimu_fault_handler, bimu_fault_handler, bimu_fault_handler, 0, 0, 0, 0, bimu_fault_handler,
    bimu_fault_handler, 0, bimu_fault_handler, bimu_fault_handler,
};

#define SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)
#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)

static int32_t bimu_semihost(int32_t op, const void *arg) {
    register int32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void bimu_emu_puts(const char *s) { bimu_semihost(0x04, s); /* SYS_WRITE0 */ }

void bimu_emu_exit(int code) {
    uint32_t block[2] = {0x20026u, (uint32_t)code}; /* ADP_Stopped_ApplicationExit, status */
    for (;;) bimu_semihost(0x20, block);            /* SYS_EXIT_EXTENDED */
}

static uint32_t bimu_tick_start;

void bimu_emu_counter_start(void) { bimu_tick_start = SYST_CVR; }

uint32_t bimu_emu_ticks(void) { return (bimu_tick_start - SYST_CVR) & 0x00FFFFFFu; }

__attribute__((noreturn)) void bimu_reset_handler(void) {
#if defined(__ARM_FP)
    SCB_CPACR |= 0xFu << 20; /* CP10, CP11: full access */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
    for (uint32_t *p = __bss_start__; p < __bss_end__; p++) *p = 0;
    SYST_RVR = 0x00FFFFFFu;
    SYST_CVR = 0; /* any write clears it: the counter reloads 0xFFFFFF on the next tick */
    SYST_CSR = 5; /* ENABLE, CLKSOURCE = processor clock, no interrupt: free-running */
    bimu_emu_exit(main());
}
