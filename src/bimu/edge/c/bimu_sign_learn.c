/*
 * bimu_sign_learn.c - STE and Synaptic Metaplasticity online steps (see bimu_sign_learn.h).
 *
 * Every expression follows bimu.engine.sign (sign_train, adam_row) at batch size 1, in the same order
 * of operations: constants computed in double and rounded once to the working type, sums in index
 * order from 0. Build: cc -std=c99 -O2 -ffp-contract=off [-DBIMU_SIGN_DOUBLE] -c bimu_sign_learn.c
 */
#include "bimu_sign_learn.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

typedef bimu_sign_real real;

#ifdef BIMU_SIGN_DOUBLE
static real sexp(real x) { return exp(x); }
static real ssqrt(real x) { return sqrt(x); }
static real sabs(real x) { return fabs(x); }
#else
/* bimu.engine.scalar.fexp: exp(x) for x <= 0 in float32 arithmetic (relative error < 1e-7). */
static real sexp(real x) {
    union { int32_t i; float f; } s;
    float nf, r, p;
    if (x < -87.0f) x = -87.0f;
    nf = (x * 1.4426950408889634f + 12582912.0f) - 12582912.0f;
    r = x - nf * 0.693145751953125f - nf * 1.428606765330187e-06f;
    p = (float)(1.0 / 5040.0);
    p = p * r + (float)(1.0 / 720.0);
    p = p * r + (float)(1.0 / 120.0);
    p = p * r + (float)(1.0 / 24.0);
    p = p * r + (float)(1.0 / 6.0);
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    s.i = ((int32_t)nf + 127) << 23;
    return p * s.f;
}
static real ssqrt(real x) { return sqrtf(x); }
static real sabs(real x) { return fabsf(x); }
#endif

static double power(double b, uint64_t t) { /* b^t by repeated squaring */
    double r = 1.0;
    while (t) {
        if (t & 1u) r *= b;
        b *= b;
        t >>= 1;
    }
    return r;
}

static void adam_defaults(bimu_sign_hparams *hp) {
    memset(hp, 0, sizeof(*hp));
    hp->beta1 = 0.9;
    hp->beta2 = 0.999;
    hp->eps = 1e-8;
    hp->bn_eps = 1e-5;
}

void bimu_sign_hparams_ste(bimu_sign_hparams *hp, double lr, double weight_decay, int clip) {
    adam_defaults(hp);
    hp->lr = lr;
    hp->weight_decay = weight_decay;
    hp->decoupled = 1;
    hp->clip = clip != 0;
}

void bimu_sign_hparams_synmeta(bimu_sign_hparams *hp, double lr, double metaplasticity, double weight_decay,
                               double bn_momentum, double gate) {
    adam_defaults(hp);
    hp->lr = lr;
    hp->metaplasticity = metaplasticity;
    hp->weight_decay = weight_decay;
    hp->bn_momentum = bn_momentum;
    hp->gate = gate;
    hp->norm = 1;
}

static int count(int n_layers, const int32_t *sizes, long *P, long *U) {
    if (n_layers < 1 || n_layers > BIMU_SIGN_MAX_LAYERS) return -1;
    *P = 0;
    *U = 0;
    for (int l = 0; l <= n_layers; l++)
        if (sizes[l] < 1) return -1;
    for (int l = 0; l < n_layers; l++) {
        *P += (long)sizes[l] * sizes[l + 1];
        *U += sizes[l + 1];
    }
    return 0;
}

long bimu_sign_buffer_reals(int n_layers, const int32_t *sizes) {
    long P, U;
    if (count(n_layers, sizes, &P, &U)) return -1;
    return BIMU_SIGN_BUFFER_REALS(P, U);
}

int bimu_sign_init(bimu_sign_learner *S, int n_layers, const int32_t *sizes, const bimu_sign_hparams *hp,
                   bimu_sign_real *buf, const bimu_sign_real *wh0) {
    long P, U;
    if (count(n_layers, sizes, &P, &U)) return -1;
    memset(S, 0, sizeof(*S));
    S->n_layers = n_layers;
    S->hp = *hp;
    for (int l = 0; l <= n_layers; l++) S->sizes[l] = sizes[l];
    for (int l = 0; l < n_layers; l++) {
        S->woff[l + 1] = S->woff[l] + sizes[l] * sizes[l + 1];
        S->boff[l + 1] = S->boff[l] + sizes[l + 1];
    }
    S->wh = buf;
    S->mw = S->wh + P;
    S->vw = S->mw + P;
    S->np_ = S->vw + P;
    S->mn = S->np_ + 2 * U;
    S->vn = S->mn + 2 * U;
    S->gn = S->vn + 2 * U;
    S->rm = S->gn + 2 * U;
    S->rv = S->rm + U;
    S->z = S->rv + U;
    S->a = S->z + U;
    S->h = S->a + U;
    S->dy = S->h + U;
    S->inv = S->dy + U;
    for (long i = 0; i < BIMU_SIGN_BUFFER_REALS(P, U); i++) buf[i] = 0;
    if (wh0)
        for (long i = 0; i < P; i++) S->wh[i] = wh0[i];
    for (int l = 0; l < n_layers; l++)
        for (int o = 0; o < sizes[l + 1]; o++) S->np_[2 * S->boff[l] + o] = 1;
    for (long u = 0; u < U; u++) S->rv[u] = 1;
    return 0;
}

