/*
 * bimu_state.h - a learner's state as a stream of bytes, to read what a device learned back on the host
 * (`bimu import-device RUN STATE --out DIR`, then `bimu evaluate DIR`), or to keep it in flash and
 * resume from it after a reset (bimu_state_load).
 *
 * Format 1 (every integer little-endian, reals IEEE 754 little-endian, whatever the core's byte order):
 *     offset  size  field
 *          0     8  magic "BIMUSTAT"
 *          8     4  format version (1)
 *         12     4  header bytes (152)
 *         16     4  bytes per real: 4 (float32 build) or 8 (float64 build)
 *         20     4  flags: bit 0 BayesBiNN, bit 1 Reverse Binary Gate (else sign), bit 2 LayerNorm on logits
 *         24     4  L, the number of layers (1 .. BIMU_STATE_MAX_LAYERS)
 *         28    36  sizes[0 .. L] (the rest 0)
 *         64     4  P, the number of parameters
 *         68     4  K, relaxed samples per training step
 *         72     4  hard samples of a query decision
 *         76     4  votes of dissent that ask for a label
 *         80    56  train_key, eval_key, query_key, train_step, examples_seen, updates_applied,
 *                   labels_queried (7 x 64 bits)
 *        136     8  export id (BIMU_EXPORT_ID of the export the device started from; 0 if none)
 *        144     4  reals that follow: P (BiMU) or 2 P (BayesBiNN: lambda, then the prior)
 *        148     4  reserved (0)
 *        152        lambda[P] (then prior[P] for BayesBiNN), in the engine's layout
 *        end-8   8  FNV-1a 64 of every byte before it
 * bimu_state_dump_bytes() is the total. bimu_state_write streams the bytes through a callback (a UART,
 * a flash page writer), so the state is never copied: a firmware needs no second buffer.
 */
#ifndef BIMU_STATE_H
#define BIMU_STATE_H

#include "bimu_learn.h"

#define BIMU_STATE_VERSION 1
#define BIMU_STATE_HEADER_BYTES 152
#define BIMU_STATE_MAX_LAYERS 8

/* Receives the next n bytes of the state. */
typedef void (*bimu_state_put)(void *ctx, const unsigned char *bytes, unsigned long n);

/* Bytes of the state of this build (header + reals + checksum). */
unsigned long bimu_state_dump_bytes(void);
/* Writes the state through put(ctx, ...) in pieces of at most 64 bytes; returns the bytes written. */
unsigned long bimu_state_write(const bimu_learner *L, bimu_state_put put, void *ctx);
/* Writes the state into buf (cap bytes); returns the bytes written, or 0 if cap is too small. */
unsigned long bimu_state_dump(const bimu_learner *L, unsigned char *buf, unsigned long cap);
/* Restores a state written by this build (same configuration and precision) into L, keeping L's
 * hyperparameters (call bimu_init first). Returns 0, or a negative code: -1 too short or too long,
 * -2 bad magic or version, -3 another network, samples or precision, -4 checksum mismatch. */
int bimu_state_load(bimu_learner *L, const unsigned char *buf, unsigned long n);

#endif /* BIMU_STATE_H */
