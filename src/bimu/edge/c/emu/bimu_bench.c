/*
 * bimu_bench.c - the benchmark program of bimu.edge.emulate: one learner (BiMU or BayesBiNN from
 * bimu_learn.c, STE or Synaptic Metaplasticity from bimu_sign_learn.c) on one network, with the
 * configuration of the generated header "bimu_bench_config.h" (macros: BENCH_KIND 0 BiMU, 1 BayesBiNN,
 * 2 STE, 3 Synaptic Metaplasticity; sizes, counts, keys, hyperparameters) and the initial state and
 * examples of "bimu_bench_data.h" (arrays bench_w0, bench_x, bench_y, bench_query_keys, bench_hp).
 *
 * It prints, one line each (all numbers decimal unless marked hex):
 *     BENCH overhead TICKS                          an empty measurement (the counter's own cost)
 *     BENCH infer TICKS                             one prediction: BiMU / BayesBiNN one hard MC sample
 *                                                   (bimu_logits, K = 1), STE / Syn. Meta. bimu_sign_logits
 *     BENCH logits HEX...                           the bits of the last prediction's logits
 *     BENCH train TICKS                             one training step (bimu_learn / bimu_sign_learn)
 *     BENCH hash HEX                                FNV-1a 64 of lambda / the latent weights at the end
 *     BENCH done
 * TICKS are SysTick ticks (40 instructions each under QEMU -icount shift=0, see mps2_startup.c); a host
 * build (host_platform.c) prints 0 ticks and the same logits and hash.
 */
#include <stdint.h>

#include "bimu_bench_config.h"
#include "bimu_emu.h"

#if BENCH_KIND <= 1
#include "bimu_learn.h"
typedef bimu_real bench_real;
static bimu_learner learner;
#else
#include "bimu_sign_learn.h"
typedef bimu_sign_real bench_real;
static bimu_sign_learner learner;
static bimu_sign_real state_buf[BIMU_SIGN_BUFFER_REALS(BENCH_N_PARAMS, BENCH_N_UNITS)];
#endif

#include "bimu_bench_data.h"

static void put_u64(uint64_t v, int hex) {
    char b[24];
    int i = 23;
    b[i] = 0;
    do {
        unsigned d = (unsigned)(hex ? v & 15u : v % 10u);
        b[--i] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
        v = hex ? v >> 4 : v / 10u;
    } while (v);
    bimu_emu_puts(b + i);
}

static void put_line(const char *what, uint64_t v, int hex) {
    bimu_emu_puts("BENCH ");
    bimu_emu_puts(what);
    bimu_emu_puts(" ");
    put_u64(v, hex);
    bimu_emu_puts("\n");
}

static uint64_t bits_of(bench_real v) {
    union { bench_real r; uint64_t u64; uint32_t u32; } b;
    b.u64 = 0;
    b.r = v;
    return sizeof(bench_real) == 4 ? (uint64_t)b.u32 : b.u64;
}

int main(void) {
    static bench_real logits[BENCH_N_OUT];
    uint32_t t;
    bimu_emu_counter_start();
    t = bimu_emu_ticks();
    put_line("overhead", t, 0);
#if BENCH_KIND <= 1
    {
        bimu_hparams hp;
        hp.c0 = bench_hp[0]; hp.c1 = bench_hp[1]; hp.c2 = bench_hp[2]; hp.c3 = bench_hp[3];
        hp.c4 = bench_hp[4]; hp.c5 = bench_hp[5]; hp.gate = bench_hp[6]; hp.ln_eps = bench_hp[7];
        bimu_init(&learner, bench_w0, &hp, BENCH_TRAIN_KEY, BENCH_EVAL_KEY, 0, 0);
    }
#else
    {
        bimu_sign_hparams hp;
        static const int32_t sizes[BENCH_N_LAYERS + 1] = BENCH_SIZES;
#if BENCH_KIND == 2
        bimu_sign_hparams_ste(&hp, BENCH_LR, BENCH_WEIGHT_DECAY, BENCH_CLIP);
#else
        bimu_sign_hparams_synmeta(&hp, BENCH_LR, BENCH_METAPLASTICITY, BENCH_WEIGHT_DECAY, BENCH_BN_MOMENTUM,
                                  BENCH_GATE);
#endif
        if (bimu_sign_init(&learner, BENCH_N_LAYERS, sizes, &hp, state_buf, bench_w0)) {
            bimu_emu_puts("BENCH error unsupported network\n");
            return 2;
        }
    }
#endif
    for (int r = 0; r < BENCH_INFER_REPEATS; r++) {
        const bench_real *x = bench_x + (long)(r % BENCH_N_EXAMPLES) * BENCH_N_IN;
        bimu_emu_counter_start();
#if BENCH_KIND <= 1
        bimu_logits(&learner, x, bench_query_keys[r], 1, logits);
#else
        bimu_sign_logits(&learner, x, logits);
#endif
        t = bimu_emu_ticks();
        put_line("infer", t, 0);
    }
    bimu_emu_puts("BENCH logits");
    for (int c = 0; c < BENCH_N_OUT; c++) {
        bimu_emu_puts(" ");
        put_u64(bits_of(logits[c]), 1);
    }
    bimu_emu_puts("\n");
    for (int s = 0; s < BENCH_TRAIN_STEPS; s++) {
        const bench_real *x = bench_x + (long)(s % BENCH_N_EXAMPLES) * BENCH_N_IN;
        const int y = bench_y[s % BENCH_N_EXAMPLES];
        bimu_emu_counter_start();
#if BENCH_KIND <= 1
        bimu_learn(&learner, x, y);
#else
        bimu_sign_learn(&learner, x, y);
#endif
        t = bimu_emu_ticks();
        put_line("train", t, 0);
    }
#if BENCH_KIND <= 1
    put_line("hash", bimu_lambda_hash(&learner), 1);
#else
    put_line("hash", bimu_sign_weights_hash(&learner), 1);
#endif
    bimu_emu_puts("BENCH done\n");
    return 0;
}
