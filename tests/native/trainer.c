/* A trainer's GEMMs called as a Rust program using cudarc calls them: libcuda and libcublas opened with
 * dlopen (RTLD_LOCAL) and every symbol found with dlsym; three cuBLAS handles, each on its own stream;
 * cublasGemmEx in bf16 with COMPUTE_32F, cublasSgemm_v2 under TF32 math and under PEDANTIC math, and
 * strided batched GEMMs. Built with -DLINKED it calls the same functions linked against libcublas.
 *
 *   trainer OUT        runs the step; writes each operand and output to OUT/NAME.bin (row-major, as
 *                      PyTorch would hold it) and OUT/manifest.txt, a line per GEMM
 *   trainer --time N   times N calls of each GEMM-bound GEMM and 500 of a host-bound one; prints a line per
 *                      GEMM: NAME host_us (issuing a call) us (a call, until all ran)
 *
 * TRAINER_CUBLAS names the libcublas to open (default libcublas.so.13, then .12). No CUDA header is
 * needed. Used by the tests and bench/interposer_cost.py. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int status_t;
typedef void *handle_t;
enum { OP_N = 0, OP_T = 1, R_32F = 0, R_16BF = 14, COMPUTE_32F = 68 };
enum { MATH_DEFAULT = 0, MATH_PEDANTIC = 2, MATH_TF32 = 3 };

#ifdef LINKED
status_t cublasCreate_v2(handle_t *);
status_t cublasSetStream_v2(handle_t, void *);
status_t cublasSetMathMode(handle_t, int);
status_t cublasGemmEx(handle_t, int, int, int, int, int, const void *, const void *, int, int, const void *, int,
                      int, const void *, void *, int, int, int, int);
status_t cublasGemmStridedBatchedEx(handle_t, int, int, int, int, int, const void *, const void *, int, int,
                                    long long, const void *, int, int, long long, const void *, void *, int, int,
                                    long long, int, int, int);
status_t cublasSgemm_v2(handle_t, int, int, int, int, int, const float *, const float *, int, const float *, int,
                        const float *, float *, int);
status_t cublasSgemmStridedBatched(handle_t, int, int, int, int, int, const float *, const float *, int, long long,
                                   const float *, int, long long, const float *, float *, int, long long, int);
#endif

static struct {
    int (*init)(unsigned);
    int (*device_get)(int *, int);
    int (*primary_ctx_retain)(void **, int);
    int (*ctx_set_current)(void *);
    int (*mem_alloc)(uint64_t *, size_t);
    int (*htod)(uint64_t, const void *, size_t);
    int (*dtoh)(void *, uint64_t, size_t);
    int (*stream_create)(void **, unsigned);
    int (*stream_sync)(void *);
    int (*ctx_sync)(void);
    status_t (*create)(handle_t *);
    status_t (*set_stream)(handle_t, void *);
    status_t (*set_math)(handle_t, int);
    status_t (*gemm_ex)(handle_t, int, int, int, int, int, const void *, const void *, int, int, const void *, int,
                        int, const void *, void *, int, int, int, int);
    status_t (*strided_ex)(handle_t, int, int, int, int, int, const void *, const void *, int, int, long long,
                           const void *, int, int, long long, const void *, void *, int, int, long long, int, int,
                           int);
    status_t (*sgemm)(handle_t, int, int, int, int, int, const float *, const float *, int, const float *, int,
                      const float *, float *, int);
    status_t (*sgemm_strided)(handle_t, int, int, int, int, int, const float *, const float *, int, long long,
                              const float *, int, long long, const float *, float *, int, long long, int);
} cu;

static void die(const char *what, int status) {
    fprintf(stderr, "trainer: %s failed (%d)\n", what, status);
    exit(3);
}
#define CHECK(call) do { int s_ = (call); if (s_) die(#call, s_); } while (0)

static void *find(void *lib, const char *name) {
    void *f = dlsym(lib, name);
    if (!f) {
        fprintf(stderr, "trainer: %s not found\n", name);
        exit(3);
    }
    return f;
}

static void load(void) {
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cuda) {
        fprintf(stderr, "trainer: %s\n", dlerror());
        exit(3);
    }
#define F(field, lib, name) cu.field = (__typeof__(cu.field))find(lib, name)
    F(init, cuda, "cuInit"); F(device_get, cuda, "cuDeviceGet");
    F(primary_ctx_retain, cuda, "cuDevicePrimaryCtxRetain"); F(ctx_set_current, cuda, "cuCtxSetCurrent");
    F(mem_alloc, cuda, "cuMemAlloc_v2"); F(htod, cuda, "cuMemcpyHtoD_v2"); F(dtoh, cuda, "cuMemcpyDtoH_v2");
    F(stream_create, cuda, "cuStreamCreate"); F(stream_sync, cuda, "cuStreamSynchronize");
    F(ctx_sync, cuda, "cuCtxSynchronize");
#ifdef LINKED
    cu.create = cublasCreate_v2, cu.set_stream = cublasSetStream_v2, cu.set_math = cublasSetMathMode;
    cu.gemm_ex = cublasGemmEx, cu.strided_ex = cublasGemmStridedBatchedEx, cu.sgemm = cublasSgemm_v2;
    cu.sgemm_strided = cublasSgemmStridedBatched;
#else
    const char *name = getenv("TRAINER_CUBLAS");
    void *cublas = dlopen(name ? name : "libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!cublas && !name)
        cublas = dlopen("libcublas.so.12", RTLD_NOW | RTLD_LOCAL);
    if (!cublas) {
        fprintf(stderr, "trainer: %s\n", dlerror());
        exit(3);
    }
    F(create, cublas, "cublasCreate_v2"); F(set_stream, cublas, "cublasSetStream_v2");
    F(set_math, cublas, "cublasSetMathMode"); F(gemm_ex, cublas, "cublasGemmEx");
    F(strided_ex, cublas, "cublasGemmStridedBatchedEx"); F(sgemm, cublas, "cublasSgemm_v2");
    F(sgemm_strided, cublas, "cublasSgemmStridedBatched");
#endif
#undef F
}

/* -- operands: the same on every machine ------------------------------------------------------- */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float uniform(void) { /* xorshift64*, in [-1, 1) */
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (float)((rng * 2685821657736338717ull) >> 40) / (float)(1 << 23) - 1.0f;
}
static uint16_t to_bf16(float x) { /* round to nearest even, as ml_dtypes and torch do */
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

typedef struct { const char *name; int bf16; int64_t rows, cols; uint64_t dev; } mat_t;

static mat_t matrix(const char *name, int bf16, int64_t rows, int64_t cols) {
    mat_t m = {name, bf16, rows, cols, 0};
    size_t bytes = (size_t)(rows * cols) * (bf16 ? 2 : 4);
    void *host = malloc(bytes);
    for (int64_t i = 0; i < rows * cols; i++) {
        float x = uniform();
        if (bf16)
            ((uint16_t *)host)[i] = to_bf16(x);
        else
            ((float *)host)[i] = x;
    }
    CHECK(cu.mem_alloc(&m.dev, bytes));
    CHECK(cu.htod(m.dev, host, bytes));
    free(host);
    return m;
}

static mat_t output(const char *name, int bf16, int64_t rows, int64_t cols) {
    mat_t m = {name, bf16, rows, cols, 0};
    CHECK(cu.mem_alloc(&m.dev, (size_t)(rows * cols) * (bf16 ? 2 : 4)));
    return m;
}

static void save(const char *dir, const mat_t *m) {
    size_t bytes = (size_t)(m->rows * m->cols) * (m->bf16 ? 2 : 4);
    void *host = malloc(bytes);
    CHECK(cu.ctx_sync());
    CHECK(cu.dtoh(host, m->dev, bytes));
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", dir, m->name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(host, 1, bytes, f) != bytes || fclose(f)) {
        fprintf(stderr, "trainer: cannot write %s\n", path);
        exit(3);
    }
    free(host);
}

