/*
 * blas.h - the CBLAS sgemm behind epabi_sgemm (math_common.h), loaded at run time with dlopen: nothing of a
 * BLAS is needed at build time, and every install gets one through the scipy-openblas32 wheel epabi depends on.
 *
 * Which library, chosen once per process (the first that loads and exports cblas_sgemm wins):
 *   EPABI_BLAS=none (or builtin)  no library: the built-in cache-blocked loop (matmul.c);
 *   EPABI_BLAS=<path or soname>   only that library (its symbols plain or with scipy-openblas's "scipy_" prefix),
 *                                 else the built-in loop;
 *   unset, empty or "auto"        1. the scipy-openblas32 wheel next to this plugin: <site-packages>/
 *                                    scipy_openblas32/lib/libscipy_openblas.so, found from this library's own path
 *                                    (dladdr), which sits in <site-packages>/epabi/ when installed as a wheel;
 *                                 2. the system: libopenblas.so.0, libopenblas.so, libblis.so.4, libflexiblas.so.3,
 *                                    libcblas.so.3, libblas.so.3 (the last ones only when they export cblas_sgemm);
 *                                 3. the built-in loop.
 * A library with a thread control (openblas_set_num_threads, bli_thread_set_num_threads,
 * flexiblas_set_num_threads) is set to one thread: epabi spreads the work over its own pool (thread_pool.h) and
 * calls the BLAS from each pool thread, so its threads would only oversubscribe the cores. (A host process that
 * shares a system library with us, a numpy built against it, sees that setting too; the wheel's is ours alone.)
 *
 * Thread-safety: loaded once (pthread_once) on first use; the result is read-only afterwards.
 */
#ifndef EPABI_BLAS_H
#define EPABI_BLAS_H

/* cblas_sgemm with the CBLAS enum values spelled as ints (CblasRowMajor = 101, CblasNoTrans = 111,
 * CblasTrans = 112), so no cblas.h is needed. */
enum { EPABI_CBLAS_ROW_MAJOR = 101, EPABI_CBLAS_NO_TRANS = 111, EPABI_CBLAS_TRANS = 112 };
typedef void (*epabi_cblas_sgemm_fn)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                                     const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);

struct epabi_blas {
    epabi_cblas_sgemm_fn sgemm;   /* NULL: the built-in loop */
    const char* source;           /* "scipy-openblas32 wheel", "system", "EPABI_BLAS", or "built-in" */
    char path[512];               /* the library file that loaded ("" for built-in) */
    char config[160];             /* the library's own description (openblas_get_config), or its file name */
    char why[512];                /* for the built-in loop: why no library was used */
};

/* The choice of this process (never NULL). */
const struct epabi_blas* epabi_blas(void);

/* One line for logs and EP metadata: "OpenBLAS 0.3.34 ... (scipy-openblas32 wheel: /path/lib.so)", or
 * "built-in loop (<why>)". Valid for the life of the process. */
const char* epabi_blas_summary(void);

#endif
