/* particles.c -- editable kernel of the particles-aos-c workload.
 *
 * Planted bottleneck (see README.md): an array of 128-byte structures
 * (16 doubles, two cache lines each) of which the hot loop in psys_advance()
 * touches only x, vx and stiffness -- 24 bytes.  x and vx sit in the first
 * cache line and stiffness in the second, so every particle drags both lines
 * through the memory hierarchy: ~5x more traffic than the data used.
 */
#include <stdint.h>
#include <stdlib.h>
#include "particles.h"

struct particle {
    double x, y, z;               /* position            (line 0) */
    double vx, vy, vz;            /* velocity            (line 0) */
    double mass, charge;          /*                     (line 0) */
    double radius, temperature;   /*                     (line 1) */
    double pressure, density;     /*                     (line 1) */
    double stiffness;             /* spring constant / mass (line 1) */
    double energy, age, id;       /*                     (line 1) */
};

struct psys {
    size_t n;
    struct particle *p;
};

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform double in [0, 1) from (seed, i, field) */
static double u01(unsigned seed, size_t i, unsigned field)
{
    uint64_t h = mix64(((uint64_t)seed << 40) ^ ((uint64_t)field << 36) ^ (uint64_t)i);
    return (double)(h >> 11) * 0x1.0p-53;
}

psys *psys_create(size_t n, unsigned seed)
{
    psys *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    s->n = n;
    if (posix_memalign((void **)&s->p, 64, n * sizeof *s->p) != 0) {
        free(s);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        struct particle *q = &s->p[i];
        q->x = 2.0 * u01(seed, i, 0) - 1.0;
        q->y = 2.0 * u01(seed, i, 1) - 1.0;
        q->z = 2.0 * u01(seed, i, 2) - 1.0;
        q->vx = 0.5 * u01(seed, i, 3) - 0.25;
        q->vy = 0.5 * u01(seed, i, 4) - 0.25;
        q->vz = 0.5 * u01(seed, i, 5) - 0.25;
        q->mass = 1.0 + u01(seed, i, 6);
        q->charge = u01(seed, i, 7) < 0.5 ? -1.0 : 1.0;
        q->radius = 0.01 + 0.01 * u01(seed, i, 8);
        q->temperature = 300.0;
        q->pressure = 1.0;
        q->density = q->mass / (q->radius * q->radius * q->radius);
        q->stiffness = 0.5 + 4.0 * u01(seed, i, 9);
        q->energy = 0.0;
        q->age = 0.0;
        q->id = (double)i;
    }
    return s;
}

void psys_advance(psys *s, int steps, double dt)
{
    struct particle *p = s->p;
    size_t n = s->n;
    for (int t = 0; t < steps; t++) {
        for (size_t i = 0; i < n; i++) {
            /* symplectic Euler for x'' = -stiffness * x */
            p[i].vx -= p[i].stiffness * p[i].x * dt;
            p[i].x += p[i].vx * dt;
        }
    }
}

double psys_get(const psys *s, size_t i, enum pfield f)
{
    const struct particle *q = &s->p[i];
    switch (f) {
    case PF_X:         return q->x;
    case PF_VX:        return q->vx;
    case PF_STIFFNESS: return q->stiffness;
    case PF_MASS:      return q->mass;
    case PF_ENERGY:    return 0.5 * q->mass * q->vx * q->vx
                              + 0.5 * q->mass * q->stiffness * q->x * q->x;
    }
    return 0.0;
}

void psys_destroy(psys *s)
{
    if (s) {
        free(s->p);
        free(s);
    }
}
