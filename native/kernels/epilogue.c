/*
 * epilogue.c - epabi_epilogue_f32 (epilogue.h): the fused activations over a float buffer, one clone per x86-64
 * level. Not an op family: registry.c has no line for it.
 */
#include "epilogue.h"

#include "math_common.h"

EPABI_SIMD_CLONES void epabi_epilogue_f32(float* v, int64_t n, int32_t kind, float alpha, float beta, float bias) {
    EPABI_EPILOGUE_LOOP(kind, alpha, beta, bias, v, n);
}