/* sum_i sign(w[i]) x[i] (sign(0) = +1), in order (bimu.engine.sign.sign_dot). */
static real sign_dot(const real *w, const real *x, int n) {
    real s = 0;
    for (int i = 0; i < n; i++) s += w[i] >= 0 ? x[i] : -x[i];
    return s;
}

static real activation(real a, int gated, real gate) {
    if (gated) return sabs(a) > gate ? (real)1 : (real)0;
    return a >= 0 ? (real)1 : (real)-1;
}

/* Forward pass into z, a (and h for hidden layers); `train`: the norms take in the example first. */
static void forward(bimu_sign_learner *S, const real *x, int train) {
    const bimu_sign_hparams *hp = &S->hp;
    const int L = S->n_layers;
    const real mom = (real)hp->bn_momentum, keep = (real)(1.0 - hp->bn_momentum), bn_eps = (real)hp->bn_eps;
    const int gated = hp->gate > 0;
    const real gate = (real)hp->gate;
    for (int l = 0; l < L; l++) {
        const int n_in = S->sizes[l], n_out = S->sizes[l + 1];
        const real *inp = l == 0 ? x : S->h + S->boff[l - 1];
        for (int o = 0; o < n_out; o++) {
            const int u = S->boff[l] + o;
            real z = sign_dot(S->wh + S->woff[l] + (long)o * n_in, inp, n_in), av;
            S->z[u] = z;
            if (hp->norm) {
                real inv;
                if (train) {
                    real d;
                    S->rm[u] = S->rm[u] * keep + mom * z;
                    d = z - S->rm[u];
                    S->rv[u] = S->rv[u] * keep + mom * (d * d);
                    inv = (real)1 / ssqrt(S->rv[u] + bn_eps);
                } else {
                    inv = (real)1 / ssqrt(S->rv[u] + bn_eps);
                }
                S->inv[u] = inv;
                av = (z - S->rm[u]) * inv * S->np_[2 * S->boff[l] + o] + S->np_[2 * S->boff[l] + n_out + o];
            } else {
                av = z;
            }
            S->a[u] = av;
            if (l < L - 1) S->h[u] = activation(av, gated, gate);
        }
    }
}

void bimu_sign_logits(bimu_sign_learner *S, const bimu_sign_real *x, bimu_sign_real *logits) {
    const int L = S->n_layers;
    forward(S, x, 0);
    for (int c = 0; c < S->sizes[L]; c++) logits[c] = S->a[S->boff[L - 1] + c];
}

/* One metaplastic Adam step on w[0 .. n-1] with gradient g (bimu.engine.sign.adam_row). With
 * gscale != NULL the gradient is g_i = gscale[0] * g[i] (a weight row's d_o x_i, never stored). */
static void adam_row(real *w, real *m, real *v, const real *g, const real *gscale, int n, double meta, int clip,
                     const bimu_sign_hparams *hp, double bc1, double bc2) {
    const real lr = (real)hp->lr, decay = (real)(1.0 - hp->lr * hp->weight_decay), wd = (real)hp->weight_decay;
    const real b1 = (real)hp->beta1, b2 = (real)hp->beta2, o1 = (real)(1.0 - hp->beta1),
               o2 = (real)(1.0 - hp->beta2), eps = (real)hp->eps;
    const real r1 = (real)(1.0 / bc1), r2 = (real)(1.0 / bc2), m2 = (real)(-2.0 * meta);
    const real d = gscale ? gscale[0] : (real)1;
    /* m2 < 0 iff meta > 0 (a meta so small that m2 rounds to 0 attenuates by f = 1): a float test, which
     * the compiler may re-evaluate in the loop at no cost on a single-precision FPU */
    const int decoupled = hp->decoupled, attenuate = m2 < 0;
    for (int i = 0; i < n; i++) {
        real wi = w[i], gi = gscale ? d * g[i] : g[i], mi, vi, u;
        if (decoupled)
            wi = wi * decay;
        else
            gi = gi + wd * wi;
        mi = m[i] * b1 + o1 * gi;
        vi = v[i] * b2 + (o2 * gi) * gi;
        m[i] = mi;
        v[i] = vi;
        u = (lr * (mi * r1)) / (ssqrt(vi * r2) + eps);
        if (attenuate) {
            const real q = sexp(m2 * sabs(wi));
            const real f = (real)4 * q / (((real)1 + q) * ((real)1 + q));
            if (u * wi > 0) u = u * f;
        }
        wi = wi - u;
        if (clip) wi = wi < (real)-1 ? (real)-1 : (wi > (real)1 ? (real)1 : wi);
        w[i] = wi;
    }
}

