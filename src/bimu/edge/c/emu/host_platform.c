/*
 * host_platform.c - the platform layer of bimu_bench.c (bimu_emu.h) for a host build: stdout and
 * exit(); the host counts nothing (bimu_emu_ticks() returns 0), it only reproduces the hashes.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bimu_emu.h"

void bimu_emu_puts(const char *s) { fputs(s, stdout); }
void bimu_emu_exit(int code) {
    fflush(stdout);
    exit(code);
}
void bimu_emu_counter_start(void) {}
uint32_t bimu_emu_ticks(void) { return 0; }
