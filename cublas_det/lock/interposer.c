/* The lock for any program: a library that `cublas-det run --lock` preloads (LD_PRELOAD) into every
 * process of the command. It takes cuBLAS's GEMM entry points, from programs linked with libcublas
 * (a preloaded definition comes first) and from programs that dlopen it and dlsym each symbol, as
 * cudarc does (dlsym is taken, and only cuBLAS's GEMM names are answered with ours). A call whose
 * GEMM the lock holds runs as cublasLtMatmul with the pinned algorithm, on the handle's stream (the
 * cublasHandle_t cast to a cublasLtHandle_t, as NVIDIA documents), with alpha, beta and the pointer
 * mode as given. A program's own cublasLtMatmul (JAX's XLA calls cuBLASLt directly) whose GEMM the
 * lock holds runs with the pinned algorithm in place of the one it passed. Any other call goes on
 * untouched, counted with why. No CUDA header is needed: the few types used are declared here.
 *
 * The table (CUBLAS_DET_LOCK_TABLE) is written by cublas_det.lock.interposer from the lock file:
 * plain integers in cuBLAS's own (column-major) terms, so no layout or math rule lives here. The
 * report (CUBLAS_DET_LOCK_REPORT/PID.cublas.json) is written at exit, raw, for Python to name. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int status_t; /* cublasStatus_t, CUresult */
typedef void *handle_t;

enum { STATUS_NOT_SUPPORTED = 15, ALIGNMENT = 256, MAX_ROWS = 100000 };
enum { DESC_COMPUTE = 0, DESC_SCALE = 1, DESC_POINTER_MODE = 2, DESC_TRANSA = 3, DESC_TRANSB = 4,
       DESC_EPILOGUE = 7 };                                          /* cublasLtMatmulDescAttributes_t */
enum { LAYOUT_TYPE = 0, LAYOUT_ORDER = 1, LAYOUT_ROWS = 2, LAYOUT_COLS = 3, LAYOUT_LD = 4,
       LAYOUT_BATCH_COUNT = 5, LAYOUT_BATCH_STRIDE = 6 };           /* cublasLtMatrixLayoutAttribute_t */
enum { EPILOGUE_DEFAULT = 1, MATH_LT = 15 }; /* MATH_LT: a cuBLASLt call, which has no math mode */
enum { R_32F = 0, COMPUTE_32F = 68 };                               /* cudaDataType, cublasComputeType_t */
enum { CAPTURE_MODE_RELAXED = 2 };                                  /* CUstreamCaptureMode */

/* The entry points taken; `_64` forms take 64-bit sizes. Their order is the report's `api`. */
static const char *const NAMES[] = {"cublasGemmEx", "cublasGemmEx_64", "cublasGemmStridedBatchedEx",
                                    "cublasGemmStridedBatchedEx_64", "cublasSgemm_v2", "cublasSgemm_v2_64",
                                    "cublasSgemmStridedBatched", "cublasSgemmStridedBatched_64", "cublasLtMatmul"};
enum { GEMM_EX, GEMM_EX_64, STRIDED_EX, STRIDED_EX_64, SGEMM, SGEMM_64, SGEMM_STRIDED, SGEMM_STRIDED_64, LT_MATMUL,
       N_API };
static void *real_api[N_API]; /* cuBLAS's own, found as the program's lookup found it */

/* The cuBLAS, cuBLASLt and driver functions called, resolved from the libraries the program uses. */
static struct {
    status_t (*get_math)(handle_t, int *);
    status_t (*get_pointer_mode)(handle_t, int *);
    status_t (*get_stream)(handle_t, void **);
    status_t (*desc_create)(void **, int, int);
    status_t (*desc_set)(void *, int, const void *, size_t);
    status_t (*desc_get)(const void *, int, void *, size_t, size_t *);
    status_t (*layout_get)(const void *, int, void *, size_t, size_t *);
    status_t (*layout_create)(void **, int, uint64_t, uint64_t, int64_t);
    status_t (*layout_set)(void *, int, const void *, size_t);
    status_t (*algo_init)(handle_t, int, int, int, int, int, int, int, void *);
    status_t (*algo_set)(void *, int, const void *, size_t);
    status_t (*matmul)(handle_t, void *, const void *, const void *, void *, const void *, void *, const void *,
                       const void *, void *, void *, void *, const void *, void *, size_t, void *);
    status_t (*ctx_get)(void **);
    status_t (*mem_alloc)(uint64_t *, size_t);
    status_t (*exchange_capture_mode)(int *);
    int ready;   /* cuBLASLt and the driver: 1 found; -1 not (every call falls through, said why) */
    int cublas;  /* cuBLAS's getters: 1 found, -1 not */
} lib;

