/*
 * bimu_learn.c - the C99 learner declared in bimu_learn.h (read its top comment first).
 *
 * Every formula follows a kernel of bimu.engine, named beside it, in the same order of operations:
 * relaxed samples and the BiMU / BayesBiNN steps of bimu.engine.rowpass and fastpath.row_step, the
 * forward and backward passes of fastpath._train_steps_b1_template (binary_ops), dot products in
 * dots.dot8's order (eight partial sums, then the tail), hard samples from the threshold planes of
 * bimu.engine.planes and the query forward of bimu.engine.query, scores of bimu.engine.scores.
 * BIMU_FMA marks the operations that the engine's kernels contract to a fused multiply-add; the
 * LayerNorm statistics are double, as the engine computes them in every precision.
 */
#include "bimu_learn.h"

#include <math.h>
#include <string.h>

#ifdef BIMU_DOUBLE
#define BIMU_FMA_FN fma
#define BIMU_EXPR exp
#else
#define BIMU_FMA_FN fmaf
#define BIMU_EXPR expf
#endif
#ifdef BIMU_NO_FMA
#define BIMU_FMA(a, b, c) ((a) * (b) + (c))
#define BIMU_FMAD(a, b, c) ((a) * (b) + (c))
#else
#define BIMU_FMA(a, b, c) BIMU_FMA_FN((a), (b), (c))
#define BIMU_FMAD(a, b, c) fma((a), (b), (c))
#endif

#define BIMU_GOLDEN 0x9E3779B97F4A7C15ULL
#define BIMU_QUERY_SALT 0x51E7C0DEA5E1EC75ULL
#define BIMU_TOP 8388608 /* 2^23: thresholds T lie in [0, 2^23] */
#define BIMU_PLANES 24

static const int bimu_sizes[BIMU_N_LAYERS + 1] = BIMU_SIZES;

/* ------------------------------------------------------------------ random numbers (bimu.rng) */
uint64_t bimu_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

uint64_t bimu_hash64(uint64_t key, uint64_t n) { return bimu_mix64(key + n * BIMU_GOLDEN); }

uint64_t bimu_derive_key(uint64_t seed, uint64_t stream) {
    uint64_t z = bimu_mix64(seed * BIMU_GOLDEN + 0x632BE59BD9B4E019ULL);
    return bimu_mix64(z + stream * 0xD1B54A32D192ED03ULL);
}

uint32_t bimu_hash32(uint32_t rlo, uint32_t rhi, uint32_t idx) {
    uint32_t x = idx * 0x9E3779B9u + rlo;
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x ^= rhi;
    x *= 0x846CA68Bu;
    return x ^ (x >> 16);
}

void bimu_row_key(uint64_t key, uint64_t step, uint64_t P, uint64_t e0, uint32_t *rlo, uint32_t *rhi) {
    uint64_t r = bimu_hash64(key, step * P + e0);
    *rlo = (uint32_t)(r & 0xFFFFFFFFu);
    *rhi = (uint32_t)(r >> 32);
}

bimu_real bimu_uniform32(uint32_t x) {
    return (bimu_real)(int32_t)(x >> 9) * (bimu_real)(1.0 / 8388608.0) + (bimu_real)(1.0 / 16777216.0);
}

/* exp(x) for x <= 0: libm in double; in float the engine's vectorisable polynomial
 * (bimu.engine.scalar.fexp, contracted as the engine's kernels compile it). */
static inline bimu_real bimu_fexp(bimu_real x) {
#ifdef BIMU_DOUBLE
    return exp(x);
#else
    union { int32_t i; float f; } sc;
    float nf, r, p;
    x = x > -87.0f ? x : -87.0f;
    nf = BIMU_FMA(x, (float)1.4426950408889634, 12582912.0f) - 12582912.0f;
    r = BIMU_FMA(-nf, (float)1.428606765330187e-06, BIMU_FMA(-nf, 0.693145751953125f, x));
    p = (float)(1.0 / 5040.0);
    p = BIMU_FMA(p, r, (float)(1.0 / 720.0));
    p = BIMU_FMA(p, r, (float)(1.0 / 120.0));
    p = BIMU_FMA(p, r, (float)(1.0 / 24.0));
    p = BIMU_FMA(p, r, (float)(1.0 / 6.0));
    p = BIMU_FMA(p, r, 0.5f);
    p = BIMU_FMA(p, r, 1.0f);
    p = BIMU_FMA(p, r, 1.0f);
    sc.i = ((int32_t)nf + 127) * (int32_t)8388608;
    return p * sc.f;
#endif
}

/* b = exp(-2 |lambda|): the one exponential per parameter of every sampling formula. */
static bimu_real bimu_b(bimu_real lo) { return bimu_fexp((bimu_real)-2 * (lo < 0 ? -lo : lo)); }

/* b of parameter e: stored beside lambda (BIMU_STORE_PLANES), else computed from it (the same bits). */
static bimu_real bimu_b_at(const bimu_learner *L, uint64_t e) {
#if BIMU_STORE_PLANES
    return L->bq[e];
#else
    return bimu_b(L->lam[e]);
#endif
}

#if BIMU_STORE_PLANES
static void bimu_row_sync(bimu_learner *L, int l, int o); /* b and planes of one row, from lambda */
#endif

/* ------------------------------------------------------------------ layout helpers */
static uint64_t bimu_poff(int l) { /* first parameter of layer l */
    uint64_t p = 0;
    for (int j = 0; j < l; j++) p += (uint64_t)bimu_sizes[j] * (uint64_t)bimu_sizes[j + 1];
    return p;
}

static int bimu_hoff(int l) { /* first unit of layer l's activations (K samples each) */
    int h = 0;
    for (int j = 0; j < l; j++) h += BIMU_K * bimu_sizes[j + 1];
    return h;
}

/* ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)): dot8's lane sum. */
static bimu_real bimu_lanes(const bimu_real *s) {
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

/* dot8(w, x, n): eight partial sums, their lane sum, then the last n mod 8 products in turn. */
static bimu_real bimu_dot8(const bimu_real *w, const bimu_real *x, int n) {
    bimu_real s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const int nb = n & ~7;
    int i;
    bimu_real t;
    for (i = 0; i < nb; i++) s[i & 7] = s[i & 7] + w[i] * x[i];
    t = bimu_lanes(s);
    for (; i < n; i++) t = t + w[i] * x[i];
    return t;
}

/* ------------------------------------------------------------------ relaxed samples (T = 1) */
/* tanh(lam + 0.5 logit u) = (u (1 + b) - p) / (p + u q), p = b, q = 1 - b (lam >= 0), else p = 1,
 * q = b - 1 (bimu.engine.sampling.relaxed_row; rowpass sample_row). */
static bimu_real bimu_relaxed(bimu_real lo, bimu_real b, bimu_real u) {
    const bimu_real one = 1;
    const bimu_real pp = lo >= 0 ? b : one;
    const bimu_real qq = lo >= 0 ? one - b : b - one;
    const bimu_real ob = one + b;
    return BIMU_FMA(u, ob, -pp) / BIMU_FMA(u, qq, pp);
}

void bimu_relaxed_row(const bimu_learner *L, int l, int o, uint64_t step, int k, bimu_real *w) {
    const int n = bimu_sizes[l];
    const uint64_t e0 = bimu_poff(l) + (uint64_t)o * (uint64_t)n;
    const bimu_real *lr = L->lam + e0;
    uint32_t rlo, rhi;
    bimu_row_key(L->train_key, step, BIMU_N_PARAMS, e0, &rlo, &rhi);
    for (int i = 0; i < n; i++)
        w[i] = bimu_relaxed(lr[i], bimu_b_at(L, e0 + (uint64_t)i),
                            bimu_uniform32(bimu_hash32(rlo, rhi, (uint32_t)i * (uint32_t)BIMU_K + (uint32_t)k)));
}

/* The K samples of row o of upper layer l (l >= 1) at step `step` into L->wrow[k * n_in + i]. */
static void bimu_upper_row(bimu_learner *L, int l, int o, uint64_t step) {
    const int n = bimu_sizes[l];
    for (int k = 0; k < BIMU_K; k++) bimu_relaxed_row(L, l, o, step, k, L->wrow + k * n);
}

/* ------------------------------------------------------------------ the update rules */
/* bimu.engine.binary_ops.bimu_lambda_step (one division; b = exp(-2 |lambda|)), contracted as the
 * engine's compiled kernels contract it (checked bit for bit against its float64 kernels): the
 * numerator fuses its prior term, the denominator's inner sum fuses tt g in the first layer's row
 * pass (`first` = 1) and |g| (1 + b)^2 in the upper layers' row_step. */
static bimu_real bimu_bimu_step(bimu_real lo, bimu_real g, bimu_real b, const bimu_hparams *hp, int first) {
    const bimu_real one = 1, four = 4;
    const bimu_real d1 = one + b;
    const bimu_real d2 = d1 * d1;
    const bimu_real fb = four * b;
    bimu_real tt = (one - b) * d1;
    bimu_real num, den;
    const bimu_real ag = g < 0 ? -g : g;
    tt = lo >= 0 ? tt : -tt;
    if (first) {
        num = BIMU_FMA(hp->c4 * (lo - hp->c5), fb, (hp->c0 * g) * d2);
        den = BIMU_FMA(hp->c3, d2, BIMU_FMA(hp->c2, fb, hp->c1 * BIMU_FMA(tt, g, ag * d2)));
    } else {
        num = BIMU_FMA(hp->c4 * (lo - hp->c5), fb, (hp->c0 * g) * d2);
        den = BIMU_FMA(hp->c3, d2, BIMU_FMA(hp->c2, fb, hp->c1 * BIMU_FMA(ag, d2, tt * g)));
    }
    return lo - num / den;
}

#if BIMU_BAYESBINN
/* bimu.engine.binary_ops.bayesbinn_lambda_step. */
static bimu_real bimu_bayesbinn_step(bimu_real lo, bimu_real g, bimu_real b, const bimu_hparams *hp, bimu_real p) {
    const bimu_real one = 1;
    bimu_real q;
    if (hp->c1 == 0) {
        const bimu_real d1 = one + b;
        q = (g * (d1 * d1)) / ((bimu_real)4 * b);
    } else {
        const bimu_real t = (one - b) / (one + b);
        q = g / (BIMU_FMA(-t, t, one) + hp->c1);
    }
    return BIMU_FMA(-hp->c4, lo - p, BIMU_FMA(-hp->c0, q, lo));
}
#endif

static void bimu_update(bimu_learner *L, uint64_t e, bimu_real g) {
    const bimu_real lo = L->lam[e];
#if BIMU_BAYESBINN
    L->lam[e] = bimu_bayesbinn_step(lo, g, bimu_b_at(L, e), &L->hp, L->prior[e]);
#else
    L->lam[e] = bimu_bimu_step(lo, g, bimu_b_at(L, e), &L->hp, 0);
#endif
}

/* One term of dL/dlambda: (c x) (1 - w^2) (+ ratio_eps for BayesBiNN), accumulated as the kernels do. */
static bimu_real bimu_grad_term(bimu_real g, bimu_real cx, bimu_real w, const bimu_hparams *hp) {
    bimu_real t = BIMU_FMA(-w, w, (bimu_real)1);
#if BIMU_BAYESBINN
    t = t + hp->c1;
#else
    (void)hp;
#endif
    return BIMU_FMA(cx, t, g);
}

/* ------------------------------------------------------------------ LayerNorm and activations */
/* binary_ops.layer_norm_act (statistics in double; `contract`: the training kernels' FMA). */
static void bimu_ln_act(const bimu_real *z, bimu_real *xh, bimu_real *a, double *r_out, int n, double eps,
                        double gate, int hidden, int contract) {
    double s = 0.0, v = 0.0, mu, r;
    for (int o = 0; o < n; o++) s += (double)z[o];
    mu = s / n;
    for (int o = 0; o < n; o++) {
        const double d = (double)z[o] - mu;
        v = contract ? BIMU_FMAD(d, d, v) : v + d * d;
    }
    v = v / n;
    r = 1.0 / sqrt(v + eps);
    *r_out = r;
    for (int o = 0; o < n; o++) {
        const double x = ((double)z[o] - mu) * r;
        xh[o] = (bimu_real)x;
        if (!hidden) a[o] = (bimu_real)x;
#if BIMU_ACT_GATE
        else a[o] = fabs(x) > gate ? (bimu_real)1 : (bimu_real)0;
#else
        else a[o] = x >= 0 ? (bimu_real)1 : (bimu_real)-1;
#endif
    }
    (void)gate;
}

/* binary_ops.ln_backward: dz = r (g - mean(g) - xh mean(g xh)), g = da. */
static void bimu_ln_backward(const bimu_real *da, const bimu_real *xh, bimu_real *dz, double r, int n) {
    double s1 = 0.0, s2 = 0.0;
    for (int i = 0; i < n; i++) {
        s1 += (double)da[i];
#ifdef BIMU_DOUBLE
        s2 = BIMU_FMAD(da[i], xh[i], s2);
#else
        s2 += (double)(da[i] * xh[i]);
#endif
    }
    s1 /= n;
    s2 /= n;
    for (int i = 0; i < n; i++) dz[i] = (bimu_real)(r * BIMU_FMAD(-(double)xh[i], s2, (double)da[i] - s1));
}

/* binary_ops.act_grad: the RBG's surrogate derivative, or the hard-tanh estimator of sign. */
static bimu_real bimu_act_grad(bimu_real x, bimu_real gate) {
#if BIMU_ACT_GATE
    const bimu_real lo = (bimu_real)(0.5 * (double)gate), hi = (bimu_real)(1.5 * (double)gate);
    if (lo < x && x < hi) return 1;
    if (-hi < x && x < -lo) return -1;
    return 0;
#else
    (void)gate;
    return (x < 0 ? -x : x) <= 1 ? (bimu_real)1 : (bimu_real)0;
#endif
}

/* ------------------------------------------------------------------ one training step */
int bimu_learn(bimu_learner *L, const bimu_real *x, int y) {
    const uint64_t s = L->train_step;
    const int D = bimu_sizes[0], n0 = bimu_sizes[1], C = bimu_sizes[BIMU_N_LAYERS];
    const int nb = D & ~7;
    const bimu_hparams hp = L->hp; /* a local copy: the stores to lambda cannot alias it */
    const double eps = (double)hp.ln_eps, gate = (double)hp.gate;
    const uint32_t K = BIMU_K;
    int nonzero = 0;

    /* ---- forward, first layer: the K samples of each row regenerated and summed in dot8's order */
    for (int o = 0; o < n0; o++) {
        const bimu_real *lr = L->lam + (uint64_t)o * (uint64_t)D;
        bimu_real acc[BIMU_K][8], tot[BIMU_K];
        uint32_t rlo, rhi;
        int i;
        const uint64_t e0 = (uint64_t)o * (uint64_t)D;
#if BIMU_KEEP_SAMPLES
        bimu_real *keep = L->w0 + e0 * K;
#endif
        bimu_row_key(L->train_key, s, BIMU_N_PARAMS, e0, &rlo, &rhi);
        for (uint32_t k = 0; k < K; k++)
            for (int j = 0; j < 8; j++) acc[k][j] = 0;
        /* eight weights a step, so that the partial sums acc[k][j] stay in registers */
#if BIMU_KEEP_SAMPLES
#define BIMU_KEEP_W(ij, k, w) keep[(uint32_t)(ij) * K + (k)] = (w)
#else
#define BIMU_KEEP_W(ij, k, w) (void)0
#endif
#define BIMU_FWD(j)                                                                                      \
    do {                                                                                                 \
        const int ij = i + (j);                                                                          \
        const bimu_real b = bimu_b_at(L, e0 + (uint64_t)ij);                                             \
        for (uint32_t k = 0; k < K; k++) {                                                               \
            const bimu_real w =                                                                          \
                bimu_relaxed(lr[ij], b, bimu_uniform32(bimu_hash32(rlo, rhi, (uint32_t)ij * K + k)));   \
            BIMU_KEEP_W(ij, k, w);                                                                       \
            acc[k][j] = acc[k][j] + w * x[ij];                                                           \
        }                                                                                                \
    } while (0)
        for (i = 0; i < nb; i += 8) {
            BIMU_FWD(0); BIMU_FWD(1); BIMU_FWD(2); BIMU_FWD(3);
            BIMU_FWD(4); BIMU_FWD(5); BIMU_FWD(6); BIMU_FWD(7);
        }
#undef BIMU_FWD
        for (uint32_t k = 0; k < K; k++) tot[k] = bimu_lanes(acc[k]);
        for (; i < D; i++) {
            const bimu_real b = bimu_b_at(L, e0 + (uint64_t)i);
            for (uint32_t k = 0; k < K; k++) {
                const bimu_real w = bimu_relaxed(lr[i], b, bimu_uniform32(bimu_hash32(rlo, rhi, (uint32_t)i * K + k)));
                BIMU_KEEP_W(i, k, w);
                tot[k] = tot[k] + w * x[i];
            }
        }
#undef BIMU_KEEP_W
        for (uint32_t k = 0; k < K; k++) L->z[k * n0 + o] = tot[k];
    }
    /* ---- forward through the layers (fastpath._train_steps_b1_template) */
    for (int l = 0; l < BIMU_N_LAYERS; l++) {
        const int n_in = bimu_sizes[l], n_out = bimu_sizes[l + 1];
        const int h = bimu_hoff(l), hp_ = l > 0 ? bimu_hoff(l - 1) : 0;
        const int hidden = l < BIMU_N_LAYERS - 1;
        if (l > 0) {
            for (int o = 0; o < n_out; o++) {
                bimu_upper_row(L, l, o, s);
                for (int k = 0; k < BIMU_K; k++)
                    L->z[h + k * n_out + o] = bimu_dot8(L->wrow + k * n_in, L->a + hp_ + k * n_in, n_in);
            }
        }
        for (int k = 0; k < BIMU_K; k++) {
            const int base = h + k * n_out;
            if (hidden || BIMU_OUTPUT_NORM) {
                bimu_ln_act(L->z + base, L->xh + base, L->a + base, L->rs + l * BIMU_K + k, n_out, eps, gate,
                            hidden, 1);
            } else {
                for (int o = 0; o < n_out; o++) L->a[base + o] = L->xh[base + o] = L->z[base + o];
            }
        }
    }
    /* ---- loss gradient (binary_ops.loss_backward): (softmax - onehot(y)) / K, then the output norm */
    {
        const int h = bimu_hoff(BIMU_N_LAYERS - 1);
        for (int k = 0; k < BIMU_K; k++) {
            const int base = h + k * C;
            const bimu_real *al = L->a + base;
            bimu_real mx = al[0];
            double ssum = 0.0;
            for (int c = 1; c < C; c++) mx = al[c] > mx ? al[c] : mx;
            for (int c = 0; c < C; c++) ssum += (double)BIMU_EXPR(al[c] - mx);
            for (int c = 0; c < C; c++) {
                const double pr = (double)BIMU_EXPR(al[c] - mx) / ssum;
                L->da[k * C + c] = (bimu_real)((pr - (c == y ? 1.0 : 0.0)) / BIMU_K);
            }
#if BIMU_OUTPUT_NORM
            bimu_ln_backward(L->da + k * C, L->xh + base, L->dz + base, L->rs[(BIMU_N_LAYERS - 1) * BIMU_K + k], C);
#else
            for (int c = 0; c < C; c++) L->dz[base + c] = L->da[k * C + c];
#endif
        }
    }
    /* ---- back through the hidden layers (binary_ops.hidden_backward) */
    for (int l = BIMU_N_LAYERS - 1; l > 0; l--) {
        const int n_in = bimu_sizes[l], n_out = bimu_sizes[l + 1];
        const int h = bimu_hoff(l), hin = bimu_hoff(l - 1);
        for (int t = 0; t < BIMU_K * n_in; t++) L->da[t] = 0;
        for (int o = 0; o < n_out; o++) {
            bimu_upper_row(L, l, o, s);
            for (int k = 0; k < BIMU_K; k++) {
                const bimu_real cz = L->dz[h + k * n_out + o];
                bimu_real *da = L->da + k * n_in;
                const bimu_real *w = L->wrow + k * n_in;
                for (int i = 0; i < n_in; i++) da[i] = BIMU_FMA(cz, w[i], da[i]);
            }
        }
        for (int k = 0; k < BIMU_K; k++) {
            bimu_real *da = L->da + k * n_in;
            const int base = hin + k * n_in;
            for (int i = 0; i < n_in; i++) da[i] *= bimu_act_grad(L->xh[base + i], hp.gate);
            bimu_ln_backward(da, L->xh + base, L->dz + base, L->rs[(l - 1) * BIMU_K + k], n_in);
        }
    }
    /* ---- gradients of the upper layers (fastpath.row_step); is the whole gradient zero? */
    for (int l = 1; l < BIMU_N_LAYERS; l++) {
        const int n_in = bimu_sizes[l], n_out = bimu_sizes[l + 1];
        const int h = bimu_hoff(l), hin = bimu_hoff(l - 1);
        const uint64_t g0 = bimu_poff(l) - bimu_poff(1);
        for (int o = 0; o < n_out; o++) {
            bimu_real *g = L->g_upper + g0 + (uint64_t)o * (uint64_t)n_in;
            bimu_upper_row(L, l, o, s);
            for (int i = 0; i < n_in; i++) g[i] = 0;
            for (int k = 0; k < BIMU_K; k++) {
                const bimu_real ck = L->dz[h + k * n_out + o];
                const bimu_real *xa = L->a + hin + k * n_in;
                const bimu_real *w = L->wrow + k * n_in;
                for (int i = 0; i < n_in; i++) g[i] = bimu_grad_term(g[i], ck * xa[i], w[i], &hp);
            }
            for (int i = 0; i < n_in && !nonzero; i++) nonzero = g[i] != 0;
        }
    }
    if (!nonzero) { /* decided by the first layer's gradient, row by row */
        int anyc = 0;
        for (int t = 0; t < BIMU_K * n0; t++) anyc |= L->dz[t] != 0;
        for (int o = 0; anyc && o < n0 && !nonzero; o++) {
#if !BIMU_KEEP_SAMPLES
            const bimu_real *lr = L->lam + (uint64_t)o * (uint64_t)D;
            uint32_t rlo, rhi;
            bimu_row_key(L->train_key, s, BIMU_N_PARAMS, (uint64_t)o * (uint64_t)D, &rlo, &rhi);
#endif
            for (int i = 0; i < D && !nonzero; i++) {
                const uint64_t e = (uint64_t)o * (uint64_t)D + (uint64_t)i;
                bimu_real g = 0;
#if !BIMU_KEEP_SAMPLES
                const bimu_real b = bimu_b_at(L, e);
#endif
                for (uint32_t k = 0; k < K; k++) {
#if BIMU_KEEP_SAMPLES
                    const bimu_real w = L->w0[e * K + k];
#else
                    const bimu_real w = bimu_relaxed(lr[i], b, bimu_uniform32(bimu_hash32(rlo, rhi, (uint32_t)i * K + k)));
#endif
                    g = bimu_grad_term(g, L->dz[k * n0 + o] * x[i], w, &hp);
                }
                nonzero = g != 0;
            }
        }
    }
    /* ---- the update: upper layers, then the first layer (its samples regenerated once more) */
    if (nonzero) {
        for (int l = 1; l < BIMU_N_LAYERS; l++) {
            const uint64_t e0 = bimu_poff(l), n = (uint64_t)bimu_sizes[l] * (uint64_t)bimu_sizes[l + 1];
            const uint64_t g0 = e0 - bimu_poff(1);
            for (uint64_t e = 0; e < n; e++) bimu_update(L, e0 + e, L->g_upper[g0 + e]);
#if BIMU_STORE_PLANES
            for (int o = 0; o < bimu_sizes[l + 1]; o++) bimu_row_sync(L, l, o);
#endif
        }
        for (int o = 0; o < n0; o++) {
            const uint64_t e0 = (uint64_t)o * (uint64_t)D;
            uint32_t rlo, rhi;
            bimu_real c[BIMU_K];
            bimu_row_key(L->train_key, s, BIMU_N_PARAMS, e0, &rlo, &rhi);
            for (uint32_t k = 0; k < K; k++) c[k] = L->dz[k * n0 + o];
            for (int i = 0; i < D; i++) {
                const bimu_real lo = L->lam[e0 + i];
                const bimu_real b = bimu_b_at(L, e0 + (uint64_t)i);
                bimu_real g = 0;
                for (uint32_t k = 0; k < K; k++) {
#if BIMU_KEEP_SAMPLES
                    const bimu_real w = L->w0[(e0 + (uint64_t)i) * K + k];
#else
                    const bimu_real w = bimu_relaxed(lo, b, bimu_uniform32(bimu_hash32(rlo, rhi, (uint32_t)i * K + k)));
#endif
                    g = bimu_grad_term(g, c[k] * x[i], w, &hp);
                }
#if BIMU_BAYESBINN
                L->lam[e0 + i] = bimu_bayesbinn_step(lo, g, b, &hp, L->prior[e0 + i]);
#else
                L->lam[e0 + i] = bimu_bimu_step(lo, g, b, &hp, 1);
#endif
            }
#if BIMU_STORE_PLANES
            bimu_row_sync(L, 0, o);
#endif
        }
    }
    L->train_step = s + 1;
    L->examples_seen += 1;
    L->updates_applied += 1;
    L->last_applied = nonzero;
    return nonzero;
}

/* ------------------------------------------------------------------ hard samples (bimu.engine.planes) */
/* The hard-sample test u (1 + b) < thr of the 23-bit integer m (planes._passes). */
static inline int bimu_passes(int32_t m, bimu_real ob, bimu_real thr) {
    const bimu_real u = (bimu_real)(2 * m + 1) * (bimu_real)(1.0 / 16777216.0);
    return u * ob < thr;
}

/* T of a parameter whose b = exp(-2 |lam|) is known. m passes iff m + 1/2 < r = 2^23 thr / (1 + b)
 * (exactly: (2 m + 1) 2^-24 (1 + b) < thr), so T = ceil(r - 1/2): the guess rounds r to the nearest
 * integer, and the two loops, which evaluate the test exactly as the engine does, move it to the first
 * m that fails (usually one test each way). */
static inline int32_t bimu_threshold_b(bimu_real lam, bimu_real b) {
    const bimu_real one = 1;
    const bimu_real thr = lam >= 0 ? one : b;
    const bimu_real ob = one + b;
    const bimu_real q = thr / ob * (bimu_real)BIMU_TOP + (bimu_real)0.5;
    int32_t t = q > 0 ? (q < (bimu_real)BIMU_TOP ? (int32_t)q : BIMU_TOP) : 0;
    while (t > 0 && !bimu_passes(t - 1, ob, thr)) t--;
    while (t < BIMU_TOP && bimu_passes(t, ob, thr)) t++;
    return t;
}

int32_t bimu_threshold(bimu_real lam) { return bimu_threshold_b(lam, bimu_b(lam)); }

/* One block swap of the transpose: bits of a[i] under ~m <-> bits of a[k] under m << j. */
#define BIMU_SWAP(i, k, j, m)                                  \
    do {                                                       \
        const uint32_t x_ = (a[i] ^ (a[k] >> (j))) & (m);     \
        a[i] ^= x_;                                            \
        a[k] ^= x_ << (j);                                     \
    } while (0)

/* The 24 planes tp[0..23] of one word from a[31 - i] = T of lane i (0 in unused lanes): bit i of tp[j]
 * is bit 23 - j of lane i's T. A 32 x 32 bit transpose in place (five rounds of block swaps, Hacker's
 * Delight 7-3), unrolled so that every shift and mask is a constant; rows 0-7 (bits 24-31 of T, always
 * 0) are not finished, which drops 12 of the 80 swaps. */
#define BIMU_SW4(b, j, m) BIMU_SWAP(b, b + j, j, m); BIMU_SWAP(b + 1, b + 1 + j, j, m); \
    BIMU_SWAP(b + 2, b + 2 + j, j, m); BIMU_SWAP(b + 3, b + 3 + j, j, m)
static void bimu_transpose_planes(uint32_t *a, uint32_t *tp) {
    BIMU_SW4(0, 16, 0x0000FFFFu); BIMU_SW4(4, 16, 0x0000FFFFu);
    BIMU_SW4(8, 16, 0x0000FFFFu); BIMU_SW4(12, 16, 0x0000FFFFu);
    BIMU_SW4(0, 8, 0x00FF00FFu); BIMU_SW4(4, 8, 0x00FF00FFu);
    BIMU_SW4(16, 8, 0x00FF00FFu); BIMU_SW4(20, 8, 0x00FF00FFu);
    BIMU_SW4(8, 4, 0x0F0F0F0Fu); BIMU_SW4(16, 4, 0x0F0F0F0Fu); BIMU_SW4(24, 4, 0x0F0F0F0Fu);
    BIMU_SWAP(8, 10, 2, 0x33333333u); BIMU_SWAP(9, 11, 2, 0x33333333u);
    BIMU_SWAP(12, 14, 2, 0x33333333u); BIMU_SWAP(13, 15, 2, 0x33333333u);
    BIMU_SWAP(16, 18, 2, 0x33333333u); BIMU_SWAP(17, 19, 2, 0x33333333u);
    BIMU_SWAP(20, 22, 2, 0x33333333u); BIMU_SWAP(21, 23, 2, 0x33333333u);
    BIMU_SWAP(24, 26, 2, 0x33333333u); BIMU_SWAP(25, 27, 2, 0x33333333u);
    BIMU_SWAP(28, 30, 2, 0x33333333u); BIMU_SWAP(29, 31, 2, 0x33333333u);
    /* the last round writes the planes: tp[j] = a[8 + j] */
#define BIMU_OUT(i)                                                  \
    do {                                                             \
        const uint32_t x_ = (a[i] ^ (a[i + 1] >> 1)) & 0x55555555u;  \
        tp[(i) - 8] = a[i] ^ x_;                                     \
        tp[(i) - 7] = a[i + 1] ^ (x_ << 1);                          \
    } while (0)
    BIMU_OUT(8); BIMU_OUT(10); BIMU_OUT(12); BIMU_OUT(14); BIMU_OUT(16); BIMU_OUT(18);
    BIMU_OUT(20); BIMU_OUT(22); BIMU_OUT(24); BIMU_OUT(26); BIMU_OUT(28); BIMU_OUT(30);
#undef BIMU_OUT
}
#undef BIMU_SW4
#undef BIMU_SWAP

/* The 24 planes of one word (n <= 32 lanes) from lambda. */
static void bimu_word_planes(const bimu_real *lam, int n, uint32_t *tp) {
    uint32_t a[32];
    int i;
    for (i = 0; i < n; i++) a[31 - i] = (uint32_t)bimu_threshold(lam[i]);
    for (; i < 32; i++) a[31 - i] = 0;
    bimu_transpose_planes(a, tp);
}


/* ------------------------------------------------------------------ stored b and planes */
#if BIMU_STORE_PLANES
static int bimu_row_words(int n) { return (n + 31) / 32; }

/* The first plane word of row o of layer l (rows of every layer one after another). */
static uint64_t bimu_plane_off(int l, int o) {
    uint64_t w = 0;
    for (int j = 0; j < l; j++) w += (uint64_t)bimu_sizes[j + 1] * (uint64_t)bimu_row_words(bimu_sizes[j]);
    return w + (uint64_t)o * (uint64_t)bimu_row_words(bimu_sizes[l]);
}

static void bimu_row_sync(bimu_learner *L, int l, int o) {
    const int n = bimu_sizes[l];
    const uint64_t e0 = bimu_poff(l) + (uint64_t)o * (uint64_t)n;
    uint32_t *tp = L->planes + bimu_plane_off(l, o) * BIMU_PLANES;
    for (int w = 0; 32 * w < n; w++) { /* b and T of each lane, then the word's planes */
        const int m = n - 32 * w < 32 ? n - 32 * w : 32;
        const bimu_real *lam = L->lam + e0 + 32 * w;
        bimu_real *bq = L->bq + e0 + 32 * w;
        uint32_t a[32];
        int i;
        for (i = 0; i < m; i++) {
            const bimu_real b = bimu_b(lam[i]);
            bq[i] = b;
            a[31 - i] = (uint32_t)bimu_threshold_b(lam[i], b);
        }
        for (; i < 32; i++) a[31 - i] = 0;
        bimu_transpose_planes(a, tp + w * BIMU_PLANES);
    }
}
#endif

void bimu_sync(bimu_learner *L) {
#if BIMU_STORE_PLANES
    for (int l = 0; l < BIMU_N_LAYERS; l++)
        for (int o = 0; o < bimu_sizes[l + 1]; o++) bimu_row_sync(L, l, o);
#else
    (void)L;
#endif
}

/* Word w of a row's hard sample from its planes (planes._sample_lanes): lane i of plane j's random
 * bit is bit i of hash32(row key, 24 w + j); m < T is decided from the top plane down. */
static uint32_t bimu_draw_word(const uint32_t *tp, uint32_t valid, uint32_t rlo, uint32_t rhi, uint32_t w) {
    uint32_t lt = valid & tp[0], eq = valid & ~tp[0];
    for (uint32_t j = 1; j < BIMU_PLANES && eq; j++) {
        const uint32_t r = bimu_hash32(rlo, rhi, 24u * w + j);
        lt |= eq & ~r & tp[j];
        eq &= ~(r ^ tp[j]);
    }
    return lt;
}

void bimu_sample_row_bits(const bimu_real *lam, int n, uint32_t rlo, uint32_t rhi, uint32_t *bits) {
    uint32_t tp[BIMU_PLANES];
    for (int w = 0; 32 * w < n; w++) {
        const int m = n - 32 * w < 32 ? n - 32 * w : 32;
        bimu_word_planes(lam + 32 * w, m, tp);
        bits[w] = bimu_draw_word(tp, m == 32 ? 0xFFFFFFFFu : ((1u << m) - 1u), rlo, rhi, (uint32_t)w);
    }
}

/* ------------------------------------------------------------------ query forward (bimu.engine.query) */
#if !BIMU_QUERY_DOT8
/* Index of the lowest set bit of v != 0. */
static int bimu_ctz(uint32_t v) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctz(v);
#else
    int n = 0;
    while (!(v & 1u)) { v >>= 1; n++; }
    return n;
#endif
}
#endif

