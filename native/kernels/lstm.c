/*
 * lstm.c - LSTM (opsets 7-22) on float32 as PyTorch exports it: direction forward, reverse or bidirectional,
 * optional B, initial_h, initial_c and peepholes P, outputs Y, Y_h, Y_c each optional.
 *
 * With the gates in ONNX's order i, o, f, c and f = Sigmoid, g = h = Tanh (the defaults):
 *   i = f(Xt Wi^T + Ht-1 Ri^T + Wbi + Rbi + Pi * Ct-1)     ft = f(... f ... + Pf * Ct-1)
 *   c = g(Xt Wc^T + Ht-1 Rc^T + Wbc + Rbc)                 Ct = ft * Ct-1 + i * c
 *   o = f(Xt Wo^T + Ht-1 Ro^T + Wbo + Rbo + Po * Ct)       Ht = o * h(Ct)
 * Per direction one product X W^T covers every step; each step then adds Ht-1 R^T. The backward direction
 * walks the sequence from its end and stores Ht at Y's step t. Y_h / Y_c are the states after the last step
 * taken (absent initial states are zeros); with seq_length 0 they are zeros, as ORT's CPU EP gives for Y_h.
 *
 * Claimed only exactly: layout 0, input_forget 0, no clip, no activations / activation_alpha / activation_beta
 * attributes, and no sequence_lens input; anything else is refused. ORT's CPU EP refuses layout 1 too.
 */
#include "math_common.h"
#include "cuda_coverage.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum lstm_direction { LSTM_FORWARD, LSTM_REVERSE, LSTM_BIDIRECTIONAL };

struct lstm_state {
    int64_t hidden;
    enum lstm_direction direction;
    bool want[3];   /* Y, Y_h, Y_c wired */
};

static inline float lstm_sigmoid(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    const float e = expf(x);
    return e / (1.0f + e);
}

/* One step of direction d at time t: gates already hold Ht-1 R^T; h and c are updated in place. */
static void lstm_cell(const struct lstm_launch* L, int d, int64_t t) {
    const int64_t H = L->hidden, G = 4 * H;
    const float* xw = L->xw + t * L->batch * G;
    const float* wb = L->b != NULL ? L->b + d * 2 * G : NULL;
    const float* p = L->p != NULL ? L->p + d * 3 * H : NULL;
    for (int64_t bi = 0; bi < L->batch; ++bi) {
        const float* gx = xw + bi * G;
        const float* gh = L->gates + bi * G;
        float* h = L->h + bi * H;
        float* c = L->c + bi * H;
        float* y = L->y != NULL ? L->y + ((t * L->dirs + d) * L->batch + bi) * H : NULL;
        for (int64_t j = 0; j < H; ++j) {
            float a[4];
            for (int q = 0; q < 4; ++q) {
                a[q] = gx[q * H + j] + gh[q * H + j];
                if (wb != NULL) a[q] += wb[q * H + j] + wb[G + q * H + j];
            }
            const float cp = c[j];
            const float ig = lstm_sigmoid(a[0] + (p != NULL ? p[j] * cp : 0.0f));
            const float fg = lstm_sigmoid(a[2] + (p != NULL ? p[2 * H + j] * cp : 0.0f));
            const float cn = fg * cp + ig * tanhf(a[3]);
            const float og = lstm_sigmoid(a[1] + (p != NULL ? p[H + j] * cn : 0.0f));
            const float hn = og * tanhf(cn);
            c[j] = cn;
            h[j] = hn;
            if (y != NULL) y[j] = hn;
        }
    }
}

static void lstm_launch_fn(const void* p) {
    const struct lstm_launch* L = p;
    const int64_t H = L->hidden, G = 4 * H, state = L->batch * H;
    for (int d = 0; d < L->dirs; ++d) {
        const bool backward = d == 1 || L->reverse;
        epabi_sgemm(false, true, L->seq * L->batch, G, L->input, 1.0f, L->x, L->input, L->w + d * G * L->input,
                    L->input, 0.0f, L->xw, G, L->pack);
        for (int64_t k = 0; k < state; ++k) {
            L->h[k] = L->init_h != NULL ? L->init_h[d * state + k] : 0.0f;
            L->c[k] = L->init_c != NULL ? L->init_c[d * state + k] : 0.0f;
        }
        for (int64_t s = 0; s < L->seq; ++s) {
            const int64_t t = backward ? L->seq - 1 - s : s;
            epabi_sgemm(false, true, L->batch, G, H, 1.0f, L->h, H, L->r + d * G * H, H, 0.0f, L->gates, G, L->pack);
            lstm_cell(L, d, t);
        }
        if (L->y_h != NULL) memcpy(L->y_h + d * state, L->h, sizeof(float) * (size_t)state);
        if (L->y_c != NULL) memcpy(L->y_c + d * state, L->c, sizeof(float) * (size_t)state);
    }
}

