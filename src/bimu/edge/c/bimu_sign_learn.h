/*
 * bimu_sign_learn.h - the paper's deterministic binary baselines on the device, in C99: STE
 * (Courbariaux et al. 2016) and Synaptic Metaplasticity (Laborieux et al. 2021), one online step per
 * labelled example (batch size 1), as bimu.engine.sign.sign_train computes it.
 *
 * Network (bimu.nn.sign_linear.SignMLP): sizes[0] -> ... -> sizes[L]; latent real weights W_h
 * (row-major [out][in] per layer, layers one after another: bimu.engine.dense.offsets), binary weights
 * sign(W_h) with sign(0) = +1 and the identity straight-through estimator, no bias; hidden
 * activation sign (hard-tanh estimator 1[|a| <= 1]) or the Reverse Binary Gate 1[|a| > gate]
 * (hp.gate > 0). Synaptic Metaplasticity adds an online batch norm after every layer, logits
 * included: running mean and variance take in the example first (momentum bn_momentum), then
 * normalise it, y = (z - m) / sqrt(v + eps) * gamma + beta. Loss: cross-entropy.
 * Update: metaplastic Adam (bimu.optim.metaplastic_adam) on every latent weight - AdamW with the clip
 * to [-1, 1] for STE; L2 weight decay and the attenuation f = 1 - tanh^2(m |W_h|) = 4q / (1 + q)^2,
 * q = exp(-2 m |W_h|), of steps that shrink |W_h| for Synaptic Metaplasticity - and plain Adam on the
 * norms' gamma and beta (the order of bimu.engine.sign: NP[2 boff[l] ..] gamma, then beta).
 *
 * Precision: float by default, double with -DBIMU_SIGN_DOUBLE. The float build computes exp with
 * the engine's float32 polynomial (bimu.engine.scalar.fexp: only + - * and bit operations), so a
 * build with the same flags (-std=c99 -ffp-contract=off) gives the same bits on every IEEE-754
 * target; the double build calls the C library's exp (the engine's float64 exp on the host). Adam's
 * bias corrections 1 - beta^t are computed in double by repeated squaring (no pow).
 *
 * No allocation: the caller passes one array of bimu_sign_buffer_reals(L, sizes) reals that holds
 * the whole state and scratch (sizeof(bimu_sign_real) times that many bytes).
 *
 *     static bimu_sign_real buf[BIMU_SIGN_BUFFER_REALS(P, U)];   P weights, U = sizes[1] + ... + sizes[L]
 *     bimu_sign_learner S;
 *     bimu_sign_hparams hp;
 *     bimu_sign_hparams_ste(&hp, 0.003, 0.0, 1);                  (or bimu_sign_hparams_synmeta)
 *     bimu_sign_init(&S, L, sizes, &hp, buf, initial_latent_weights);
 *     bimu_sign_learn(&S, x, y);                                  one online step
 *     bimu_sign_logits(&S, x, logits);                            prediction (no statistics update)
 */
#ifndef BIMU_SIGN_LEARN_H
#define BIMU_SIGN_LEARN_H

#include <stdint.h>

#ifdef BIMU_SIGN_DOUBLE
typedef double bimu_sign_real;
#else
typedef float bimu_sign_real;
#endif

#define BIMU_SIGN_MAX_LAYERS 8
/* Reals of the state and scratch of a network with P weights and U units: W_h and its two Adam
 * moments (3 P); norms' gamma/beta and their moments (6 U); running mean and variance (2 U); the
 * forward and backward values z, a, h, dy and 1/sqrt(v + eps) (5 U); the norms' gradient (2 U). */
#define BIMU_SIGN_BUFFER_REALS(P, U) (3 * (P) + 15 * (U))

typedef struct {
    double lr, metaplasticity, weight_decay, beta1, beta2, eps, bn_momentum, bn_eps, gate;
    int decoupled; /* 1: AdamW decay w <- w (1 - lr wd); 0: L2, g <- g + wd w */
    int clip;      /* 1: clip W_h to [-1, 1] after each step */
    int norm;      /* 1: online batch norm after every layer (Synaptic Metaplasticity) */
} bimu_sign_hparams;

typedef struct {
    int n_layers;
    int32_t sizes[BIMU_SIGN_MAX_LAYERS + 1];
    int32_t woff[BIMU_SIGN_MAX_LAYERS + 1], boff[BIMU_SIGN_MAX_LAYERS + 1];
    bimu_sign_hparams hp;
    uint64_t adam_step; /* steps taken (Adam's t of the next step is adam_step + 1) */
    bimu_sign_real *wh, *mw, *vw;          /* [P] latent weights, Adam moments */
    bimu_sign_real *np_, *mn, *vn, *gn;     /* [2U] norms' gamma/beta, moments, gradient */
    bimu_sign_real *rm, *rv;               /* [U] running mean and variance */
    bimu_sign_real *z, *a, *h, *dy, *inv;  /* [U] scratch of one step */
} bimu_sign_learner;

/* STE: AdamW (decoupled weight decay), optional clip, no norm, sign activations. Adam's betas
 * (0.9, 0.999) and eps 1e-8 (bimu.engine.fused_sign), as for every setter here. */
void bimu_sign_hparams_ste(bimu_sign_hparams *hp, double lr, double weight_decay, int clip);
/* Synaptic Metaplasticity: metaplastic Adam with L2 weight decay, online batch norm (momentum
 * bn_momentum, eps 1e-5), hidden activation sign (gate = 0) or the Reverse Binary Gate (gate > 0). */
void bimu_sign_hparams_synmeta(bimu_sign_hparams *hp, double lr, double metaplasticity, double weight_decay,
                               double bn_momentum, double gate);
/* Reals of the buffer bimu_sign_init needs (BIMU_SIGN_BUFFER_REALS of the network). */
long bimu_sign_buffer_reals(int n_layers, const int32_t *sizes);
/* Lay the state out in buf, copy wh0 (P latent weights; NULL: all 0) and reset Adam and the norms
 * (gamma 1, beta 0, running mean 0, variance 1). Returns 0, or -1 if the network is not supported
 * (1 <= n_layers <= BIMU_SIGN_MAX_LAYERS, sizes >= 1). */
int bimu_sign_init(bimu_sign_learner *S, int n_layers, const int32_t *sizes, const bimu_sign_hparams *hp,
                   bimu_sign_real *buf, const bimu_sign_real *wh0);
/* One online step on the example (x [sizes[0]], label y): forward (the norms take in x), backward,
 * metaplastic Adam on every latent weight and on the norms. */
void bimu_sign_learn(bimu_sign_learner *S, const bimu_sign_real *x, int y);
/* Logits [sizes[L]] of x with the current weights and statistics (nothing is updated). */
void bimu_sign_logits(bimu_sign_learner *S, const bimu_sign_real *x, bimu_sign_real *logits);
/* FNV-1a 64 over the bytes of the latent weights (as bimu_lambda_hash over lambda). */
uint64_t bimu_sign_weights_hash(const bimu_sign_learner *S);

#endif /* BIMU_SIGN_LEARN_H */