void bimu_logits(bimu_learner *L, const bimu_real *x, uint64_t key, int K, bimu_real *logits) {
    const uint64_t ukey = bimu_mix64(key ^ BIMU_QUERY_SALT);
    const double eps = (double)L->hp.ln_eps, gate = (double)L->hp.gate;
    const int C = bimu_sizes[BIMU_N_LAYERS];
    uint64_t g = 0; /* rows numbered across layers */
    uint64_t e_l = 0;
    double rs;
    for (int l = 0; l < BIMU_N_LAYERS; l++) {
        const int n_in = bimu_sizes[l], n_out = bimu_sizes[l + 1];
        const int hidden = l < BIMU_N_LAYERS - 1;
#if BIMU_QUERY_DOT8
        const int nb = n_in & ~7;
#else
        bimu_real total[BIMU_QUERY_K]; /* sum of each sample's layer input: x . w = 2 (sum over +1) - total */
        for (int k = 0; k < K; k++) { /* the first layer's input is the same for every sample */
            const bimu_real *src = l == 0 ? x : L->q_cur + k * n_in;
            bimu_real t = 0;
            if (l == 0 && k > 0) {
                total[k] = total[0];
                continue;
            }
            for (int i = 0; i < n_in; i++) t = t + src[i];
            total[k] = t;
        }
#endif
        for (int o = 0; o < n_out; o++) {
            uint32_t rlo[BIMU_QUERY_K], rhi[BIMU_QUERY_K];
#if BIMU_STORE_PLANES
            const uint32_t *row_planes = L->planes + bimu_plane_off(l, o) * BIMU_PLANES;
#else
            const bimu_real *lr = L->lam + e_l + (uint64_t)o * (uint64_t)n_in;
            uint32_t tp_buf[BIMU_PLANES];
#endif
#if BIMU_QUERY_DOT8
            uint32_t tail[BIMU_QUERY_K];
            bimu_real acc[BIMU_QUERY_K][8];
            memset(acc, 0, sizeof acc);
#else
            bimu_real plus[BIMU_QUERY_K];
#endif
            for (int k = 0; k < K; k++) {
                const uint64_t rk = bimu_hash64(ukey, (g + (uint64_t)o) * (uint64_t)K + (uint64_t)k);
                rlo[k] = (uint32_t)(rk & 0xFFFFFFFFu);
                rhi[k] = (uint32_t)(rk >> 32);
#if BIMU_QUERY_DOT8
                tail[k] = 0;
#else
                plus[k] = 0;
#endif
            }
            for (int w = 0; 32 * w < n_in; w++) {
                const int m = n_in - 32 * w < 32 ? n_in - 32 * w : 32;
                const uint32_t valid = m == 32 ? 0xFFFFFFFFu : ((1u << m) - 1u);
#if BIMU_STORE_PLANES
                const uint32_t *tp = row_planes + w * BIMU_PLANES;
#else
                const uint32_t *tp = tp_buf;
                bimu_word_planes(lr + 32 * w, m, tp_buf);
#endif
                for (int k = 0; k < K; k++) {
                    uint32_t bits = bimu_draw_word(tp, valid, rlo[k], rhi[k], (uint32_t)w);
                    const bimu_real *src = (l == 0 ? x : L->q_cur + k * n_in) + 32 * w;
#if BIMU_QUERY_DOT8
                    for (int i = 0; i < m; i++) {
                        const int c = 32 * w + i;
                        if (c >= nb) { tail[k] = bits; break; }
                        acc[k][c & 7] = acc[k][c & 7] + (((bits >> i) & 1u) ? src[i] : -src[i]);
                    }
#else
                    bimu_real p = plus[k];
                    while (bits) {
                        p = p + src[bimu_ctz(bits)];
                        bits &= bits - 1u;
                    }
                    plus[k] = p;
#endif
                }
            }
            for (int k = 0; k < K; k++) {
#if BIMU_QUERY_DOT8
                const bimu_real *src = l == 0 ? x : L->q_cur + k * n_in;
                bimu_real t = bimu_lanes(acc[k]);
                for (int c = nb; c < n_in; c++) t = t + (((tail[k] >> (c & 31)) & 1u) ? src[c] : -src[c]);
                L->q_nxt[k * n_out + o] = t;
#else
                L->q_nxt[k * n_out + o] = (bimu_real)2 * plus[k] - total[k];
#endif
            }
        }
        g += (uint64_t)n_out;
        e_l += (uint64_t)n_in * (uint64_t)n_out;
        for (int k = 0; k < K; k++) {
            const int base = k * n_out;
            if (hidden || BIMU_OUTPUT_NORM)
                bimu_ln_act(L->q_nxt + base, L->q_xh + base, L->q_cur + base, &rs, n_out, eps, gate, hidden, 0);
            else
                for (int o = 0; o < n_out; o++) L->q_cur[base + o] = L->q_nxt[base + o];
        }
    }
    (void)e_l;
    for (int t = 0; t < K * C; t++) logits[t] = L->q_cur[t];
}