static bool lstm_output_wired(const struct epabi_node* node, int i) {
    if (i >= node->n_out) return false;
    const struct epabi_value_desc* d = &node->out[i];
    return d->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED || (d->name != NULL && d->name[0] != '\0');
}

/* Reads the attributes into s; false with a reason for anything outside what this kernel computes exactly. */
static bool lstm_parse(const struct epabi_node* node, struct lstm_state* s, char* why, size_t why_len) {
    memset(s, 0, sizeof *s);
    if (!epabi_attr_int(node, "hidden_size", &s->hidden) || s->hidden < 1 || s->hidden > INT32_MAX / 4) {
        snprintf(why, why_len, "LSTM: hidden_size must be given and in [1, %d]", INT32_MAX / 4);
        return false;
    }
    char dir[32] = "forward";
    epabi_attr_string(node, "direction", dir, sizeof dir);
    if (strcmp(dir, "forward") == 0) {
        s->direction = LSTM_FORWARD;
    } else if (strcmp(dir, "reverse") == 0) {
        s->direction = LSTM_REVERSE;
    } else if (strcmp(dir, "bidirectional") == 0) {
        s->direction = LSTM_BIDIRECTIONAL;
    } else {
        snprintf(why, why_len, "LSTM: direction='%s' is not forward, reverse or bidirectional", dir);
        return false;
    }
    const char* ints[] = {"layout", "input_forget"};
    for (size_t i = 0; i < 2; ++i) {
        int64_t v = 0;
        if (epabi_attr_int(node, ints[i], &v) && v != 0) {
            snprintf(why, why_len, "LSTM: %s=%lld; only 0 is implemented", ints[i], (long long)v);
            return false;
        }
    }
    const char* absent[] = {"clip", "activations", "activation_alpha", "activation_beta"};
    for (size_t i = 0; i < 4; ++i) {
        if (epabi_attr_has(node, absent[i])) {
            snprintf(why, why_len, "LSTM: the %s attribute is not implemented (only the default activations, "
                     "without clip)", absent[i]);
            return false;
        }
    }
    for (int i = 0; i < 3; ++i) s->want[i] = lstm_output_wired(node, i);
    return true;
}

static bool lstm_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in < 3 || node->n_in > 8 || node->n_out < 1 || node->n_out > 3) {
        snprintf(why, why_len, "LSTM: expected 3-8 inputs and 1-3 outputs, got %d and %d", node->n_in, node->n_out);
        return false;
    }
    if (epabi_desc_present(node, 4)) {
        snprintf(why, why_len, "LSTM: the sequence_lens input is not implemented");
        return false;
    }
    const char* names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
    for (int i = 0; i < node->n_in; ++i) {
        if (i == 4 || (i >= 3 && !epabi_desc_present(node, i))) continue;
        if (node->in[i].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
            snprintf(why, why_len, "LSTM: %s has dtype %s; only float is implemented", names[i],
                     epabi_dtype_name(node->in[i].dtype));
            return false;
        }
    }
    if (node->in[0].rank >= 0 && node->in[0].rank != 3) {
        snprintf(why, why_len, "LSTM: X has rank %d; it must be [seq_length, batch_size, input_size]",
                 node->in[0].rank);
        return false;
    }
    struct lstm_state s;
    return lstm_parse(node, &s, why, why_len);
}

static OrtStatus* lstm_init(const struct epabi_node* node, void** state) {
    struct lstm_state* s = malloc(sizeof *s);
    if (s == NULL) return epabi_error(node->api, ORT_FAIL, "LSTM: out of memory");
    char why[256];
    if (!lstm_parse(node, s, why, sizeof why)) {
        free(s);
        return epabi_error(node->api, ORT_INVALID_ARGUMENT, "%s", why);
    }
    *state = s;
    return NULL;
}

/* Whether T has exactly the dims want[0..rank). */
static bool lstm_shape_is(const struct epabi_tensor* T, int rank, const int64_t* want) {
    if (T->rank != rank) return false;
    for (int i = 0; i < rank; ++i)
        if (T->dims[i] != want[i]) return false;
    return true;
}