static void *(*real_dlsym)(void *, const char *);

/* One row of the table: a GEMM the lock holds, as cuBLAS's arguments give it, and its pinned plan. */
typedef struct {
    int entry;                     /* the lock entry's index, for the report */
    int a_type, c_type, compute;   /* the call's types and compute type argument */
    unsigned math_modes;           /* bit i: the handle's math mode i (flags cleared), or MATH_LT, gives this row */
    int epilogue;                  /* cuBLASLt's: DEFAULT (every cuBLAS call) or BIAS */
    int transa, transb;
    int64_t m, n, k;               /* n = 0: any n (the rows of a row-major GEMM) */
    int lt_compute, scale_type;
    unsigned present;              /* bit i: algo[i] was stored (an older lock may lack some) */
    uint64_t algo[9];              /* algo_id, tile, splitk, reduction, swizzle, custom, stages, inner, cluster */
} row_t;

static row_t *rows;
static int n_rows;
static uint64_t workspace_bytes = 32u << 20;
static char lock_path[4096], report_dir[4096];
static int enabled; /* a table was read; 0: every call passes through uncounted */
static volatile int standing_aside; /* the process's PyTorch lock took over (cublas_det_stand_aside) */

/* A GEMM call, normalised: what cuBLAS's eight entry points have in common. */
typedef struct {
    int api, transa, transb, a_type, b_type, c_type, compute, epilogue, scale_type;
    int64_t m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, batch;
    const void *alpha, *beta, *a, *b;
    void *c;
} call_t;

/* What a distinct call signature does: its plan, or why it falls through; counted. */
enum { SIG = 24 };
typedef struct entry {
    int64_t sig[SIG];
    int row;                /* -1: falls through */
    const char *reason;
    void *desc, *layout[3];
    uint64_t algo[8];       /* cublasLtMatmulAlgo_t: 64 bytes */
    void *workspace;
    uint64_t calls;
    struct entry *next;     /* in the hash chain */
    struct entry *all;      /* every entry, for the report */
} entry_t;

enum { BUCKETS = 4096 };
static entry_t *buckets[BUCKETS], *all_entries;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static int process_marked;
typedef struct ws { void *ctx, *stream, *ptr; struct ws *next; } ws_t;
static ws_t *workspaces; /* see workspace_for */

/* -- the dlsym every lookup of the process reaches --------------------------------------------- */

static int api_index(const char *name) {
    if (strncmp(name, "cublas", 6) != 0) /* most lookups end here */
        return -1;
    for (int i = 0; i < N_API; i++)
        if (strcmp(name, NAMES[i]) == 0)
            return i;
    return -1;
}

static void *wrapper_of(int api);
static void resolve_library(void *any_cublas_symbol);

static void find_real_dlsym(void) {
    real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!real_dlsym)
        real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
}

static const char *library_of(int api) { return api == LT_MATMUL ? "libcublasLt.so" : "libcublas.so"; }

/* A lookup of one of cuBLAS's GEMM names: ours when the real one is libcublas's (libcublasLt's). */
__attribute__((noinline)) static void *lookup_gemm(void *handle, const char *name, int api) {
    void *found = real_dlsym(handle, name);
    Dl_info info;
    if (!found || !dladdr(found, &info) || !info.dli_fname || !strstr(info.dli_fname, library_of(api)))
        return found;
    if (!real_api[api])
        real_api[api] = found;
    else if (real_api[api] != found) /* a second libcublas in one process: not ours to route */
        return found;
    resolve_library(found);
    return wrapper_of(api);
}

/* Every other lookup goes on to the real dlsym as a tail call (no frame of ours: built with
 * -fno-stack-protector, checked by the tests), so that glibc sees the caller's own return address:
 * RTLD_NEXT and the caller's namespace stay the caller's. */
__attribute__((visibility("default"))) void *dlsym(void *handle, const char *name) {
    if (__builtin_expect(!real_dlsym, 0)) /* a constructor that runs before ours */
        find_real_dlsym();
    int api = enabled && handle != RTLD_NEXT ? api_index(name) : -1;
    if (api >= 0)
        return lookup_gemm(handle, name, api);
    return real_dlsym(handle, name);
}

