/* Which library answers a lookup, under the interposer: cuBLAS's GEMM names (the interposer's), any other
 * name (cuBLAS's own), and a library's dlsym(RTLD_NEXT) for its own name (the next library's, as without the
 * interposer: glibc must see the caller's return address). Prints one line per lookup: NAME LIBRARY. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#ifdef WRAP /* libwrap.so: shared_name, and the next library's shared_name through RTLD_NEXT */
int shared_name(void) { return 1; }
int next_shared_name(void) {
    int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "shared_name");
    return next ? next() : -1;
}
#elif defined(BASE) /* libbase.so */
int shared_name(void) { return 2; }
#else
int next_shared_name(void);

static void where(const char *name, void *symbol) {
    Dl_info info;
    const char *file = symbol && dladdr(symbol, &info) && info.dli_fname ? strrchr(info.dli_fname, '/') : NULL;
    printf("%s %s\n", name, file ? file + 1 : "none");
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    void *cublas = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL), *lt = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    const char *names[] = {"cublasGemmEx", "cublasSgemm_v2", "cublasGetMathMode", "cublasDgemm_v2"};
    for (int i = 0; i < 4; i++)
        where(names[i], dlsym(cublas, names[i]));
    where("cublasLtMatmul", dlsym(lt, "cublasLtMatmul"));
    where("cublasLtMatmulDescCreate", dlsym(lt, "cublasLtMatmulDescCreate"));
    printf("next_shared_name %d\n", next_shared_name());
    return 0;
}
#endif
