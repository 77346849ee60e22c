/*
 * bimu_infer.c - reference bit-packed Monte-Carlo inference for an exported BiMU network.
 *
 * Generated next to bimu_model.h by `bimu export RUN_DIR --format c-header`. Plain C99, no
 * allocation, no floating point except the input quantisation and the LayerNorm/RBG test; the
 * same sampler and arithmetic as bimu.edge.packed, so votes equal Python's for the same seed.
 *
 *   weight w = +1  iff  r < t   (t: uint32 threshold of P(w = +1) = sigmoid(2 lambda); r: uint32
 *   from a SplitMix64 stream keyed by (seed, sample, layer), bit-sliced over 64 weights, MSB first)
 *
 * Build a command-line checker:  cc -O2 -DBIMU_MAIN bimu_infer.c -o bimu_infer -lm
 * Usage: bimu_infer SEED N_SAMPLES [SAMPLE_OFFSET [PER_EXAMPLE]] < inputs.txt
 *   inputs.txt: one example per line, BIMU_IN real numbers; prints one line of N_SAMPLES votes
 *   (the predicted class of each MC sample) per example.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bimu_model.h"

#define BIMU_GOLDEN 0x9E3779B97F4A7C15ULL
#define BIMU_MIX1 0xBF58476D1CE4E5B9ULL
#define BIMU_MIX2 0x94D049BB133111EBULL
#define BIMU_SEED_SALT 0x5EEDB1A5EDB1A5EDULL

static uint64_t bimu_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * BIMU_MIX1;
    z = (z ^ (z >> 27)) * BIMU_MIX2;
    return z ^ (z >> 31);
}

static uint64_t bimu_stream_key(uint64_t seed, uint64_t sample, uint64_t layer) {
    uint64_t s = bimu_mix64(seed ^ BIMU_SEED_SALT);
    uint64_t c = sample * 64u + layer + 1u;
    return bimu_mix64(s + c * BIMU_GOLDEN);
}

static int64_t bimu_popcount64(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return (int64_t)__builtin_popcountll(x);
#else
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
    return (int64_t)((x * 0x0101010101010101ULL) >> 56);
#endif
}

/* One hard sample of a layer: bits[o * n_words + w], bit i = 1 iff weight (o, 64 w + i) is +1. */
static void bimu_sample_layer(const uint64_t *planes, int n_out, int n_words, uint64_t valid_last,
                              uint64_t key, uint64_t *bits) {
    for (int o = 0; o < n_out; o++) {
        for (int w = 0; w < n_words; w++) {
            uint64_t ctr = (uint64_t)(o * n_words + w) * 32u;
            const uint64_t *t = planes + ((size_t)o * n_words + w) * 32u;
            uint64_t eq = (w == n_words - 1) ? valid_last : ~0ULL;
            uint64_t lt = 0;
            for (int j = 0; j < 32 && eq; j++) {
                uint64_t r = bimu_mix64(key + (ctr + (uint64_t)j + 1u) * BIMU_GOLDEN);
                lt |= eq & ~r & t[j];
                eq &= ~(r ^ t[j]);
            }
            bits[o * n_words + w] = lt;
        }
    }
}

/* Quantise one example: x_q = clip(rint(x / 2^e), -qmax, qmax) (round half to even). */
void bimu_quantize(const double *x, int32_t *xq) {
    const double qmax = (double)((1 << (BIMU_INPUT_BITS - 1)) - 1);
    for (int i = 0; i < BIMU_IN; i++) {
        double q = nearbyint(ldexp(x[i], -(BIMU_INPUT_EXPONENT)));
        if (q > qmax) q = qmax;
        if (q < -qmax) q = -qmax;
        xq[i] = (int32_t)q;
    }
}