static void *real_for(int api) {
    if (!real_api[api]) {  /* a program linked with libcublas: the definition after ours */
        void *found = real_dlsym(RTLD_NEXT, NAMES[api]);
        if (found) {
            __atomic_store_n(&real_api[api], found, __ATOMIC_RELEASE);
            resolve_library(found);
        }
    }
    return real_api[api];
}

/* -- start: the table, the libraries ------------------------------------------------------------ */

static void mark_process(void) {
    if (process_marked || !report_dir[0])
        return;
    process_marked = 1;
    char path[4200];
    snprintf(path, sizeof path, "%s/%d.cublas-entered", report_dir, (int)getpid());
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
}

static void write_report(void);

static void forked_child(void) {
    /* A child counts its own calls from zero; the parent's plans and workspaces are not its to use
     * (CUDA does not run in a child forked after it started). */
    pthread_mutex_init(&table_lock, NULL);
    memset(buckets, 0, sizeof buckets);
    all_entries = NULL;
    workspaces = NULL;
    process_marked = 0;
}

static int read_table(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char word[64];
    int version = 0, capacity = 0;
    if (fscanf(f, "cublas_det.interposer %d", &version) != 1 || version != 1)
        goto bad;
    while (fscanf(f, "%63s", word) == 1) {
        if (strcmp(word, "lock") == 0) {
            if (fscanf(f, " %4095[^\n]", lock_path) != 1)
                goto bad;
        } else if (strcmp(word, "workspace") == 0) {
            if (fscanf(f, "%lu", (unsigned long *)&workspace_bytes) != 1)
                goto bad;
        } else if (strcmp(word, "row") == 0) {
            if (n_rows == capacity) {
                capacity = capacity ? 2 * capacity : 64;
                if (capacity > MAX_ROWS || !(rows = realloc(rows, capacity * sizeof *rows)))
                    goto bad;
            }
            row_t *r = &rows[n_rows];
            long long m, n, k;
            if (fscanf(f, "%d %d %d %d %u %d %d %d %lld %lld %lld %d %d %u", &r->entry, &r->a_type, &r->c_type,
                       &r->compute, &r->math_modes, &r->epilogue, &r->transa, &r->transb, &m, &n, &k,
                       &r->lt_compute, &r->scale_type, &r->present) != 14)
                goto bad;
            r->m = m, r->n = n, r->k = k;
            for (int i = 0; i < 9; i++)
                if (fscanf(f, "%lu", (unsigned long *)&r->algo[i]) != 1)
                    goto bad;
            n_rows++;
        } else {
            goto bad;
        }
    }
    fclose(f);
    return 1;
bad:
    fclose(f);
    n_rows = 0;
    return 0;
}

__attribute__((constructor)) static void start(void) {
    if (!real_dlsym)
        find_real_dlsym();
    const char *table = getenv("CUBLAS_DET_LOCK_TABLE"), *folder = getenv("CUBLAS_DET_LOCK_REPORT");
    if (folder)
        snprintf(report_dir, sizeof report_dir, "%s", folder);
    if (!table || !real_dlsym)
        return;
    if (!read_table(table))
        lib.ready = -1; /* run wrote it just now: unreadable means removed; every call falls through */
    enabled = 1;
    pthread_atfork(NULL, NULL, forked_child);
    atexit(write_report);
}

/* libcublasLt and the driver, found beside the libcublas (or as the libcublasLt) the program uses; cuBLAS's
 * getters once a libcublas symbol is seen. */
static void resolve_library(void *symbol) {
    if (lib.ready && lib.cublas)
        return;
    Dl_info info;
    if (!dladdr(symbol, &info) || !info.dli_fname)
        return;
    const char *at = strstr(info.dli_fname, "libcublas.so"), *name = info.dli_fname;
    pthread_mutex_lock(&table_lock);
    char path[4096];
    void *cublas = at ? dlopen(name, RTLD_NOW | RTLD_NOLOAD) : NULL, *lt = NULL, *cuda;
    if (at) /* libcublasLt.so.N beside libcublas.so.N */
        snprintf(path, sizeof path, "%.*slibcublasLt.so%s", (int)(at - name), name, at + strlen("libcublas.so"));
    else
        snprintf(path, sizeof path, "%s", name);
    if (!(lt = dlopen(path, RTLD_NOW | RTLD_NOLOAD)))
        lt = dlopen(path, RTLD_NOW);
    if (!(cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)))
        cuda = dlopen("libcuda.so.1", RTLD_NOW);
