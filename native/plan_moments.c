/*
 * plan_moments.c - moments fusion (kernels/moments.h), a pass epabi_plan_build (plan_build.c) runs before the schedule
 * and the elementwise chains: S1 = ReduceSum(X, A) and S2 = ReduceSum(Mul(X, X), A) over equal specs (the same axes
 * attribute, or the same axes input value or equal constant ones; keepdims and noop_with_empty_axes alike) become one
 * moments step reading X once. The Mul's output must be a float32 intermediate that only S2's ReduceSum reads (no
 * fused output), so it never exists; S1 and S2 are still written, fused outputs or not. Before the chains run, so
 * the Mul is not taken into a chain first.
 *
 * The fused step reads only X and the axes both ReduceSums read already, so no cycle can form. The pass works on the
 * plan in place before it is shared (plan.h), so it takes no lock.
 */
#include "plan_internal.h"

#include <stdlib.h>
#include <string.h>

#include "moments.h"
#include "reduce.h"

/* The ReduceSum spec of step si when it may be part of a pair: a device (or host-backend) ReduceSum of one float32
 * output and no epilogue; else NULL. */
static const struct epabi_reduce_spec* sum_spec(const struct epabi_plan* p, int si) {
    const struct plan_step* s = &p->steps[si];
    if (s->kernel->reduce_spec == NULL || s->on_host || s->n_out != 1 || s->n_in < 1 || s->in[0] < 0 ||
        s->epilogue != EPABI_EPILOGUE_NONE || p->values[s->out[0]].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        return NULL;
    const struct epabi_reduce_spec* spec = s->kernel->reduce_spec(s->state);
    return spec != NULL && spec->op == REDUCE_SUM ? spec : NULL;
}

/* The axes input of a ReduceSum step, -1 when absent. */
static int axes_of(const struct plan_step* s) { return s->n_in >= 2 ? s->in[1] : -1; }

/* Whether two axes inputs are the same axes: one value, both absent, or int64 constants of equal contents. */
static bool same_axes(const struct epabi_plan* p, int a, int b) {
    if (a == b) return true;
    if (a < 0 || b < 0) return false;
    const struct plan_value* va = &p->values[a];
    const struct plan_value* vb = &p->values[b];
    if (va->kind != VK_CONST || vb->kind != VK_CONST || va->tensor.dtype != vb->tensor.dtype ||
        va->tensor.rank != vb->tensor.rank || va->tensor.host == NULL || vb->tensor.host == NULL)
        return false;
    for (int d = 0; d < va->tensor.rank; ++d)
        if (va->tensor.dims[d] != vb->tensor.dims[d]) return false;
    const size_t bytes = (size_t)epabi_numel(va->tensor.rank, va->tensor.dims) * epabi_dtype_size(va->tensor.dtype);
    return memcmp(va->tensor.host, vb->tensor.host, bytes) == 0;
}

/* The Mul step squaring X whose square only the ReduceSum r2 reads, as its data; -1 when its data is not one. */
static int square_of(const struct epabi_plan* p, int r2) {
    const int sq = p->steps[r2].in[0];
    const struct plan_value* v = &p->values[sq];
    if (v->kind != VK_INNER || v->output_index >= 0 || v->producer < 0 || v->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        return -1;
    const struct plan_step* m = &p->steps[v->producer];
    if (!m->kernel->product || m->on_host || m->n_in != 2 || m->n_out != 1 || m->in[0] < 0 || m->in[0] != m->in[1] ||
        m->epilogue != EPABI_EPILOGUE_NONE || p->values[m->in[0]].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        return -1;
    return epabi_plan_readers(p, sq) == 1 ? v->producer : -1;
}

OrtStatus* epabi_plan_fuse_moments(struct epabi_plan* p) {
    for (int r2 = 0; r2 < p->n_steps; ++r2) {
        const struct epabi_reduce_spec* spec2 = sum_spec(p, r2);
        if (spec2 == NULL) continue;
        const int mi = square_of(p, r2);
        if (mi < 0) continue;
        const int x = p->steps[mi].in[0];
        int r1 = -1;
        for (int si = 0; si < p->n_steps && r1 < 0; ++si) {
            const struct epabi_reduce_spec* spec1 = si != r2 ? sum_spec(p, si) : NULL;
            if (spec1 != NULL && p->steps[si].in[0] == x && epabi_reduce_spec_same(spec1, spec2) &&
                same_axes(p, axes_of(&p->steps[si]), axes_of(&p->steps[r2])))
                r1 = si;
        }
        if (r1 < 0) continue;
        struct epabi_reduce_spec* state = malloc(sizeof *state);
        char* op_type = strdup("ReduceSum+Mul+ReduceSum");
        if (state == NULL || op_type == NULL) {
            free(state);
            free(op_type);
            return epabi_plan_oom(p, "moments step");
        }
        *state = *spec2;
        /* r1 becomes the moments step (keeping its node name for messages): X and the axes in, S1 and S2 out */
        struct plan_step* s = &p->steps[r1];
        const int s2 = p->steps[r2].out[0];
        if (s->state != NULL && s->kernel->release != NULL) s->kernel->release(s->state);
        free(s->op_type);
        s->kernel = &epabi_kernel_moments;
        s->state = state;
        s->op_type = op_type;
        s->n_out = 2;
        s->out[1] = s2;
        p->values[s2].producer = r1;
        p->n_moments++;
        /* the later one first, so the earlier index stays valid */
        const int first = mi < r2 ? mi : r2, second = mi < r2 ? r2 : mi;
        r1 = epabi_plan_drop_into(p, second, r1);
        r1 = epabi_plan_drop_into(p, first, r1);
        r2 = -1;   /* indices moved: start over (plans are small, pairs few) */
    }
    return NULL;
}
