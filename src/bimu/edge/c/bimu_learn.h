/*
 * bimu_learn.h - a dependency-free C99 learner for the paper's binary Bayesian networks: BiMU (and
 * BayesBiNN) on the device, with the fused engine's random numbers, so that a host build reproduces
 * bimu's Python learner (float64 build: to rounding; the query decisions exactly).
 *
 * Networks: sizes[0] -> sizes[1] -> ... -> sizes[L] with natural parameters lambda (row-major
 * [out][in] per layer, layers one after another, as bimu.engine lays them out). Hidden layers:
 * LayerNorm (no affine) then the Reverse Binary Gate 1[|z| > gate] (BIMU_ACT_GATE 1) or sign;
 * the logits are layer-normalised too when BIMU_OUTPUT_NORM is 1. A linear head is L = 1.
 *
 * Configuration: one network per build, fixed at compile time by "bimu_config.h" (written by
 * bimu.edge.clearner.config_header, or by hand):
 *     #define BIMU_N_LAYERS 2            L
 *     #define BIMU_SIZES {784, 100, 10}  L + 1 sizes
 *     #define BIMU_MAX_IN 784            largest sizes[l], l < L
 *     #define BIMU_MAX_OUT 100           largest sizes[l], l >= 1
 *     #define BIMU_UPPER_PARAMS 1000     parameters of layers 1..L-1 (0 for a head)
 *     #define BIMU_N_PARAMS 79400        all parameters P
 *     #define BIMU_HIDDEN_UNITS 110      sum of sizes[1..L]
 *     #define BIMU_K 5                   relaxed samples per training step (hyperparameter n_samples)
 *     #define BIMU_QUERY_K 10            largest K of a query (bimu_logits / bimu_observe)
 *     #define BIMU_ACT_GATE 1            1: Reverse Binary Gate, 0: sign
 *     #define BIMU_OUTPUT_NORM 1         1: LayerNorm on the logits
 *     #define BIMU_BAYESBINN 0           1: the BayesBiNN update (per-parameter prior array)
 * Precision: float (BIMU_REAL) by default, double with -DBIMU_DOUBLE. BIMU_FMA(a, b, c) is a*b+c
 * rounded once (C99 fma/fmaf) where the engine's kernels contract to FMA; -DBIMU_NO_FMA makes it
 * a*b+c rounded twice (cheaper on a core without FMA, no longer the engine's rounding).
 * Host build pinned by bimu.edge.clearner: cc -std=c99 -O2 -ffp-contract=off (no contraction but
 * the explicit BIMU_FMA calls; the same flags on every target give the same bits).
 *
 * Usage (a firmware, one example at a time):
 *     static bimu_learner L;                            all state, no allocation
 *     bimu_hparams hp;
 *     bimu_hparams_bimu(&hp, 4.9, 0.0023, 161.3, 3.76, 700.0, 0.0, 1.0);  paper values (pmnist-100)
 *     bimu_init(&L, lambda, &hp, bimu_derive_key(seed, 1), bimu_derive_key(seed, 2), query_seed, 0);
 *     bimu_set_query(&L, 2, 1);                         K = 2 hard samples, query iff dissent >= 1
 *     for each example x:
 *         int pred;
 *         if (bimu_observe(&L, x, bimu_next_query_key(&L), &pred))   predict + decide (VR)
 *             bimu_learn(&L, x, label_of(x));                           only when asked
 * bimu_observe counts an unqueried example as seen; bimu_learn counts the queried one (as
 * ActiveLearner.predict_one / learn_one do). To reproduce a host ActiveLearner pass its per-example
 * 62-bit keys instead of bimu_next_query_key.
 *
 * Random numbers (bimu.rng, bimu.engine): training step s draws the relaxed samples of the row at
 * parameter e0 from row key hash64(train_key, s P + e0) (two 64-bit multiplies per row) and the
 * 32-bit hash32 lanes of index i K + k (32-bit multiplies only); a query with key r draws row g's
 * sample k from hash64(mix64(r ^ QUERY_SALT), g K + k) and the bit-sliced threshold planes of
 * bimu.engine.planes (stored, or computed per 32-weight word from lambda: BIMU_STORE_PLANES).
 *
 * Compile-time options (each 0 or 1; config_header writes them, -D overrides a hand-written config):
 *     BIMU_STORE_PLANES (default 1): the state keeps b = exp(-2 |lambda|) of every parameter (P reals)
 *         and the 24 threshold planes of every 32-weight word (BIMU_PLANE_WORDS x 24 uint32: 3 bytes
 *         per weight), set by bimu_init / bimu_sync / bimu_state_read and rebuilt for every updated row
 *         right after the update (one exp, one exact threshold per weight and a 32 x 32 bit transpose
 *         per word). A query then only draws and sums; training reads b instead of computing it.
 *         0: b and the planes are derived from lambda on every use (the state is lambda + scratch; a
 *         query then costs a threshold and a transpose per weight more). Whoever writes lam directly
 *         (not through bimu_learn / bimu_init / bimu_state_read) must call bimu_sync afterwards.
 *     BIMU_KEEP_SAMPLES (default 1): the first layer's K relaxed samples of the forward pass are kept
 *         (K x sizes[0] x sizes[1] reals) for the gradient and the update, instead of regenerated
 *         (a hash, a uniform and a division per weight and sample saved).
 *     Neither option changes a bit of any result (tests/test_edge_clearner.py checks it).
 *     BIMU_QUERY_DOT8 (default 1 in the float64 build, 0 in float32): the query's pre-activations in
 *         dots.dot8's order (eight partial sums, then the tail), as the engine sums them. 0: as masked
 *         sums 2 (sum of x over the +1 weights) - (sum of x), the sum of x computed once per example
 *         and layer input and shared by all rows and samples, the +1 weights visited by their bit
 *         positions (cheaper: no sign selection per weight). This changes the float32 rounding of the
 *         query logits: they then equal the engine's only to float32 rounding of the sums (checked
 *         within 1e-4 on LayerNorm'd logits of a 512 -> 16 head), and a query decision whose logits
 *         tie to that precision can differ from the Python learner's. Define BIMU_QUERY_DOT8 1 for
 *         float32 queries identical to the engine's (the float64 build always keeps dot8's order).
 * Instructions on an emulated Cortex-M7 (512 -> 16, float32, defaults; `bimu compute-cost --emulated`):
 * one MC sample of a query 78,853, one BiMU training step (K = 1) 1,440,760.
 * The memory of the 8192 -> 19 head (155,648 weights): lambda 608 KB; +1.05 MB with BIMU_STORE_PLANES
 * (b 608 KB + planes 456 KB) and +608 KB per K with BIMU_KEEP_SAMPLES (float32). config_header turns
 * both off by default for networks whose first layer has more than 65,536 weights (see
 * bimu.edge.clearner.config_header); a part with the SRAM can turn them on.
 *
 * State size: sizeof(bimu_learner) (bimu_state_bytes()) = P reals of lambda (+ P of the prior for
 * BayesBiNN) (+ P reals of b and 3 P bytes of planes with BIMU_STORE_PLANES) (+ K sizes[0] sizes[1]
 * reals with BIMU_KEEP_SAMPLES) + O(K * (sum of widths) + K * max in of the upper layers + upper
 * parameters) scratch. See docs/on-device.md for the table.
 */
