/* Stand-ins for libcuda, libcublas and libcublasLt with their symbol names, for the interposer's tests on a
 * machine without a GPU: "device" memory is host memory, and each GEMM entry point appends a line to
 * $FAKE_LOG ("cublas NAME" or "lt ALGO_ID") instead of multiplying. Built three times: -DCUDA, -DCUBLAS,
 * -DCUBLASLT. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void note(const char *what, long value) {
    const char *path = getenv("FAKE_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "%s %ld\n", what, value);
        fclose(f);
    }
}

#ifdef CUDA
int cuInit(unsigned f) { (void)f; return 0; }
int cuDeviceGet(int *d, int i) { *d = i; return 0; }
static int context;
int cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = &context; return 0; }
int cuCtxSetCurrent(void *c) { (void)c; return 0; }
int cuCtxGetCurrent(void **c) { *c = &context; return 0; }
int cuMemAlloc_v2(uint64_t *p, size_t n) { *p = (uint64_t)(uintptr_t)aligned_alloc(256, (n + 255) / 256 * 256); return !*p; }
int cuMemcpyHtoD_v2(uint64_t d, const void *s, size_t n) { memcpy((void *)(uintptr_t)d, s, n); return 0; }
int cuMemcpyDtoH_v2(void *d, uint64_t s, size_t n) { memcpy(d, (void *)(uintptr_t)s, n); return 0; }
int cuStreamCreate(void **s, unsigned f) { (void)f; *s = malloc(1); return 0; }
int cuStreamSynchronize(void *s) { (void)s; return 0; }
int cuCtxSynchronize(void) { return 0; }
int cuThreadExchangeStreamCaptureMode(int *mode) { (void)mode; return 0; }
#endif

#ifdef CUBLAS
typedef struct { int math, pointer_mode; void *stream; } handle;
int cublasCreate_v2(handle **h) { *h = calloc(1, sizeof **h); return 0; }
int cublasSetStream_v2(handle *h, void *s) { h->stream = s; return 0; }
int cublasGetStream_v2(handle *h, void **s) { *s = h->stream; return 0; }
int cublasSetMathMode(handle *h, int m) { h->math = m; return 0; }
int cublasGetMathMode(handle *h, int *m) { *m = h->math; return 0; }
int cublasGetPointerMode_v2(handle *h, int *m) { *m = h->pointer_mode; return 0; }
#define GEMM(name) int name(handle *h) { (void)h; note("cublas " #name, 0); return 0; }
GEMM(cublasGemmEx) GEMM(cublasGemmEx_64) GEMM(cublasGemmStridedBatchedEx) GEMM(cublasGemmStridedBatchedEx_64)
GEMM(cublasSgemm_v2) GEMM(cublasSgemm_v2_64) GEMM(cublasSgemmStridedBatched) GEMM(cublasSgemmStridedBatched_64)
GEMM(cublasDgemm_v2)
#endif

#ifdef CUBLASLT
/* A descriptor or a layout: its attributes, 8 bytes each, as set. */
static int set(int64_t *o, int a, const void *b, size_t n) { o[a] = 0; memcpy(&o[a], b, n < 8 ? n : 8); return 0; }
static int get(const int64_t *o, int a, void *b, size_t n, size_t *w) { memcpy(b, &o[a], n < 8 ? n : 8); *w = n; return 0; }
int cublasLtMatmulDescCreate(int64_t **d, int c, int s) { *d = calloc(32, 8); (*d)[0] = c, (*d)[1] = s, (*d)[7] = 1; return 0; }
int cublasLtMatmulDescSetAttribute(int64_t *d, int a, const void *b, size_t n) { return set(d, a, b, n); }
int cublasLtMatmulDescGetAttribute(const int64_t *d, int a, void *b, size_t n, size_t *w) { return get(d, a, b, n, w); }
int cublasLtMatrixLayoutCreate(int64_t **l, int t, uint64_t r, uint64_t c, int64_t ld) {
    *l = calloc(32, 8);
    (*l)[0] = t, (*l)[2] = (int64_t)r, (*l)[3] = (int64_t)c, (*l)[4] = ld, (*l)[5] = 1;
    return 0;
}
int cublasLtMatrixLayoutSetAttribute(int64_t *l, int a, const void *b, size_t n) { return set(l, a, b, n); }
int cublasLtMatrixLayoutGetAttribute(const int64_t *l, int a, void *b, size_t n, size_t *w) { return get(l, a, b, n, w); }
int cublasLtMatmulAlgoInit(void *h, int c, int s, int a, int b, int ct, int dt, int id, int64_t *algo) {
    (void)h, (void)c, (void)s, (void)a, (void)b, (void)ct, (void)dt;
    algo[0] = id;
    return 0;
}
int cublasLtMatmulAlgoConfigSetAttribute(void *a, int at, const void *b, size_t n) { (void)a, (void)at, (void)b, (void)n; return 0; }
/* Logs "lt ALGO_ID" (the caller's algorithm: 0 for none), "lt-no-workspace ..." when given none. */
int cublasLtMatmul(void *h, void *d, const void *al, const void *a, void *ad, const void *b, void *bd, const void *be,
                   const void *c, void *cd, void *dd, void *ddesc, const int64_t *algo, void *w, size_t ws, void *s) {
    (void)h, (void)d, (void)al, (void)a, (void)ad, (void)b, (void)bd, (void)be, (void)c, (void)cd, (void)dd, (void)ddesc;
    (void)s;
    note(w && ws ? "lt" : "lt-no-workspace", algo ? (long)algo[0] : 0);
    return 0;
}
#endif
