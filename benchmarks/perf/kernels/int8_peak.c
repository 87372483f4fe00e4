/* The core's int8 multiply-accumulate limit: the instruction llama.cpp's quantized dot products
 * are built on (AVX-512 VNNI vpdpbusd, AVX-VNNI, or AVX2 vpmaddubsw + vpmaddwd), issued from
 * independent register-resident chains so that nothing but the execution units bounds it.
 * Prints: "<kernel> <int8 multiply-accumulates per second>". Usage: int8_peak [seconds]. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#define CHAINS 12

__attribute__((target("avx2"))) static double run_avx2(long iters, int seed) {
    __m256i a[CHAINS], acc[CHAINS];
    __m256i b = _mm256_set1_epi8((char)(seed + 3)), ones = _mm256_set1_epi16(1);
    for (int c = 0; c < CHAINS; c++) { a[c] = _mm256_set1_epi8((char)(seed + c)); acc[c] = _mm256_setzero_si256(); }
    for (long i = 0; i < iters; i++) {
        for (int c = 0; c < CHAINS; c++)
            acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(a[c], b), ones));
        __asm__ volatile("" : "+x"(b));
    }
    int32_t out[8], sum = 0;
    for (int c = 0; c < CHAINS; c++) { _mm256_storeu_si256((__m256i *)out, acc[c]); sum += out[0]; }
    if (sum == 42) puts("");
    return (double)iters * CHAINS * 32; /* 32 int8 products per vpmaddubsw */
}

__attribute__((target("avxvnni"))) static double run_avxvnni(long iters, int seed) {
    __m256i a[CHAINS], acc[CHAINS];
    __m256i b = _mm256_set1_epi8((char)(seed + 3));
    for (int c = 0; c < CHAINS; c++) { a[c] = _mm256_set1_epi8((char)(seed + c)); acc[c] = _mm256_setzero_si256(); }
    for (long i = 0; i < iters; i++) {
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_dpbusd_avx_epi32(acc[c], a[c], b);
        __asm__ volatile("" : "+x"(b));
    }
    int32_t out[8], sum = 0;
    for (int c = 0; c < CHAINS; c++) { _mm256_storeu_si256((__m256i *)out, acc[c]); sum += out[0]; }
    if (sum == 42) puts("");
    return (double)iters * CHAINS * 32;
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double run_avx512vnni(long iters, int seed) {
    __m512i a[CHAINS], acc[CHAINS];
    __m512i b = _mm512_set1_epi8((char)(seed + 3));
    for (int c = 0; c < CHAINS; c++) { a[c] = _mm512_set1_epi8((char)(seed + c)); acc[c] = _mm512_setzero_si512(); }
    for (long i = 0; i < iters; i++) {
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_dpbusd_epi32(acc[c], a[c], b);
        __asm__ volatile("" : "+v"(b));
    }
    int32_t sum = 0;
    for (int c = 0; c < CHAINS; c++) sum += _mm512_reduce_add_epi32(acc[c]);
    if (sum == 42) puts("");
    return (double)iters * CHAINS * 64;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    const char *name;
    double (*run)(long, int);
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")) {
        name = "avx512-vnni"; run = run_avx512vnni;
    } else if (__builtin_cpu_supports("avxvnni")) {
        name = "avx-vnni"; run = run_avxvnni;
    } else if (__builtin_cpu_supports("avx2")) {
        name = "avx2"; run = run_avx2;
    } else {
        puts("none 0");
        return 0;
    }
    long iters = 1 << 16;
    run(iters, argc);  /* warm up (clocks, caches) */
    double best = 0;
    double end = now() + seconds;
    while (now() < end) {
        double t0 = now();
        double macs = run(iters * 16, argc);
        double rate = macs / (now() - t0);
        if (rate > best) best = rate;
    }
    printf("%s %.6g\n", name, best);
    return 0;
}