/* ------------------------------------------------------------------ scores (bimu.engine.scores) */
int bimu_scores(const bimu_real *logits, int K, int *votes, int *pred) {
    const int C = bimu_sizes[BIMU_N_LAYERS];
    double mlp[BIMU_MAX_OUT], ex[BIMU_MAX_OUT];
    bimu_real probs[BIMU_MAX_OUT];
    int bc = 0, mv;
    for (int c = 0; c < C; c++) { mlp[c] = 0.0; votes[c] = 0; }
    for (int k = 0; k < K; k++) {
        const bimu_real *lg = logits + k * C;
        bimu_real mx = lg[0];
        double s = 0.0, ls;
        int best = 0;
        for (int c = 1; c < C; c++) mx = lg[c] > mx ? lg[c] : mx;
        for (int c = 0; c < C; c++) {
            ex[c] = (double)BIMU_EXPR(lg[c] - mx);
            s += ex[c];
        }
        ls = log(s);
        for (int c = 0; c < C; c++) {
            probs[c] = (bimu_real)(ex[c] / s);
            if (probs[c] > probs[best]) best = c;
            mlp[c] += (double)(lg[c] - mx) - ls;
        }
        votes[best] += 1;
    }
    mv = votes[0];
    for (int c = 0; c < C; c++) {
        if (mlp[c] > mlp[bc]) bc = c;
        mv = votes[c] > mv ? votes[c] : mv;
    }
    *pred = bc;
    return K - mv;
}

