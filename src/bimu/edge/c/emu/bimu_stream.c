/*
 * bimu_stream.c - an active stream on the device, the program of bimu.edge.emulate.run_stream: the C
 * learner of bimu_learn.c (its "bimu_config.h") starts from the state of "bimu_stream_data.h" (macros
 * STREAM_N examples, STREAM_K hard samples per query decision, STREAM_NEED dissent to ask, keys and the
 * training step; arrays stream_w0, stream_hp, stream_x, stream_y, stream_keys) and, per example, predicts
 * and decides with bimu_observe and learns with bimu_learn only when it asked, as a firmware does.
 *
 * It prints, one line each:
 *     STREAM asked 0110...          one character per example: 1 = its label was asked for and learned
 *     STREAM right COUNT            examples predicted right before their label (if any) was used
 *     STREAM hash HEX               FNV-1a 64 of lambda at the end
 *     STREAM done
 */
#include <stdint.h>

#include "bimu_emu.h"
#include "bimu_learn.h"

#include "bimu_stream_data.h"

static bimu_learner learner;

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

int main(void) {
    static const int sizes[] = BIMU_SIZES;
    static char line[65];
    bimu_hparams hp;
    uint64_t right = 0;
    int n = 0;
    hp.c0 = (bimu_real)stream_hp[0];
    hp.c1 = (bimu_real)stream_hp[1];
    hp.c2 = (bimu_real)stream_hp[2];
    hp.c3 = (bimu_real)stream_hp[3];
    hp.c4 = (bimu_real)stream_hp[4];
    hp.c5 = (bimu_real)stream_hp[5];
    hp.gate = (bimu_real)stream_hp[6];
    hp.ln_eps = (bimu_real)stream_hp[7];
    bimu_init(&learner, stream_w0, &hp, STREAM_TRAIN_KEY, STREAM_EVAL_KEY, 0, STREAM_TRAIN_STEP);
    bimu_set_query(&learner, STREAM_K, STREAM_NEED);
    bimu_emu_puts("STREAM asked ");
    for (int i = 0; i < STREAM_N; i++) {
        const bimu_real *x = stream_x + (long)i * sizes[0];
        int pred;
        const int ask = bimu_observe(&learner, x, stream_keys[i], &pred);
        if (ask) bimu_learn(&learner, x, stream_y[i]);
        right += pred == stream_y[i];
        line[n++] = ask ? '1' : '0';
        if (n == 64 || i == STREAM_N - 1) {
            line[n] = 0;
            bimu_emu_puts(line);
            n = 0;
        }
    }
    bimu_emu_puts("\nSTREAM right ");
    put_u64(right, 0);
    bimu_emu_puts("\nSTREAM hash ");
    put_u64(bimu_lambda_hash(&learner), 1);
    bimu_emu_puts("\nSTREAM done\n");
    return 0;
}