#define FIND(field, from, name) (lib.field = (__typeof__(lib.field))(from ? real_dlsym(from, name) : NULL))
    if (!lib.ready) {
        int found = FIND(desc_create, lt, "cublasLtMatmulDescCreate")
                    && FIND(desc_set, lt, "cublasLtMatmulDescSetAttribute")
                    && FIND(desc_get, lt, "cublasLtMatmulDescGetAttribute")
                    && FIND(layout_create, lt, "cublasLtMatrixLayoutCreate")
                    && FIND(layout_set, lt, "cublasLtMatrixLayoutSetAttribute")
                    && FIND(layout_get, lt, "cublasLtMatrixLayoutGetAttribute")
                    && FIND(algo_init, lt, "cublasLtMatmulAlgoInit")
                    && FIND(algo_set, lt, "cublasLtMatmulAlgoConfigSetAttribute")
                    && FIND(matmul, lt, "cublasLtMatmul") && FIND(ctx_get, cuda, "cuCtxGetCurrent")
                    && FIND(mem_alloc, cuda, "cuMemAlloc_v2")
                    && FIND(exchange_capture_mode, cuda, "cuThreadExchangeStreamCaptureMode");
        __atomic_store_n(&lib.ready, found ? 1 : -1, __ATOMIC_RELEASE);
    }
    if (!lib.cublas && cublas) {
        int found = FIND(get_math, cublas, "cublasGetMathMode")
                    && FIND(get_pointer_mode, cublas, "cublasGetPointerMode_v2")
                    && FIND(get_stream, cublas, "cublasGetStream_v2");
        __atomic_store_n(&lib.cublas, found ? 1 : -1, __ATOMIC_RELEASE);
    }
#undef FIND
    pthread_mutex_unlock(&table_lock);
}

/* -- routing a call ------------------------------------------------------------------------------ */

static const row_t *find_row(const call_t *c, int math) {
    const row_t *any_n = NULL;
    for (int i = 0; i < n_rows; i++) {
        const row_t *r = &rows[i];
        if (r->a_type != c->a_type || r->c_type != c->c_type || r->compute != c->compute || r->transa != c->transa
            || r->transb != c->transb || r->m != c->m || r->k != c->k || r->epilogue != c->epilogue
            || !(r->math_modes >> math & 1))
            continue;
        if (r->n == c->n) /* the entry verified at this very n */
            return r;
        if (r->n == 0)
            any_n = r;
    }
    return any_n;
}

/* One workspace per (context, stream) for the process's life: a CUDA graph that captured a locked call
 * holds its address. Made in relaxed capture mode, so that a stream being captured never records it. */
static void *workspace_for(void *ctx, void *stream) {
    for (ws_t *w = workspaces; w; w = w->next)
        if (w->ctx == ctx && w->stream == stream)
            return w->ptr;
    uint64_t ptr = 0;
    int mode = CAPTURE_MODE_RELAXED;
    lib.exchange_capture_mode(&mode);
    status_t status = lib.mem_alloc(&ptr, workspace_bytes);
    lib.exchange_capture_mode(&mode);
    ws_t *w = malloc(sizeof *w);
    if (status || !ptr || !w) {
        free(w);
        return NULL;
    }
    *w = (ws_t){ctx, stream, (void *)(uintptr_t)ptr, workspaces};
    workspaces = w;
    return w->ptr;
}

static const char *make_algo(entry_t *e, const call_t *c, const row_t *r, handle_t handle);

static const char *make_plan(entry_t *e, const call_t *c, const row_t *r, int pointer_mode, handle_t handle) {
    int32_t ta = c->transa, tb = c->transb, pm = pointer_mode;
    if (lib.desc_create(&e->desc, r->lt_compute, r->scale_type) || lib.desc_set(e->desc, DESC_TRANSA, &ta, 4)
        || lib.desc_set(e->desc, DESC_TRANSB, &tb, 4) || lib.desc_set(e->desc, DESC_POINTER_MODE, &pm, 4))
        return "cuBLASLt refused the GEMM's descriptor";
    int64_t rows_[3] = {c->transa ? c->k : c->m, c->transb ? c->n : c->k, c->m};
    int64_t cols_[3] = {c->transa ? c->m : c->k, c->transb ? c->k : c->n, c->n};
    int64_t lds[3] = {c->lda, c->ldb, c->ldc}, strides[3] = {c->stride_a, c->stride_b, c->stride_c};
    int types[3] = {c->a_type, c->b_type, c->c_type};
    for (int i = 0; i < 3; i++) {
        if (lib.layout_create(&e->layout[i], types[i], rows_[i], cols_[i], lds[i]))
            return "cuBLASLt refused a layout";
        int32_t count = (int32_t)c->batch;
        if (c->batch > 1 && (lib.layout_set(e->layout[i], LAYOUT_BATCH_COUNT, &count, 4)
                             || lib.layout_set(e->layout[i], LAYOUT_BATCH_STRIDE, &strides[i], 8)))
            return "cuBLASLt refused a batch";
    }
    return make_algo(e, c, r, handle);
}