static const float ONE = 1.0f, ZERO = 0.0f;

/* Row-major Y[T, out] = X[T, in] W[out, in]^T: cuBLAS's column-major Y^T = W^T(op T) X^T. */
static void forward(handle_t h, const mat_t *x, const mat_t *w, const mat_t *y, int64_t t) {
    int in = (int)x->cols, out = (int)w->rows;
    if (x->bf16)
        CHECK(cu.gemm_ex(h, OP_T, OP_N, out, (int)t, in, &ONE, (void *)w->dev, R_16BF, in, (void *)x->dev, R_16BF,
                         in, &ZERO, (void *)y->dev, R_16BF, out, COMPUTE_32F, -1));
    else
        CHECK(cu.sgemm(h, OP_T, OP_N, out, (int)t, in, &ONE, (float *)w->dev, in, (float *)x->dev, in, &ZERO,
                       (float *)y->dev, out));
}

/* dX[T, in] = dY[T, out] W[out, in]; dW[out, in] = dY^T X. */
static void backward(handle_t h, const mat_t *x, const mat_t *w, const mat_t *dy, const mat_t *dx, const mat_t *dw) {
    int t = (int)x->rows, in = (int)x->cols, out = (int)w->rows;
    if (x->bf16) {
        CHECK(cu.gemm_ex(h, OP_N, OP_N, in, t, out, &ONE, (void *)w->dev, R_16BF, in, (void *)dy->dev, R_16BF, out,
                         &ZERO, (void *)dx->dev, R_16BF, in, COMPUTE_32F, -1));
        CHECK(cu.gemm_ex(h, OP_N, OP_T, in, out, t, &ONE, (void *)x->dev, R_16BF, in, (void *)dy->dev, R_16BF, out,
                         &ZERO, (void *)dw->dev, R_16BF, in, COMPUTE_32F, -1));
    } else {
        CHECK(cu.sgemm(h, OP_N, OP_N, in, t, out, &ONE, (float *)w->dev, in, (float *)dy->dev, out, &ZERO,
                       (float *)dx->dev, in));
        CHECK(cu.sgemm(h, OP_N, OP_T, in, out, t, &ONE, (float *)x->dev, in, (float *)dy->dev, out, &ZERO,
                       (float *)dw->dev, in));
    }
}

