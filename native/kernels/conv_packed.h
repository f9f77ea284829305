/*
 * conv_packed.h - Conv as an implicit GEMM on the host (conv.c's CONV_PACKED path): the weights packed once at
 * Compile into panels of EPABI_CONVP_MR output channels, the input read in place by every kernel tap, the bias and
 * the fused activation (epilogue.h) applied before the results are stored. No column matrix is built.
 *
 * Layout. Output position (oy, ox) and tap (ki, kj) read input row oy*sh + ki*dh - ph, column ox*sw + kj*dw - pw.
 * The input of one image is first rearranged (unless it already has this layout: stride 1, no padding) into a
 * zero-padded, phase-split copy xs[c][a][b][r][q] = X[c][r*sh + a - ph][q*sw + b - pw] (0 outside X), a and b the
 * row and column phases (sh*sw of them), r < R = oh + ((kh-1)*dh)/sh and q < Q = ow + ((kw-1)*dw)/sw. Every tap is
 * then one constant offset into xs from the grid position oy*Q + ox, so EPABI_CONVP_NR consecutive grid positions
 * are EPABI_CONVP_NR consecutive floats of xs for every tap: one unaligned vector load each, whatever the stride,
 * dilation or padding. Grid positions with ox >= ow are computed and thrown away (Q - ow of every Q).
 * A stride-1 conv whose padding leaves oh <= H and ow <= W (any 'same' one), window at most 16 x 16 and
 * 64 taps makes no copy: the grid is X itself (R = oh, Q = W, a tap's offset (ki*dh - ph) * W + kj*dw - pw), and the
 * lanes whose tap falls in the padding are masked off, per tile and tap, so they read nothing and count as 0. That
 * copy cost a CNN's padded 3x3 convs 4-11% of their time and did not scale with threads (memory-bound: two threads each
 * took twice as long over half the rows), and its Q = ow + kw - 1 threw away 2 of every 18 columns at 16 x 16.
 * A column-stride-2 conv (any row stride, padding and dilation) with ow >= 8 and the same window limits makes no copy
 * either: the grid is oh x ow (R = oh, Q = ow), a tile's lanes are runs within output rows, and each tap's 32 lanes
 * are the even floats of four 16-float loads from X, masked to the lanes inside X (a vector whose 8 lanes span two
 * output rows merges a second load), put in lane order by two permutes. The phase-split copy of a CNN's 3x3 stride-2
 * pad-1 convs took 40-55 us of 212-262 us at 2 threads; the CNN of bench/software_adapter.py went from 1.46x to 1.30x
 * of ORT's CPU EP at 2 threads, 1.21x to 1.14x at 1.
 *
 * Work. A product W_g[mg, kdim] x B[kdim, oh*Q] per (image, group), kdim = cg*kh*kw taps, in tiles of MR channels x
 * NR positions held in registers over the whole kdim loop. Tasks of the EP's pool take (group, block of channel
 * panels, run of position tiles): a block of panels is sized to stay in L2 while its tiles pass, so magika's
 * 2.6 MB of weights are read from memory once, not once per tile.
 *
 * Available on x86-64 CPUs with AVX-512F (checked at run time); elsewhere conv.c keeps its im2col path.
 * Thread-safety: pure functions over caller-owned buffers.
 */
#ifndef EPABI_CONV_PACKED_H
#define EPABI_CONV_PACKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "launch_args.h"

enum { EPABI_CONVP_MR = 8, EPABI_CONVP_NR = 32 };

/* Whether this CPU runs the packed path (x86-64 with AVX-512F and the OS saving its registers; read once). */
bool epabi_convp_supported(void);

/* Floats of W packed for the path: group * ceil(mg / MR) panels of kdim * MR floats. */
size_t epabi_convp_packed_floats(int64_t group, int64_t mg, int64_t kdim);

/* W [group * mg, kdim] (row-major, as ONNX lays out [M, C/group, kh, kw]) into panels: group g's panel p holds, for
 * each tap k, the MR weights of channels g*mg + p*MR .. (zero past mg). out has epabi_convp_packed_floats floats. */
void epabi_convp_pack(const float* w, int64_t group, int64_t mg, int64_t kdim, float* out);

/* Bytes of scratch a launch of L needs (the rearranged input of one image, the tap offsets, W packed when it is no
 * constant), or 0 when the path cannot take L (offsets past int32, kdim 0). */
size_t epabi_convp_scratch_bytes(const struct conv_launch* L);

/* The launch of L->path == CONV_PACKED on the host: Y = act(conv(X, W) + bias), over L->pool. */
void epabi_convp_launch(const struct conv_launch* L);

#endif