#ifndef BIMU_LEARN_H
#define BIMU_LEARN_H

#include <stdint.h>

#include "bimu_config.h"

#ifdef BIMU_DOUBLE
typedef double bimu_real;
#else
typedef float bimu_real;
#endif

#ifndef BIMU_BAYESBINN
#define BIMU_BAYESBINN 0
#endif
#ifndef BIMU_STORE_PLANES
#define BIMU_STORE_PLANES 1
#endif
#ifndef BIMU_KEEP_SAMPLES
#define BIMU_KEEP_SAMPLES 1
#endif
#ifndef BIMU_QUERY_DOT8
#ifdef BIMU_DOUBLE
#define BIMU_QUERY_DOT8 1
#else
#define BIMU_QUERY_DOT8 0
#endif
#endif
#ifndef BIMU_PLANE_WORDS /* sum over layers of sizes[l+1] * ceil(sizes[l] / 32) (an upper bound here) */
#define BIMU_PLANE_WORDS (BIMU_N_PARAMS / 32 + BIMU_HIDDEN_UNITS)
#endif

/* The update's coefficients, in the slots of bimu.engine.hparams.BinaryHP (computed in double from the
 * paper's values, then rounded to bimu_real, as the engine packs them). */
typedef struct {
    bimu_real c0;      /* BiMU: gamma beta_L             | BayesBiNN: lr */
    bimu_real c1;      /* BiMU: 2 beta_L                 | BayesBiNN: ratio_eps */
    bimu_real c2;      /* BiMU: beta_KL                  | (unused) */
    bimu_real c3;      /* BiMU: 1 / alpha_max            | (unused) */
    bimu_real c4;      /* BiMU: beta_KL / N              | BayesBiNN: prior pull s lr prior_strength */
    bimu_real c5;      /* BiMU: lambda_prior (scalar)    | (unused: the prior array of the state) */
    bimu_real gate;    /* RBG threshold a */
    bimu_real ln_eps;  /* LayerNorm epsilon (bimu.nn.mlp.LAYER_NORM_EPS = 1e-5) */
} bimu_hparams;