/* S[b] = Q[b] K[b]^T, each L x d: column-major S^T = K (op T) Q^T, a strided batch. */
static void scores(handle_t h, const mat_t *q, const mat_t *k, const mat_t *s, int batch) {
    int l = (int)(q->rows / batch), d = (int)q->cols;
    long long qs = (long long)l * d, ss = (long long)l * l;
    if (q->bf16)
        CHECK(cu.strided_ex(h, OP_T, OP_N, l, l, d, &ONE, (void *)k->dev, R_16BF, d, qs, (void *)q->dev, R_16BF, d,
                            qs, &ZERO, (void *)s->dev, R_16BF, l, ss, batch, COMPUTE_32F, -1));
    else
        CHECK(cu.sgemm_strided(h, OP_T, OP_N, l, l, d, &ONE, (float *)k->dev, d, qs, (float *)q->dev, d, qs, &ZERO,
                               (float *)s->dev, l, ss, batch));
}

/* The sizes; TRAINER_SMALL=1: a few KiB, for a stand-in cuBLAS on the CPU. */
static int64_t TOKENS[] = {1, 2, 7, 4096, 8192}; /* the last: the full product */
enum { N_TOKENS = 5 };
static int IN = 4096, OUT = 1024, BATCH = 8, L = 512, D = 64;

typedef struct { const char *tag; int bf16, math; } layer_t;
/* Handle 0: bf16 (DEFAULT math); 1: fp32 under TF32 math; 2: fp32 under PEDANTIC math. */
static const layer_t LAYERS[3] = {{"bf16", 1, MATH_DEFAULT}, {"tf32", 0, MATH_TF32}, {"fp32", 0, MATH_PEDANTIC}};

static handle_t handles[3];

static void setup(void) {
    if (getenv("TRAINER_SMALL")) {
        TOKENS[3] = 16, TOKENS[4] = 32;
        IN = 64, OUT = 32, BATCH = 2, L = 16, D = 8;
    }
    load();
    int device;
    void *ctx, *stream;
    CHECK(cu.init(0));
    CHECK(cu.device_get(&device, 0));
    CHECK(cu.primary_ctx_retain(&ctx, device));
    CHECK(cu.ctx_set_current(ctx));
    for (int i = 0; i < 3; i++) {
        CHECK(cu.stream_create(&stream, 1));
        CHECK(cu.create(&handles[i]));
        CHECK(cu.set_stream(handles[i], stream));
        CHECK(cu.set_math(handles[i], LAYERS[i].math));
    }
}