int bimu_observe(bimu_learner *L, const bimu_real *x, uint64_t key, int *pred) {
    int votes[BIMU_MAX_OUT];
    int ask;
    bimu_logits(L, x, key, L->query_k, L->q_logits);
    L->last_dissent = bimu_scores(L->q_logits, L->query_k, votes, pred);
    ask = L->last_dissent >= L->query_need;
    if (ask) L->labels_queried += 1;
    else L->examples_seen += 1; /* bimu_learn counts a queried example */
    return ask;
}

uint64_t bimu_next_query_key(const bimu_learner *L) { return bimu_hash64(L->query_key, L->examples_seen) >> 2; }

/* ------------------------------------------------------------------ setup and verification */
void bimu_hparams_bimu(bimu_hparams *hp, double lr, double lr_max, double likelihood_multiplier,
                       double kl_multiplier, double memory_window, double prior, double gate_width) {
    hp->c0 = (bimu_real)(lr * likelihood_multiplier);
    hp->c1 = (bimu_real)(2.0 * likelihood_multiplier);
    hp->c2 = (bimu_real)kl_multiplier;
    hp->c3 = (bimu_real)(1.0 / lr_max);
    hp->c4 = (bimu_real)(kl_multiplier / memory_window);
    hp->c5 = (bimu_real)prior;
    hp->gate = (bimu_real)gate_width;
    hp->ln_eps = (bimu_real)1e-5;
}

