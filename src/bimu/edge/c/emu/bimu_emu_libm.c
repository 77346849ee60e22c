/*
 * bimu_emu_libm.c - linked into the cross-builds for cores without a double-precision FPU (the
 * Cortex-M4's FPv4-SP): newlib builds its float functions for such cores from the older fdlibm
 * code, whose expf is not correctly rounded and differs from the host C library's in the last bit.
 * This expf is the double exp rounded once to float (newlib's double exp errs by less than one
 * double ulp), so it is the correctly rounded expf except where exp(x) lies within a double ulp of
 * a float rounding boundary, as the host's is: the float32 learners then compute the host's bits.
 */
#include <math.h>

float expf(float x) { return (float)exp((double)x); }
