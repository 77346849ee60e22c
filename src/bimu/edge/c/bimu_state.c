/*
 * bimu_state.c - the learner's state as bytes (format in bimu_state.h). C99, no allocation, no stdio.
 * Build it beside bimu_learn.c with the same bimu_config.h and precision flag.
 */
#include <string.h>

#include "bimu_state.h"

#ifndef BIMU_EXPORT_ID
#define BIMU_EXPORT_ID 0
#endif

#define BIMU_FNV_OFFSET 0xCBF29CE484222325ULL
#define BIMU_FNV_PRIME 0x100000001B3ULL

static const unsigned char bimu_state_magic[8] = {'B', 'I', 'M', 'U', 'S', 'T', 'A', 'T'};
static const int bimu_state_sizes[BIMU_N_LAYERS + 1] = BIMU_SIZES;

typedef struct {
    bimu_state_put put;
    void *ctx;
    uint64_t fnv;
    unsigned long n;
    unsigned char buf[64];
    unsigned int used;
} bimu_state_out;

static void out_flush(bimu_state_out *o) {
    if (o->used) o->put(o->ctx, o->buf, o->used);
    o->used = 0;
}

static void out_byte(bimu_state_out *o, unsigned char b) {
    o->fnv = (o->fnv ^ b) * BIMU_FNV_PRIME;
    o->buf[o->used++] = b;
    o->n++;
    if (o->used == sizeof o->buf) out_flush(o);
}

static void out_u32(bimu_state_out *o, uint32_t v) {
    for (int i = 0; i < 4; i++) out_byte(o, (unsigned char)(v >> (8 * i)));
}

static void out_u64(bimu_state_out *o, uint64_t v) {
    for (int i = 0; i < 8; i++) out_byte(o, (unsigned char)(v >> (8 * i)));
}

static void out_real(bimu_state_out *o, bimu_real v) {
#ifdef BIMU_DOUBLE
    uint64_t u;
    memcpy(&u, &v, 8);
    out_u64(o, u);
#else
    uint32_t u;
    memcpy(&u, &v, 4);
    out_u32(o, u);
#endif
}

static uint32_t bimu_state_flags(void) {
    return (uint32_t)(BIMU_BAYESBINN ? 1 : 0) | (uint32_t)(BIMU_ACT_GATE ? 2 : 0) | (uint32_t)(BIMU_OUTPUT_NORM ? 4 : 0);
}

static unsigned long bimu_state_reals(void) {
    return (unsigned long)BIMU_N_PARAMS * (BIMU_BAYESBINN ? 2UL : 1UL);
}

unsigned long bimu_state_dump_bytes(void) {
    return BIMU_STATE_HEADER_BYTES + bimu_state_reals() * (unsigned long)sizeof(bimu_real) + 8UL;
}

unsigned long bimu_state_write(const bimu_learner *L, bimu_state_put put, void *ctx) {
    bimu_state_out o;
    o.put = put;
    o.ctx = ctx;
    o.fnv = BIMU_FNV_OFFSET;
    o.n = 0;
    o.used = 0;
    for (int i = 0; i < 8; i++) out_byte(&o, bimu_state_magic[i]);
    out_u32(&o, BIMU_STATE_VERSION);
    out_u32(&o, BIMU_STATE_HEADER_BYTES);
    out_u32(&o, (uint32_t)sizeof(bimu_real));
    out_u32(&o, bimu_state_flags());
    out_u32(&o, BIMU_N_LAYERS);
    for (int l = 0; l <= BIMU_STATE_MAX_LAYERS; l++) out_u32(&o, l <= BIMU_N_LAYERS ? (uint32_t)bimu_state_sizes[l] : 0u);
    out_u32(&o, BIMU_N_PARAMS);
    out_u32(&o, BIMU_K);
    out_u32(&o, (uint32_t)L->query_k);
    out_u32(&o, (uint32_t)L->query_need);
    out_u64(&o, L->train_key);
    out_u64(&o, L->eval_key);
    out_u64(&o, L->query_key);
    out_u64(&o, L->train_step);
    out_u64(&o, L->examples_seen);
    out_u64(&o, L->updates_applied);
    out_u64(&o, L->labels_queried);
    out_u64(&o, (uint64_t)BIMU_EXPORT_ID);
    out_u32(&o, (uint32_t)bimu_state_reals());
    out_u32(&o, 0u);
    for (long i = 0; i < BIMU_N_PARAMS; i++) out_real(&o, L->lam[i]);
#if BIMU_BAYESBINN
    for (long i = 0; i < BIMU_N_PARAMS; i++) out_real(&o, L->prior[i]);
#endif
    {
        const uint64_t h = o.fnv;
        out_u64(&o, h);
    }
    out_flush(&o);
    return o.n;
}