/* The pinned algorithm, made from its stored attributes for the call's types. */
static const char *make_algo(entry_t *e, const call_t *c, const row_t *r, handle_t handle) {
    if (lib.algo_init(handle, r->lt_compute, r->scale_type, c->a_type, c->b_type, c->c_type, c->c_type,
                      (int)r->algo[0], e->algo))
        return "the pinned algorithm does not exist here";
    static const size_t sizes[9] = {4, 4, 4, 4, 4, 4, 4, 2, 2}; /* cublasLtMatmulAlgoConfigAttributes_t */
    for (int i = 1; i < 9; i++) {
        if (!(r->present >> i & 1))
            continue;
        uint32_t v32 = (uint32_t)r->algo[i];
        uint16_t v16 = (uint16_t)r->algo[i];
        if (lib.algo_set(e->algo, i, sizes[i] == 4 ? (void *)&v32 : (void *)&v16, sizes[i]))
            return "the pinned algorithm does not exist here";
    }
    return NULL;
}

/* The entry of a call's signature, made on its first call: its plan, or why it falls through (`refusal`:
 * said before any look-up). */
static entry_t *entry_for(const call_t *c, handle_t handle, int math, int pointer_mode, void *ctx, void *stream,
                          int aligned, const char *refusal) {
    int64_t sig[SIG] = {c->api, c->transa, c->transb, c->a_type, c->b_type, c->c_type, c->compute, c->m, c->n,
                        c->k, c->lda, c->ldb, c->ldc, c->stride_a, c->stride_b, c->stride_c, c->batch, math,
                        pointer_mode, (int64_t)(uintptr_t)ctx, (int64_t)(uintptr_t)stream, aligned, c->epilogue,
                        c->scale_type};
    uint64_t hash = 1469598103934665603ull;
    for (int i = 0; i < SIG; i++)
        hash = (hash ^ (uint64_t)sig[i]) * 1099511628211ull;
    entry_t **bucket = &buckets[hash % BUCKETS];
    pthread_mutex_lock(&table_lock);
    entry_t *e = *bucket;
    while (e && memcmp(e->sig, sig, sizeof sig))
        e = e->next;
    if (!e && (e = calloc(1, sizeof *e))) {
        memcpy(e->sig, sig, sizeof sig);
        const row_t *r = lib.ready < 0 ? NULL : find_row(c, math & 15);
        e->row = r ? (int)(r - rows) : -1;
        e->reason = refusal            ? refusal
                    : lib.ready < 0 ? "cuBLASLt or the CUDA driver not found beside libcublas"
                    : !r ? "not in the lock"
                    : c->api == LT_MATMUL && c->scale_type != r->scale_type ? "a scale type the lock's is not"
                    : !aligned ? "an operand not aligned to 256 bytes"
                    : c->b_type != c->a_type ? "A and B of different types" : NULL;
        if (!e->reason)
            e->reason = c->api == LT_MATMUL ? make_algo(e, c, r, handle) : make_plan(e, c, r, pointer_mode, handle);
        if (!e->reason && !(e->workspace = workspace_for(ctx, stream)))
            e->reason = "no memory for the lock's workspace";
        if (e->reason)
            e->row = -1;
        e->next = *bucket, *bucket = e;
        e->all = all_entries, all_entries = e;
        mark_process();
    }
    pthread_mutex_unlock(&table_lock);
    return e;
}