void bimu_hparams_bayesbinn(bimu_hparams *hp, double lr, double ratio_eps, double prior_pull, double gate_width) {
    hp->c0 = (bimu_real)lr;
    hp->c1 = (bimu_real)ratio_eps;
    hp->c2 = hp->c3 = hp->c5 = 0;
    hp->c4 = (bimu_real)prior_pull;
    hp->gate = (bimu_real)gate_width;
    hp->ln_eps = (bimu_real)1e-5;
}

void bimu_init(bimu_learner *L, const bimu_real *lam, const bimu_hparams *hp, uint64_t train_key,
               uint64_t eval_key, uint64_t query_key, uint64_t train_step) {
    memset(L, 0, sizeof *L);
    memcpy(L->lam, lam, sizeof L->lam);
    L->hp = *hp;
    L->train_key = train_key;
    L->eval_key = eval_key;
    L->query_key = query_key;
    L->train_step = train_step;
    L->query_k = BIMU_QUERY_K;
    L->query_need = 1;
    bimu_sync(L);
}

void bimu_set_query(bimu_learner *L, int k, int need) {
    L->query_k = k < 1 ? 1 : k > BIMU_QUERY_K ? BIMU_QUERY_K : k;
    L->query_need = need < 0 ? 0 : need;
}

int bimu_vote_threshold(double tau, int k) {
    const double n = ceil(tau * (double)k - 1e-9);
    return n < 0 ? 0 : (int)n;
}

