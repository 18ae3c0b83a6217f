#include "particle.h"

double g_damping = 0.99;

void step(particle_t *p, int n, double dt)
{
    for (int i = 0; i < n; i++) {
        p[i].vx *= g_damping;
        p[i].x += p[i].vx * dt;
    }
}

void step_soa(double *x, double *vx, int n, double dt)
{
    for (int i = 0; i < n; i++) {
        vx[i] *= g_damping;
        x[i] += vx[i] * dt;
    }
}