/* 1 and the status when the call ran locked; 0 when it must go to cuBLAS (counted here). */
static int locked(handle_t handle, call_t *c, status_t *status) {
    if (!enabled || standing_aside || lib.ready == 0 || (lib.ready > 0 && lib.cublas != 1))
        return 0;
    int math = 0, pointer_mode = 0;
    void *stream = NULL, *ctx = NULL;
    if (lib.ready > 0 && (lib.get_math(handle, &math) || lib.get_pointer_mode(handle, &pointer_mode)
                          || lib.get_stream(handle, &stream) || lib.ctx_get(&ctx)))
        return 0; /* an invalid handle: cuBLAS says so */
    int aligned = ((uintptr_t)c->a | (uintptr_t)c->b | (uintptr_t)c->c) % ALIGNMENT == 0;
    entry_t *e = entry_for(c, handle, math, pointer_mode, ctx, stream, aligned, NULL);
    if (!e)
        return 0;
    if (e->row >= 0) {
        *status = lib.matmul(handle, e->desc, c->alpha, c->a, e->layout[0], c->b, e->layout[1], c->beta, c->c,
                             e->layout[2], c->c, e->layout[2], e->algo, e->workspace, workspace_bytes, stream);
        if (*status == 0) {
            __atomic_fetch_add(&e->calls, 1, __ATOMIC_RELAXED);
            return 1;
        }
        if (*status != STATUS_NOT_SUPPORTED)
            return 1; /* cuBLASLt's own error, as cuBLAS would have said it */
        e->row = -1, e->reason = "the pinned algorithm does not run this call";
    }
    __atomic_fetch_add(&e->calls, 1, __ATOMIC_RELAXED);
    return 0;
}

/* -- the entry points ---------------------------------------------------------------------------- */

typedef int64_t i64;
typedef long long ll;
#define ROUTE(api_, ...)                                                                                       \
    call_t c = {api_, .epilogue = EPILOGUE_DEFAULT, __VA_ARGS__};                                             \
    status_t status;                                                                                          \
    if (locked(handle, &c, &status))                                                                          \
        return status;

#define ENTRY(api_, fn, params, args, ...)                                                                     \
    __attribute__((visibility("default"))) status_t fn params {                                               \
        status_t(*real) params = (status_t(*) params)real_for(api_);                                          \
        ROUTE(api_, __VA_ARGS__)                                                                              \
        return real ? real args : STATUS_NOT_SUPPORTED;                                                       \
    }

/* A call's fields from its parameters, named alike in every entry point. */
#define OPERANDS(a_type_, b_type_, c_type_, compute_)                                                         \
    .transa = transa, .transb = transb, .a_type = a_type_, .b_type = b_type_, .c_type = c_type_,              \
    .compute = compute_, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc, .alpha = alpha,          \
    .beta = beta, .a = A, .b = B, .c = C
#define STRIDES .stride_a = sA, .stride_b = sB, .stride_c = sC, .batch = batch

/* GemmEx: (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, compute, algo) */
#define GEMM_EX_PARAMS(I)                                                                                      \
    (handle_t handle, int transa, int transb, I m, I n, I k, const void *alpha, const void *A, int Atype, I lda,   \
     const void *B, int Btype, I ldb, const void *beta, void *C, int Ctype, I ldc, int compute, int algo)
#define GEMM_EX_ARGS (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, compute, algo)
#define GEMM_EX_CALL OPERANDS(Atype, Btype, Ctype, compute), .batch = 1
ENTRY(GEMM_EX, cublasGemmEx, GEMM_EX_PARAMS(int), GEMM_EX_ARGS, GEMM_EX_CALL)
ENTRY(GEMM_EX_64, cublasGemmEx_64, GEMM_EX_PARAMS(i64), GEMM_EX_ARGS, GEMM_EX_CALL)

#define STRIDED_EX_PARAMS(I)                                                                                   \
    (handle_t handle, int transa, int transb, I m, I n, I k, const void *alpha, const void *A, int Atype, I lda,   \
     ll sA, const void *B, int Btype, I ldb, ll sB, const void *beta, void *C, int Ctype, I ldc, ll sC, I batch,   \
     int compute, int algo)
#define STRIDED_EX_ARGS                                                                                        \
    (handle, transa, transb, m, n, k, alpha, A, Atype, lda, sA, B, Btype, ldb, sB, beta, C, Ctype, ldc, sC, batch, \
     compute, algo)
#define STRIDED_EX_CALL OPERANDS(Atype, Btype, Ctype, compute), STRIDES
ENTRY(STRIDED_EX, cublasGemmStridedBatchedEx, STRIDED_EX_PARAMS(int), STRIDED_EX_ARGS, STRIDED_EX_CALL)
ENTRY(STRIDED_EX_64, cublasGemmStridedBatchedEx_64, STRIDED_EX_PARAMS(i64), STRIDED_EX_ARGS, STRIDED_EX_CALL)

