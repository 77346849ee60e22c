/*
 * bimu_emu_libm.c - linked into the cross-builds for cores without a double-precision FPU (the
 * Cortex-M4's FPv4-SP, a Cortex-M7 with FPv5-SP), where newlib's functions are not those of the host:
 *
 * - expf: newlib builds its float functions for such cores from the older fdlibm code, whose expf
 *   differs from the host C library's in the last bit far more often than the double exp rounded once
 *   to float, which this expf is. Neither is glibc's expf (whose own error reaches 0.502 ulp: it
 *   differs from this one on about one input in 10^4, near rounding midpoints), so over a long stream
 *   the float32 learner's lambda on such a core can drift from the host's by float rounding; the
 *   Cortex-M7 with a double-precision FPU uses newlib's current expf, the algorithm glibc uses, and
 *   computes the host's bits.
 * - fma (double): newlib's software fma computes x * y + z with two roundings, where the learner's
 *   LayerNorm statistics need the single rounding of a fused multiply-add (the host's fma, the M7's
 *   vfma.f64). This fma is correctly rounded: Dekker's exact product, an exact sum, the low part
 *   rounded to odd and one final rounding (Boldo and Melquiond, "Emulation of FMA and correctly rounded
 *   sums: proved algorithms using rounding to odd", IEEE TC 2008), in the soft-float double arithmetic
 *   of libgcc, which rounds correctly. Valid away from overflow and underflow (|x y| and |z| below
 *   2^995, nonzero parts above 2^-969), which the learner's sums of squares of normalised values never
 *   approach; infinities and NaNs take the two-rounding path.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

float expf(float x) { return (float)exp((double)x); }

static void two_sum(double a, double b, double *s, double *e) {
    const double t = a + b;
    const double bb = t - a;
    *s = t;
    *e = (a - (t - bb)) + (b - bb);
}

static void two_product(double a, double b, double *p, double *e) {
    const double split = 134217729.0; /* 2^27 + 1 */
    const double ca = split * a, cb = split * b;
    const double ah = ca - (ca - a), al = a - ah;
    const double bh = cb - (cb - b), bl = b - bh;
    const double t = a * b;
    *p = t;
    *e = ((ah * bh - t) + ah * bl + al * bh) + al * bl;
}

/* a + b rounded to odd: the rounded-to-nearest sum, moved one ulp toward the exact sum when that sum
 * is inexact and the nearest one has an even last bit. */
static double add_round_odd(double a, double b) {
    double s, e;
    uint64_t u;
    two_sum(a, b, &s, &e);
    memcpy(&u, &s, sizeof u);
    if (e != 0.0 && (u & 1u) == 0) {
        /* the neighbour of s toward e: one ulp up in magnitude if e has s's sign, else down */
        if ((e > 0) == (s > 0)) u += 1;
        else u -= 1;
        memcpy(&s, &u, sizeof s);
    }
    return s;
}

double fma(double x, double y, double z) {
    double ph, pl, sh, sl;
    if (!isfinite(x) || !isfinite(y) || !isfinite(z) || x == 0.0 || y == 0.0) return x * y + z;
    two_product(x, y, &ph, &pl);
    two_sum(z, ph, &sh, &sl);
    return sh + add_round_odd(pl, sl);
}