static OrtStatus* lstm_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                           int n_out) {
    const struct lstm_state* s = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < 3) return epabi_error(api, ORT_INVALID_ARGUMENT, "LSTM: expected at least 3 inputs, got %d", n_in);
    const struct epabi_tensor* X = in[0];
    const struct epabi_tensor* opt[8] = {in[0], in[1], in[2]};
    for (int i = 3; i < 8; ++i) opt[i] = epabi_opt_input(in, n_in, i);
    if (opt[4] != NULL) return epabi_error(api, ORT_INVALID_ARGUMENT, "LSTM: sequence_lens is not implemented");
    const char* names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
    char sx[160], so[160], sw[160];
    for (int i = 0; i < 8; ++i)
        if (opt[i] != NULL && opt[i]->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "LSTM: %s has dtype %s; only float is implemented",
                               names[i], epabi_dtype_name(opt[i]->dtype));
    if (X->rank != 3)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "LSTM: X %s must be [seq_length, batch_size, input_size]",
                           epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    const int64_t dirs = s->direction == LSTM_BIDIRECTIONAL ? 2 : 1, H = s->hidden;
    const int64_t seq = X->dims[0], batch = X->dims[1], input = X->dims[2];
    const int64_t want[8][3] = {
        {0}, {dirs, 4 * H, input}, {dirs, 4 * H, H}, {dirs, 8 * H}, {0}, {dirs, batch, H}, {dirs, batch, H},
        {dirs, 3 * H},
    };
    const int ranks[8] = {3, 3, 3, 2, 0, 3, 3, 2};
    for (int i = 1; i < 8; ++i) {
        if (i == 4 || opt[i] == NULL || lstm_shape_is(opt[i], ranks[i], want[i])) continue;
        return epabi_error(api, ORT_INVALID_ARGUMENT, "LSTM: %s %s must be %s (hidden_size=%lld, X %s)", names[i],
                           epabi_shape_str(so, sizeof so, opt[i]->rank, opt[i]->dims),
                           epabi_shape_str(sw, sizeof sw, ranks[i], want[i]), (long long)H,
                           epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    }

    struct lstm_launch L;
    memset(&L, 0, sizeof L);
    OrtStatus* st = NULL;
    const int64_t y_dims[4] = {seq, dirs, batch, H}, state_dims[3] = {dirs, batch, H};
    float** dst[3] = {&L.y, &L.y_h, &L.y_c};
    for (int i = 0; i < 3; ++i) {
        if (!s->want[i] || i >= n_out) continue;
        struct epabi_tensor* T = i == 0 ? epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, 4, y_dims, &st)
                                        : epabi_exec_output(ex, i, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, 3, state_dims,
                                                            &st);
        if (T == NULL) return st;
        *dst[i] = T->data;
    }
    if (batch == 0 || (L.y_h == NULL && L.y_c == NULL && (L.y == NULL || seq == 0))) return NULL;
    L.x = X->data;
    L.w = opt[1]->data;
    L.r = opt[2]->data;
    L.b = opt[3] != NULL ? opt[3]->data : NULL;
    /* With no steps ORT's CPU EP gives a zero Y_h, not initial_h (and leaves Y_c unwritten): zeros for both. */
    L.init_h = opt[5] != NULL && seq > 0 ? opt[5]->data : NULL;
    L.init_c = opt[6] != NULL && seq > 0 ? opt[6]->data : NULL;
    L.p = opt[7] != NULL ? opt[7]->data : NULL;
    L.seq = seq;
    L.batch = batch;
    L.input = input;
    L.hidden = H;
    L.dirs = (int32_t)dirs;
    L.reverse = s->direction == LSTM_REVERSE;
    const size_t f = sizeof(float);
    const size_t bytes[4] = {(size_t)(seq * batch * 4 * H) * f, (size_t)(batch * 4 * H) * f, (size_t)(batch * H) * f,
                             (size_t)(batch * H) * f};
    float** scratch[4] = {&L.xw, &L.gates, &L.h, &L.c};
    for (int i = 0; i < 4; ++i) {
        if (bytes[i] == 0) continue;   /* seq == 0: no xw */
        *scratch[i] = epabi_exec_scratch(ex, bytes[i], &st);
        if (*scratch[i] == NULL) return st;
    }
    size_t pack = epabi_sgemm_scratch_bytes(seq * batch, 4 * H, input);
    const size_t step_pack = epabi_sgemm_scratch_bytes(batch, 4 * H, H);
    if (step_pack > pack) pack = step_pack;
    if (pack > 0) {
        L.pack = epabi_exec_scratch(ex, pack, &st);
        if (L.pack == NULL) return st;
    }
    return epabi_exec_launch(ex, EPABI_LAUNCH_LSTM, lstm_launch_fn, &L, sizeof L);
}

/* Opset 7 dropped the output_sequence attribute; 14 added layout; 22 only dtypes. CUDA: the GEMMs through
 * epabi_cuda_sgemm (cuBLAS) and lstm_cell_f32, every input float (supports() checked them). */
const struct epabi_kernel epabi_kernels_lstm[] = {
    {.op_type = "LSTM", .since_min = 7, .since_max = 22, .supports = lstm_supports, .init = lstm_init,
     .release = free, .run = lstm_run, .launch = EPABI_LAUNCH_LSTM, .cuda = epabi_cuda_float32_math},
    {.op_type = NULL},
};