/* Sgemm: GemmEx of fp32 with COMPUTE_32F, as cuBLAS documents it. */
#define SGEMM_PARAMS(I)                                                                                        \
    (handle_t handle, int transa, int transb, I m, I n, I k, const float *alpha, const float *A, I lda,           \
     const float *B, I ldb, const float *beta, float *C, I ldc)
#define SGEMM_ARGS (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
#define SGEMM_CALL OPERANDS(R_32F, R_32F, R_32F, COMPUTE_32F), .batch = 1
ENTRY(SGEMM, cublasSgemm_v2, SGEMM_PARAMS(int), SGEMM_ARGS, SGEMM_CALL)
ENTRY(SGEMM_64, cublasSgemm_v2_64, SGEMM_PARAMS(i64), SGEMM_ARGS, SGEMM_CALL)

#define SGEMM_STRIDED_PARAMS(I)                                                                                \
    (handle_t handle, int transa, int transb, I m, I n, I k, const float *alpha, const float *A, I lda, ll sA,    \
     const float *B, I ldb, ll sB, const float *beta, float *C, I ldc, ll sC, I batch)
#define SGEMM_STRIDED_ARGS (handle, transa, transb, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch)
#define SGEMM_STRIDED_CALL OPERANDS(R_32F, R_32F, R_32F, COMPUTE_32F), STRIDES
ENTRY(SGEMM_STRIDED, cublasSgemmStridedBatched, SGEMM_STRIDED_PARAMS(int), SGEMM_STRIDED_ARGS, SGEMM_STRIDED_CALL)
ENTRY(SGEMM_STRIDED_64, cublasSgemmStridedBatched_64, SGEMM_STRIDED_PARAMS(i64), SGEMM_STRIDED_ARGS,
      SGEMM_STRIDED_CALL)

/* cublasLtMatmul: the call as its descriptor and layouts give it; NULL, or why the lock cannot read it. */
static const char *read_lt(const void *desc, const void *const layouts[4], call_t *c, int *pointer_mode) {
    int32_t value[6] = {0}, order = 0, batch = 1;
    uint32_t type;
    uint64_t rows, cols;
    int64_t ld, stride = 0;
    size_t n;
    static const int desc_attrs[6] = {DESC_COMPUTE, DESC_SCALE, DESC_POINTER_MODE, DESC_TRANSA, DESC_TRANSB,
                                      DESC_EPILOGUE};
    for (int i = 0; i < 6; i++)
        if (lib.desc_get(desc, desc_attrs[i], &value[i], 4, &n))
            return "a descriptor cuBLASLt would not read";
    c->compute = value[0], c->scale_type = value[1], *pointer_mode = value[2];
    c->transa = value[3], c->transb = value[4], c->epilogue = value[5];
    int64_t shape[4][4];
    for (int i = 0; i < 4; i++) {
        if (lib.layout_get(layouts[i], LAYOUT_TYPE, &type, 4, &n) || lib.layout_get(layouts[i], LAYOUT_ROWS, &rows, 8, &n)
            || lib.layout_get(layouts[i], LAYOUT_COLS, &cols, 8, &n) || lib.layout_get(layouts[i], LAYOUT_LD, &ld, 8, &n))
            return "a layout cuBLASLt would not read";
        lib.layout_get(layouts[i], LAYOUT_ORDER, &order, 4, &n);
        lib.layout_get(layouts[i], LAYOUT_BATCH_COUNT, &batch, 4, &n);
        lib.layout_get(layouts[i], LAYOUT_BATCH_STRIDE, &stride, 8, &n);
        if (order != 0) /* the lock's keys describe column-major operands */
            return "a row-major or tiled layout";
        shape[i][0] = type, shape[i][1] = (int64_t)rows, shape[i][2] = (int64_t)cols, shape[i][3] = ld;
        if (i == 0)
            c->stride_a = stride;
        else if (i == 1)
            c->stride_b = stride;
        else if (i == 3)
            c->stride_c = stride, c->batch = batch;
    }
    if (memcmp(shape[2], shape[3], sizeof shape[2]))
        return "C laid out unlike D";
    c->a_type = (int)shape[0][0], c->b_type = (int)shape[1][0], c->c_type = (int)shape[3][0];
    c->m = shape[3][1], c->n = shape[3][2], c->k = c->transa ? shape[0][1] : shape[0][2];
    c->lda = shape[0][3], c->ldb = shape[1][3], c->ldc = shape[3][3];
    return NULL;
}