typedef struct {
    unsigned char *buf;
    unsigned long at;
} bimu_state_mem;

static void put_mem(void *ctx, const unsigned char *bytes, unsigned long n) {
    bimu_state_mem *m = (bimu_state_mem *)ctx;
    memcpy(m->buf + m->at, bytes, n);
    m->at += n;
}

unsigned long bimu_state_dump(const bimu_learner *L, unsigned char *buf, unsigned long cap) {
    bimu_state_mem m;
    if (cap < bimu_state_dump_bytes()) return 0;
    m.buf = buf;
    m.at = 0;
    return bimu_state_write(L, put_mem, &m);
}

static uint32_t in_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t in_u64(const unsigned char *p) {
    return (uint64_t)in_u32(p) | (uint64_t)in_u32(p + 4) << 32;
}

static bimu_real in_real(const unsigned char *p) {
    bimu_real v;
#ifdef BIMU_DOUBLE
    const uint64_t u = in_u64(p);
#else
    const uint32_t u = in_u32(p);
#endif
    memcpy(&v, &u, sizeof v);
    return v;
}

int bimu_state_load(bimu_learner *L, const unsigned char *buf, unsigned long n) {
    uint64_t h = BIMU_FNV_OFFSET;
    const unsigned long rb = (unsigned long)sizeof(bimu_real);
    if (n != bimu_state_dump_bytes()) return -1;
    if (memcmp(buf, bimu_state_magic, 8) != 0 || in_u32(buf + 8) != BIMU_STATE_VERSION ||
        in_u32(buf + 12) != BIMU_STATE_HEADER_BYTES)
        return -2;
    if (in_u32(buf + 16) != rb || in_u32(buf + 20) != bimu_state_flags() || in_u32(buf + 24) != BIMU_N_LAYERS ||
        in_u32(buf + 64) != BIMU_N_PARAMS || in_u32(buf + 68) != BIMU_K || in_u32(buf + 144) != bimu_state_reals())
        return -3;
    for (int l = 0; l <= BIMU_N_LAYERS; l++)
        if (in_u32(buf + 28 + 4 * l) != (uint32_t)bimu_state_sizes[l]) return -3;
    for (unsigned long i = 0; i + 8 < n; i++) h = (h ^ buf[i]) * BIMU_FNV_PRIME;
    if (in_u64(buf + n - 8) != h) return -4;
    bimu_set_query(L, (int)in_u32(buf + 72), (int)in_u32(buf + 76));
    L->train_key = in_u64(buf + 80);
    L->eval_key = in_u64(buf + 88);
    L->query_key = in_u64(buf + 96);
    L->train_step = in_u64(buf + 104);
    L->examples_seen = in_u64(buf + 112);
    L->updates_applied = in_u64(buf + 120);
    L->labels_queried = in_u64(buf + 128);
    for (long i = 0; i < BIMU_N_PARAMS; i++) L->lam[i] = in_real(buf + BIMU_STATE_HEADER_BYTES + (unsigned long)i * rb);
#if BIMU_BAYESBINN
    for (long i = 0; i < BIMU_N_PARAMS; i++)
        L->prior[i] = in_real(buf + BIMU_STATE_HEADER_BYTES + (unsigned long)(BIMU_N_PARAMS + i) * rb);
#endif
    bimu_sync(L);
    return 0;
}