void bimu_sign_learn(bimu_sign_learner *S, const bimu_sign_real *x, int y) {
    const bimu_sign_hparams *hp = &S->hp;
    const int L = S->n_layers, C = S->sizes[L];
    const uint64_t t = S->adam_step + 1;
    const double bc1 = 1.0 - power(hp->beta1, t), bc2 = 1.0 - power(hp->beta2, t);
    forward(S, x, 1);
    { /* dL/dlogits = softmax - onehot (bimu.engine.dense.ce_delta) */
        const real *zl = S->a + S->boff[L - 1];
        real *p = S->dy + S->boff[L - 1], mx = zl[0], s = 0;
        for (int c = 1; c < C; c++) mx = zl[c] > mx ? zl[c] : mx;
        for (int c = 0; c < C; c++) {
            p[c] = sexp(zl[c] - mx);
            s += p[c];
        }
        for (int c = 0; c < C; c++) p[c] = p[c] / s;
        p[y] -= 1;
    }
    for (int l = L - 1; l >= 0; l--) {
        const int n_in = S->sizes[l], n_out = S->sizes[l + 1];
        if (hp->norm) {
            for (int o = 0; o < n_out; o++) {
                const int u = S->boff[l] + o;
                const real dy = S->dy[u], g = S->np_[2 * S->boff[l] + o];
                S->gn[2 * S->boff[l] + o] = (real)0 + dy * ((S->z[u] - S->rm[u]) * S->inv[u]);
                S->gn[2 * S->boff[l] + n_out + o] = (real)0 + dy;
                S->dy[u] = dy * g * S->inv[u];
            }
        }
        if (l > 0) { /* through the signs of the weights, then the activation's estimator */
            real *dp = S->dy + S->boff[l - 1];
            const real *ap = S->a + S->boff[l - 1];
            for (int i = 0; i < n_in; i++) dp[i] = 0;
            for (int o = 0; o < n_out; o++) {
                const real d = S->dy[S->boff[l] + o];
                const real *wr = S->wh + S->woff[l] + (long)o * n_in;
                for (int i = 0; i < n_in; i++) dp[i] += wr[i] >= 0 ? d : -d;
            }
            const int gated = hp->gate > 0;
            for (int i = 0; i < n_in; i++) {
                if (gated) {
                    const real lo = (real)(0.5 * hp->gate), hi = (real)(1.5 * hp->gate);
                    const real sur = (lo < ap[i] && ap[i] < hi) ? (real)1 : ((-hi < ap[i] && ap[i] < -lo) ? (real)-1 : (real)0);
                    dp[i] = dp[i] * sur;
                } else if (sabs(ap[i]) > 1) {
                    dp[i] = 0;
                }
            }
        }
    }
    for (int l = 0; l < L; l++) {
        const int n_in = S->sizes[l], n_out = S->sizes[l + 1];
        const real *inp = l == 0 ? x : S->h + S->boff[l - 1];
        for (int o = 0; o < n_out; o++) {
            const long w0 = S->woff[l] + (long)o * n_in;
            adam_row(S->wh + w0, S->mw + w0, S->vw + w0, inp, S->dy + S->boff[l] + o, n_in, hp->metaplasticity,
                     hp->clip, hp, bc1, bc2);
        }
    }
    if (hp->norm) adam_row(S->np_, S->mn, S->vn, S->gn, NULL, 2 * S->boff[L], 0.0, 0, hp, bc1, bc2);
    S->adam_step = t;
}

uint64_t bimu_sign_weights_hash(const bimu_sign_learner *S) {
    const unsigned char *p = (const unsigned char *)S->wh;
    const size_t n = sizeof(real) * (size_t)S->woff[S->n_layers];
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
