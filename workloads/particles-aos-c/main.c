/* main.c -- harness of the particles-aos-c workload (NOT editable).
 *
 * usage: ./particles NPARTICLES STEPS SEED
 * Creates the particle system, times psys_advance() with CLOCK_MONOTONIC
 * (the region of interest), then prints the whole final state: x and vx of
 * every particle (C99 hex floats, exact, formatted without printf so that
 * printing a million particles stays cheap), then the total energy. The oracle compares all of it, so no particle can be skipped.
 * The line "roi_s=<seconds>" is the metric; it is the only nondeterministic
 * line and the oracle skips it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "particles.h"

/* Write x as a C99 hex float (e.g. -0x1.8cd255afae7e3p+13; Python's float.fromhex reads it). */
static char *put_hex(char *p, double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    unsigned e = (unsigned)(b >> 52) & 0x7ffu;
    uint64_t m = b & ((1ull << 52) - 1);
    if (e == 0x7ffu) {
        memcpy(p, m ? "nan" : ((b >> 63) ? "-inf" : "inf"), 4);
        return p + (m ? 3 : ((b >> 63) ? 4 : 3));
    }
    if (b >> 63)
        *p++ = '-';
    *p++ = '0';
    *p++ = 'x';
    *p++ = e ? '1' : '0';
    int exp = e ? (int)e - 1023 : (m ? -1022 : 0);
    *p++ = '.';
    for (int k = 12; k >= 0; k--)
        *p++ = "0123456789abcdef"[(m >> (4 * k)) & 0xf];
    *p++ = 'p';
    *p++ = exp < 0 ? '-' : '+';
    unsigned u = (unsigned)(exp < 0 ? -exp : exp);
    char digits[8];
    int t = 0;
    do {
        digits[t++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (t)
        *p++ = digits[--t];
    return p;
}

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
    char line[64];
    for (size_t i = 0; i < n; i++) {
        char *p = put_hex(line, psys_get(s, i, PF_X));
        *p++ = ' ';
        p = put_hex(p, psys_get(s, i, PF_VX));
        *p++ = '\n';
        fwrite(line, 1, (size_t)(p - line), stdout);
        se += psys_get(s, i, PF_ENERGY);
    }
    printf("energy %.12e\n", se);
    printf("roi_s=%.6f\n", t1 - t0);

    psys_destroy(s);
    return 0;
}