void bimu_task_end(bimu_learner *L) {
#if BIMU_BAYESBINN
    memcpy(L->prior, L->lam, sizeof L->prior);
#else
    (void)L;
#endif
}

unsigned long bimu_state_bytes(void) { return (unsigned long)sizeof(bimu_learner); }

bimu_real *bimu_lambda(bimu_learner *L) { return L->lam; }

bimu_real *bimu_prior(bimu_learner *L) {
#if BIMU_BAYESBINN
    return L->prior;
#else
    (void)L;
    return 0;
#endif
}

void bimu_counters(const bimu_learner *L, uint64_t *out) {
    out[0] = L->train_step;
    out[1] = L->examples_seen;
    out[2] = L->updates_applied;
    out[3] = L->labels_queried;
    out[4] = L->train_key;
    out[5] = L->eval_key;
    out[6] = L->query_key;
}

void bimu_set_counters(bimu_learner *L, uint64_t examples_seen, uint64_t updates_applied, uint64_t labels_queried) {
    L->examples_seen = examples_seen;
    L->updates_applied = updates_applied;
    L->labels_queried = labels_queried;
}

uint64_t bimu_lambda_hash(const bimu_learner *L) {
    const unsigned char *p = (const unsigned char *)L->lam;
    uint64_t h = 0xCBF29CE484222325ULL;
    for (unsigned long i = 0; i < sizeof L->lam; i++) {
        h ^= p[i];
        h *= 0x100000001B3ULL;
    }
    return h;
}
