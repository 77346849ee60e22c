/*
 * bimu_calibrate.c - checks the instruction counter of mps2_startup.c: times a loop of exactly
 * 2 x BIMU_CALIBRATE_ITERATIONS instructions (subs + bne) and an empty measurement, and prints
 *     CALIBRATE ticks TICKS overhead TICKS
 * (bimu.edge.emulate.calibrate expects ticks - overhead = instructions / 40 to within one tick).
 */
#include <stdint.h>

#include "bimu_emu.h"

#ifndef BIMU_CALIBRATE_ITERATIONS
#define BIMU_CALIBRATE_ITERATIONS 250000
#endif

static void put_u32(uint32_t v) {
    char b[12];
    int i = 11;
    b[i] = 0;
    do {
        b[--i] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    bimu_emu_puts(b + i);
}

int main(void) {
    uint32_t n = BIMU_CALIBRATE_ITERATIONS, empty, loop;
    bimu_emu_counter_start();
    empty = bimu_emu_ticks();
    bimu_emu_counter_start();
    __asm__ volatile("1: subs %0, %0, #1\n\tbne 1b" : "+r"(n) : : "cc");
    loop = bimu_emu_ticks();
    bimu_emu_puts("CALIBRATE ticks ");
    put_u32(loop);
    bimu_emu_puts(" overhead ");
    put_u32(empty);
    bimu_emu_puts("\n");
    return 0;
}
