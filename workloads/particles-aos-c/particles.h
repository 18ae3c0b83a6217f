/* particles.h -- editable kernel interface of the particles-aos-c workload.
 * The particle system is opaque to the harness: the layout is owned by
 * particles.c, and the harness reads state only through psys_get(). */
#ifndef PARTICLES_H
#define PARTICLES_H

#include <stddef.h>

typedef struct psys psys;

enum pfield { PF_X, PF_VX, PF_STIFFNESS, PF_MASS, PF_ENERGY };

/* Create n particles initialised deterministically from seed (NULL on OOM). */
psys *psys_create(size_t n, unsigned seed);

/* Advance every particle `steps` times by dt (the hot loop, timed as ROI). */
void psys_advance(psys *s, int steps, double dt);

/* Read one field of particle i. */
double psys_get(const psys *s, size_t i, enum pfield f);

void psys_destroy(psys *s);

#endif
