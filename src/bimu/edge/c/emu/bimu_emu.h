/*
 * bimu_emu.h - the platform layer of the benchmark program bimu_bench.c: console output, exit status
 * and the instruction counter. Bare metal (mps2_startup.c): semihosting and SysTick under QEMU's
 * -icount shift=0 (40 instructions per tick); on the host (BIMU_EMU_HOST): stdio and no counter.
 */
#ifndef BIMU_EMU_H
#define BIMU_EMU_H

#include <stdint.h>

#define BIMU_EMU_INSTRUCTIONS_PER_TICK 40u /* 1 ns per instruction, 25 MHz SysTick */

void bimu_emu_puts(const char *s);
#if defined(__GNUC__)
__attribute__((noreturn))
#endif
void bimu_emu_exit(int code);
void bimu_emu_counter_start(void);
uint32_t bimu_emu_ticks(void);

#endif /* BIMU_EMU_H */
