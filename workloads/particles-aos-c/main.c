/* main.c -- harness of the particles-aos-c workload (NOT editable).
 *
 * usage: ./particles NPARTICLES STEPS SEED
 * Creates the particle system, times psys_advance() with CLOCK_MONOTONIC
 * (the region of interest), then prints the whole final state: x and vx of
 * every particle (C99 hex floats, exact and cheap to format), then the total
 * energy. The oracle compares all of it, so no particle can be skipped.
 * The line "roi_s=<seconds>" is the metric; it is the only nondeterministic
 * line and the oracle skips it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "particles.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s NPARTICLES STEPS SEED\n", argv[0]);
        return 2;
    }
    size_t n = (size_t)strtoull(argv[1], NULL, 10);
    int steps = atoi(argv[2]);
    unsigned seed = (unsigned)strtoul(argv[3], NULL, 10);
    if (n < 16 || steps < 1) {
        fprintf(stderr, "need NPARTICLES >= 16 and STEPS >= 1\n");
        return 2;
    }
    const double dt = 1e-3;

    psys *s = psys_create(n, seed);
    if (!s) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }

    double t0 = now_s();
    psys_advance(s, steps, dt);
    double t1 = now_s();

    printf("n %zu\n", n);
    printf("steps %d\n", steps);
    printf("seed %u\n", seed);
    double se = 0.0;
    for (size_t i = 0; i < n; i++) {
        printf("%a %a\n", psys_get(s, i, PF_X), psys_get(s, i, PF_VX));
        se += psys_get(s, i, PF_ENERGY);
    }
    printf("energy %.12e\n", se);
    printf("roi_s=%.6f\n", t1 - t0);

    psys_destroy(s);
    return 0;
}