typedef struct {
    /* ---- model */
    bimu_real lam[BIMU_N_PARAMS];            /* natural parameters, engine layout */
#if BIMU_BAYESBINN
    bimu_real prior[BIMU_N_PARAMS];          /* BayesBiNN's lambda_prior (bimu_task_end copies lam) */
#endif
    bimu_hparams hp;
    /* ---- random keys and counters (the engine's: FusedMethod.train_key, eval_key, train_step ...) */
    uint64_t train_key;                      /* relaxed samples: derive_key(seed, TRAIN_STREAM) */
    uint64_t eval_key;                       /* kept for export / read-back: derive_key(seed, EVAL_STREAM) */
    uint64_t query_key;                      /* the device's own query keys (bimu_next_query_key) */
    uint64_t train_step;                     /* selects the next step's relaxed uniforms */
    uint64_t examples_seen;                  /* examples observed or learned */
    uint64_t updates_applied;                /* bimu_learn calls (as the engine counts learn()) */
    uint64_t labels_queried;                 /* bimu_observe decisions that asked for a label */
    int32_t query_k;                         /* hard samples of a query decision (<= BIMU_QUERY_K) */
    int32_t query_need;                      /* query iff dissent K - max votes >= this */
    int32_t last_dissent;                    /* of the last bimu_observe / bimu_scores */
    int32_t last_applied;                    /* 1 if the last step's gradient was not identically 0 */
    /* ---- scratch of one training step (K relaxed samples) */
    bimu_real z[BIMU_K * BIMU_HIDDEN_UNITS];  /* pre-activations */
    bimu_real xh[BIMU_K * BIMU_HIDDEN_UNITS]; /* normalised values */
    bimu_real a[BIMU_K * BIMU_HIDDEN_UNITS];  /* activations (logits at the output) */
    bimu_real dz[BIMU_K * BIMU_HIDDEN_UNITS]; /* gradients w.r.t. pre-activations */
    bimu_real da[BIMU_K * BIMU_MAX_OUT];      /* gradients w.r.t. activations (one layer) */
    double rs[BIMU_K * BIMU_N_LAYERS];        /* 1 / sqrt(var + eps) of each LayerNorm */
    bimu_real g_upper[BIMU_UPPER_PARAMS + 1]; /* dL/dlambda of layers 1..L-1 */
    bimu_real wrow[BIMU_K * BIMU_MAX_OUT];    /* K relaxed samples of one row of an upper layer */
#if BIMU_STORE_PLANES
    bimu_real bq[BIMU_N_PARAMS];             /* b = exp(-2 |lam|) of the current lambda */
    uint32_t planes[BIMU_PLANE_WORDS * 24];  /* threshold planes: word w of row g at (row words + w) * 24 */
#endif
#if BIMU_KEEP_SAMPLES
    bimu_real w0[BIMU_K * (BIMU_N_PARAMS - BIMU_UPPER_PARAMS)]; /* first layer's relaxed samples [e][k] */
#endif
    /* ---- scratch of one query (hard samples) */
    bimu_real q_cur[BIMU_QUERY_K * BIMU_MAX_OUT];
    bimu_real q_nxt[BIMU_QUERY_K * BIMU_MAX_OUT];
    bimu_real q_xh[BIMU_QUERY_K * BIMU_MAX_OUT];
    bimu_real q_logits[BIMU_QUERY_K * BIMU_MAX_OUT];
} bimu_learner;

/* ---- random numbers (bimu.rng; exposed for tests) */
uint64_t bimu_mix64(uint64_t z);
uint64_t bimu_hash64(uint64_t key, uint64_t n);
uint64_t bimu_derive_key(uint64_t seed, uint64_t stream);         /* bimu.rng.derive_key */
uint32_t bimu_hash32(uint32_t rlo, uint32_t rhi, uint32_t idx);   /* bimu.rng.hash32 */
void bimu_row_key(uint64_t key, uint64_t step, uint64_t P, uint64_t e0, uint32_t *rlo, uint32_t *rhi);
bimu_real bimu_uniform32(uint32_t x);                             /* (2 (x >> 9) + 1) / 2^24 */
/* The exact threshold T (0 .. 2^23) of one parameter: its hard sample is +1 iff m < T for the 23-bit
 * random m (bimu.engine.planes.thresholds). */