typedef status_t (*lt_matmul_t)(handle_t, void *, const void *, const void *, void *, const void *, void *,
                                const void *, const void *, void *, void *, void *, const void *, void *, size_t,
                                void *);

__attribute__((visibility("default"))) status_t cublasLtMatmul(handle_t lt, void *desc, const void *alpha,
                                                               const void *A, void *Adesc, const void *B,
                                                               void *Bdesc, const void *beta, const void *C,
                                                               void *Cdesc, void *D, void *Ddesc, const void *algo,
                                                               void *workspace, size_t workspace_size,
                                                               void *stream) {
    lt_matmul_t real = (lt_matmul_t)real_for(LT_MATMUL);
    if (!real)
        return STATUS_NOT_SUPPORTED;
    call_t c = {LT_MATMUL, .batch = 1, .alpha = alpha, .beta = beta, .a = A, .b = B, .c = D};
    const void *layouts[4] = {Adesc, Bdesc, Cdesc, Ddesc};
    int pointer_mode = 0;
    void *ctx = NULL;
    entry_t *e = NULL;
    if (enabled && !standing_aside && lib.ready > 0 && !lib.ctx_get(&ctx)) {
        const char *refusal = read_lt(desc, layouts, &c, &pointer_mode);
        int aligned = ((uintptr_t)A | (uintptr_t)B | (uintptr_t)C | (uintptr_t)D) % ALIGNMENT == 0;
        e = entry_for(&c, lt, MATH_LT, pointer_mode, ctx, stream, aligned, refusal);
    }
    if (e && e->row >= 0) {
        status_t status = real(lt, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, e->algo, e->workspace,
                               workspace_bytes, stream);
        if (status != STATUS_NOT_SUPPORTED) {
            if (status == 0)
                __atomic_fetch_add(&e->calls, 1, __ATOMIC_RELAXED);
            return status;
        }
        e->row = -1, e->reason = "the pinned algorithm does not run this call";
    }
    if (e)
        __atomic_fetch_add(&e->calls, 1, __ATOMIC_RELAXED);
    return real(lt, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace, workspace_size,
                stream);
}

static void *const WRAPPERS[N_API] = {cublasGemmEx, cublasGemmEx_64, cublasGemmStridedBatchedEx,
                                      cublasGemmStridedBatchedEx_64, cublasSgemm_v2, cublasSgemm_v2_64,
                                      cublasSgemmStridedBatched, cublasSgemmStridedBatched_64, cublasLtMatmul};

static void *wrapper_of(int api) { return WRAPPERS[api]; }

/* The process's PyTorch lock (cublas_det.torch) runs its GEMMs itself: this one stands aside, so that
 * no call is locked twice nor counted twice. */
__attribute__((visibility("default"))) void cublas_det_stand_aside(void) { standing_aside = 1; }

/* -- the report ---------------------------------------------------------------------------------- */

static void write_report(void) {
    if (!process_marked || !report_dir[0])
        return;
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/%d.cublas.json", report_dir, (int)getpid());
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "{\"format\": \"cublas_det.interposer_report\", \"version\": 1, \"stood_aside\": %s, \"calls\": [",
            standing_aside ? "true" : "false");
    const char *sep = "";
    for (entry_t *e = all_entries; e; e = e->all) {
        if (!e->calls)
            continue;
        const int64_t *s = e->sig;
        fprintf(f, "%s\n{\"api\": \"%s\", \"transa\": %ld, \"transb\": %ld, \"a_type\": %ld, \"b_type\": %ld, "
                   "\"c_type\": %ld, \"compute\": %ld, \"m\": %ld, \"n\": %ld, \"k\": %ld, \"batch\": %ld, "
                   "\"math_mode\": %ld, \"epilogue\": %ld, \"scale_type\": %ld, \"calls\": %lu, \"entry\": %d, "
                   "\"reason\": \"%s\"}",
                sep, NAMES[s[0]], (long)s[1], (long)s[2], (long)s[3], (long)s[4], (long)s[5], (long)s[6],
                (long)s[7], (long)s[8], (long)s[9], (long)s[16], (long)s[17], (long)s[22], (long)s[23], (unsigned long)e->calls,
                e->row >= 0 ? rows[e->row].entry : -1, e->reason ? e->reason : "");
        sep = ",";
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) == 0)
        rename(tmp, path);
}
