/* Reference STREAM-style kernels for benchmarks/stream_vs_c.py.
 * Build: gcc -O3 -fopenmp -march=native stream_ref.c -o stream_ref
 * Usage: stream_ref N_ELEMENTS NTIMES   -> one JSON line: best GB/s per kernel
 * Bytes counted as STREAM does: copy 16, scale 16, add 24, triad 24 per element. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static double now(void) { return omp_get_wtime(); }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000000L;
    int ntimes = argc > 2 ? atoi(argv[2]) : 10;
    double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double)), *c = malloc(n * sizeof(double));
    if (!a || !b || !c) { fprintf(stderr, "allocation failed\n"); return 1; }
    const double q = 3.0;
#pragma omp parallel for schedule(static)
    for (long j = 0; j < n; j++) { a[j] = 1.0; b[j] = 2.0; c[j] = 0.0; }
    double best[4] = {1e30, 1e30, 1e30, 1e30};
    for (int k = 0; k < ntimes; k++) {
        double t;
        t = now();
#pragma omp parallel for schedule(static)
        for (long j = 0; j < n; j++) c[j] = a[j];
        t = now() - t; if (k && t < best[0]) best[0] = t;
        t = now();
#pragma omp parallel for schedule(static)
        for (long j = 0; j < n; j++) b[j] = q * c[j];
        t = now() - t; if (k && t < best[1]) best[1] = t;
        t = now();
#pragma omp parallel for schedule(static)
        for (long j = 0; j < n; j++) c[j] = a[j] + b[j];
        t = now() - t; if (k && t < best[2]) best[2] = t;
        t = now();
#pragma omp parallel for schedule(static)
        for (long j = 0; j < n; j++) a[j] = b[j] + q * c[j];
        t = now() - t; if (k && t < best[3]) best[3] = t;
    }
    double bytes[4] = {16.0 * n, 16.0 * n, 24.0 * n, 24.0 * n};
    printf("{\"threads\": %d, \"n\": %ld, \"copy\": %.3f, \"scale\": %.3f, \"add\": %.3f, \"triad\": %.3f, \"check\": %.6g}\n",
           omp_get_max_threads(), n, bytes[0] / best[0] / 1e9, bytes[1] / best[1] / 1e9, bytes[2] / best[2] / 1e9,
           bytes[3] / best[3] / 1e9, a[n / 2] + b[n / 3] + c[n - 1]);
    free(a); free(b); free(c);
    return 0;
}