int32_t bimu_threshold(bimu_real lam);
/* The bits of one row's hard sample (bit i of word w: weight 32 w + i is +1), drawn with row key
 * (rlo, rhi) from the thresholds of lam[0 .. n-1] (bimu.engine.planes.sample_row_bits). */
void bimu_sample_row_bits(const bimu_real *lam, int n, uint32_t rlo, uint32_t rhi, uint32_t *bits);
/* Relaxed sample k of row (layer l, row o) at training step `step` into w[0 .. sizes[l]-1]. */
void bimu_relaxed_row(const bimu_learner *L, int l, int o, uint64_t step, int k, bimu_real *w);

/* ---- setup */
void bimu_hparams_bimu(bimu_hparams *hp, double lr, double lr_max, double likelihood_multiplier,
                       double kl_multiplier, double memory_window, double prior, double gate_width);
void bimu_hparams_bayesbinn(bimu_hparams *hp, double lr, double ratio_eps, double prior_pull, double gate_width);
/* lam: BIMU_N_PARAMS values (copied); prior lambda of BayesBiNN starts at 0. */
void bimu_init(bimu_learner *L, const bimu_real *lam, const bimu_hparams *hp, uint64_t train_key,
               uint64_t eval_key, uint64_t query_key, uint64_t train_step);
/* A query decision with k hard samples (1 <= k <= BIMU_QUERY_K) asks iff dissent >= need. */
void bimu_set_query(bimu_learner *L, int k, int need);
/* need = ceil(tau k - 1e-9), at least 0 (bimu.active.threshold.vote_threshold). */
int bimu_vote_threshold(double tau, int k);
void bimu_task_end(bimu_learner *L);                 /* BayesBiNN: prior <- lambda; BiMU: nothing */
unsigned long bimu_state_bytes(void);                /* sizeof(bimu_learner) */
bimu_real *bimu_lambda(bimu_learner *L);             /* L->lam (for bindings that do not mirror the struct) */
bimu_real *bimu_prior(bimu_learner *L);              /* BayesBiNN's prior array, NULL for BiMU */
/* out[0..6] = train_step, examples_seen, updates_applied, labels_queried, train_key, eval_key, query_key */
void bimu_counters(const bimu_learner *L, uint64_t *out);
/* The 64-bit counters, restored from a host state (examples_seen, updates_applied, labels_queried). */
void bimu_set_counters(bimu_learner *L, uint64_t examples_seen, uint64_t updates_applied, uint64_t labels_queried);

/* ---- learning: one labelled example = one training step (batch 1, T = 1, BIMU_K relaxed samples):
 * relaxed forward, backward, the BiMU (BayesBiNN) update unless the gradient is identically zero,
 * train_step += 1, examples_seen += 1, updates_applied += 1. Returns 1 if the update was applied. */
int bimu_learn(bimu_learner *L, const bimu_real *x, int y);

/* ---- prediction and query */
/* Logits [k][C] of x under k fresh hard samples drawn with the 62-bit key (bimu.engine.query). */
void bimu_logits(bimu_learner *L, const bimu_real *x, uint64_t key, int k, bimu_real *logits);
/* Scores of logits [k][C] (bimu.engine.scores): votes[C] per-sample argmax of the softmax (first
 * index on ties); *pred = argmax of the mean log-softmax; returns the dissent k - max votes
 * (variation ratio = dissent / k). */
int bimu_scores(const bimu_real *logits, int k, int *votes, int *pred);
/* Predict x and decide (variation ratio): returns 1 to ask for its label (then call bimu_learn),
 * 0 otherwise (the example is counted as seen). *pred: the prediction. */
int bimu_observe(bimu_learner *L, const bimu_real *x, uint64_t key, int *pred);
/* The device's own next query key: hash64(query_key, examples_seen) >> 2 (a 62-bit integer). */
uint64_t bimu_next_query_key(const bimu_learner *L);

/* Recompute b and the threshold planes from lam (BIMU_STORE_PLANES; nothing otherwise): call it after
 * writing lam other than through bimu_learn / bimu_init / bimu_state_read. */
void bimu_sync(bimu_learner *L);

/* ---- verification */
uint64_t bimu_lambda_hash(const bimu_learner *L);    /* FNV-1a 64 over the bytes of lam */

#endif /* BIMU_LEARN_H */