/* Integer output pre-activations of MC sample `sample` for one quantised example. */
void bimu_logits(const int32_t *xq, uint64_t seed, uint64_t sample, int64_t *out) {
    static uint64_t wbits[BIMU_MAX_LAYER_WORDS];
    static uint64_t x_planes[BIMU_INPUT_BITS * BIMU_IN_WORDS];
    static uint64_t act[BIMU_MAX_ACT_WORDS];
    static int64_t pre[BIMU_MAX_WIDTH];
    int64_t x_sum = 0, act_pop = 0;
    const uint64_t mask = (1ULL << BIMU_INPUT_BITS) - 1u;

    for (int i = 0; i < BIMU_INPUT_BITS * BIMU_IN_WORDS; i++) x_planes[i] = 0;
    for (int i = 0; i < BIMU_IN; i++) {
        uint64_t u = (uint64_t)(int64_t)xq[i] & mask;
        x_sum += xq[i];
        for (int p = 0; p < BIMU_INPUT_BITS; p++)
            x_planes[p * BIMU_IN_WORDS + (i >> 6)] |= ((u >> p) & 1u) << (i & 63);
    }
    for (int l = 0; l < BIMU_N_LAYERS; l++) {
        const int n_in = bimu_sizes[l], n_out = bimu_sizes[l + 1];
        const int n_words = (n_in + 63) / 64;
        bimu_sample_layer(bimu_planes[l], n_out, n_words, bimu_valid_last[l],
                          bimu_stream_key(seed, sample, (uint64_t)l), wbits);
        for (int o = 0; o < n_out; o++) {
            const uint64_t *wb = wbits + (size_t)o * n_words;
            int64_t acc = 0;
            if (l == 0) {
                int64_t s_plus = 0;
                for (int p = 0; p < BIMU_INPUT_BITS; p++) {
                    int64_t c = 0;
                    for (int w = 0; w < n_words; w++) c += bimu_popcount64(x_planes[p * BIMU_IN_WORDS + w] & wb[w]);
                    s_plus += (p == BIMU_INPUT_BITS - 1 ? -(1LL << p) : (1LL << p)) * c;
                }
                pre[o] = 2 * s_plus - x_sum;
            } else if (BIMU_ACT_SIGN) {
                for (int w = 0; w < n_words; w++) acc += bimu_popcount64(act[w] ^ wb[w]);
                pre[o] = (int64_t)n_in - 2 * acc;
            } else {
                for (int w = 0; w < n_words; w++) acc += bimu_popcount64(act[w] & wb[w]);
                pre[o] = 2 * acc - act_pop;
            }
        }
        if (l == BIMU_N_LAYERS - 1) {
            for (int c = 0; c < n_out; c++) out[c] = pre[c];
            break;
        }
        /* LayerNorm (no affine) + RBG / sign, decided exactly on integers (see packed.py) */
        int64_t s = 0, q = 0;
        for (int o = 0; o < n_out; o++) { s += pre[o]; q += pre[o] * pre[o]; }
        const int64_t n = n_out;
        const int64_t var_n2 = n * q - s * s;
        volatile double prod = bimu_gate_a2 * (double)var_n2; /* volatile: no FMA contraction */
        const double rhs = prod + bimu_c_eps[l];
        for (int w = 0; w < (n_out + 63) / 64; w++) act[w] = 0;
        act_pop = 0;
        for (int o = 0; o < n_out; o++) {
            const int64_t d = n * pre[o] - s;
            int on;
            if (BIMU_ACT_SIGN) on = d >= 0;
            else if (bimu_gate_a2 == 1.0) on = (double)(d * d - var_n2) > bimu_c_eps[l];
            else on = (double)(d * d) > rhs;
            if (on) { act[o >> 6] |= 1ULL << (o & 63); act_pop++; }
        }
    }
}

/* The vote of one sample: the first class with the largest output. */
int bimu_vote(const int64_t *logits) {
    int best = 0;
    for (int c = 1; c < BIMU_OUT; c++)
        if (logits[c] > logits[best]) best = c;
    return best;
}

/* votes[k] = vote of MC sample sample_offset + k; returns the modal class (lowest on ties). */
int bimu_predict(const int32_t *xq, uint64_t seed, uint64_t sample_offset, int n_samples, int *votes) {
    int64_t logits[BIMU_OUT];
    int counts[BIMU_OUT] = {0};
    for (int k = 0; k < n_samples; k++) {
        bimu_logits(xq, seed, sample_offset + (uint64_t)k, logits);
        votes[k] = bimu_vote(logits);
        counts[votes[k]]++;
    }
    int mode = 0;
    for (int c = 1; c < BIMU_OUT; c++)
        if (counts[c] > counts[mode]) mode = c;
    return mode;
}

#ifdef BIMU_MAIN
int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s SEED N_SAMPLES [SAMPLE_OFFSET [PER_EXAMPLE]] < inputs\n", argv[0]);
        return 2;
    }
    const uint64_t seed = strtoull(argv[1], NULL, 10);
    const int n_samples = atoi(argv[2]);
    const uint64_t offset = argc > 3 ? strtoull(argv[3], NULL, 10) : 0;
    const int per_example = argc > 4 ? atoi(argv[4]) : 0;
    if (n_samples < 1) { fprintf(stderr, "N_SAMPLES must be >= 1\n"); return 2; }
    static double x[BIMU_IN];
    static int32_t xq[BIMU_IN];
    int *votes = (int *)malloc(sizeof(int) * (size_t)n_samples);
    if (!votes) return 1;
    for (uint64_t b = 0;; b++) {
        for (int i = 0; i < BIMU_IN; i++) {
            if (scanf("%lf", &x[i]) != 1) {
                if (i == 0) { free(votes); return 0; }
                fprintf(stderr, "example %llu: expected %d numbers\n", (unsigned long long)b, BIMU_IN);
                free(votes);
                return 1;
            }
        }
        bimu_quantize(x, xq);
        bimu_predict(xq, seed, offset + (per_example ? b * (uint64_t)n_samples : 0), n_samples, votes);
        for (int k = 0; k < n_samples; k++) printf(k ? " %d" : "%d", votes[k]);
        printf("\n");
    }
}
#endif