static void step(const char *dir) {
    char path[4096], name[64];
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    FILE *manifest = fopen(path, "w");
    if (!manifest) {
        fprintf(stderr, "trainer: cannot write %s\n", path);
        exit(3);
    }
    for (int i = 0; i < 3; i++) {
        const layer_t *layer = &LAYERS[i];
        int bf = layer->bf16;
        char xn[32], wn[32], dyn[32], qn[32], kn[32];
        snprintf(xn, 32, "%s_x", layer->tag), snprintf(wn, 32, "%s_w", layer->tag);
        snprintf(dyn, 32, "%s_dy", layer->tag), snprintf(qn, 32, "%s_q", layer->tag);
        snprintf(kn, 32, "%s_k", layer->tag);
        mat_t x = matrix(strdup(xn), bf, TOKENS[N_TOKENS - 1], IN), w = matrix(strdup(wn), bf, OUT, IN);
        mat_t dy = matrix(strdup(dyn), bf, TOKENS[N_TOKENS - 1], OUT);
        mat_t q = matrix(strdup(qn), bf, (int64_t)BATCH * L, D), k = matrix(strdup(kn), bf, (int64_t)BATCH * L, D);
        save(dir, &x), save(dir, &w), save(dir, &dy), save(dir, &q), save(dir, &k);
        for (int t = 0; t < N_TOKENS; t++) {
            snprintf(name, sizeof name, "%s_y%ld", layer->tag, (long)TOKENS[t]);
            mat_t y = output(strdup(name), bf, TOKENS[t], OUT);
            forward(handles[i], &x, &w, &y, TOKENS[t]);
            save(dir, &y);
            fprintf(manifest, "%s forward %s %s %s %ld\n", name, layer->tag, xn, wn, (long)TOKENS[t]);
        }
        snprintf(name, sizeof name, "%s_dx", layer->tag);
        mat_t dx = output(strdup(name), bf, TOKENS[N_TOKENS - 1], IN);
        snprintf(name, sizeof name, "%s_dw", layer->tag);
        mat_t dw = output(strdup(name), bf, OUT, IN);
        backward(handles[i], &x, &w, &dy, &dx, &dw);
        save(dir, &dx), save(dir, &dw);
        fprintf(manifest, "%s dx %s %s %s %d\n", dx.name, layer->tag, dyn, wn, 0);
        fprintf(manifest, "%s dw %s %s %s %d\n", dw.name, layer->tag, dyn, xn, 0);
        snprintf(name, sizeof name, "%s_s", layer->tag);
        mat_t s = output(strdup(name), bf, (int64_t)BATCH * L, L);
        scores(handles[i], &q, &k, &s, BATCH);
        save(dir, &s);
        fprintf(manifest, "%s scores %s %s %s %d\n", s.name, layer->tag, qn, kn, BATCH);
    }
    fclose(manifest);
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Host time of issuing `calls` GEMMs (the stream drained first), and the time until they all ran. */
static void timed(const char *name, int calls, void (*issue)(void *), void *arg) {
    issue(arg); /* the plan and the workspace are made on the first call: not timed */
    CHECK(cu.ctx_sync());
    double start = now_us();
    for (int i = 0; i < calls; i++)
        issue(arg);
    double issued = now_us();
    CHECK(cu.ctx_sync());
    double done = now_us();
    printf("%s %.3f %.3f\n", name, (issued - start) / calls, (done - start) / calls);
}

typedef struct { int layer; mat_t x, w, y; int64_t t; } timed_gemm_t;
static void issue_forward(void *arg) {
    timed_gemm_t *g = arg;
    forward(handles[g->layer], &g->x, &g->w, &g->y, g->t);
}

static void time_gemms(int calls) {
    /* GEMM-bound: bf16 8192 x 4096 -> 4096 and fp32 TF32; host-bound: bf16 64 x 384 -> 256. */
    timed_gemm_t big = {0, matrix("x", 1, 8192, 4096), matrix("w", 1, 4096, 4096), output("y", 1, 8192, 4096), 8192};
    timed("bf16_8192x4096x4096", calls, issue_forward, &big);
    timed_gemm_t tf = {1, matrix("x", 0, 8192, 4096), matrix("w", 0, 4096, 4096), output("y", 0, 8192, 4096), 8192};
    timed("tf32_8192x4096x4096", calls, issue_forward, &tf);
    timed_gemm_t small = {0, matrix("x", 1, 64, 384), matrix("w", 1, 256, 384), output("y", 1, 64, 256), 64};
    timed("bf16_64x256x384", 500, issue_forward, &small); /* fewer than a stream's queue holds: host time alone */
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--time") == 0) {
        setup();
        time_gemms(atoi(argv[2]));
        return 0;
    }
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: trainer OUT | trainer --time N\n");
        return 2;
    }
    setup();
    step(argv[1]);
    return 0;
}
