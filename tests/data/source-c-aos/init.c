#include "particle.h"

void init_particles(struct particle *p, int n)
{
    for (int i = 0; i < n; i++) {
        p[i].x = i;
        p[i].vx = 1.0;
        p[i].mass = 2.0;
    }
}

void set_damping(double d)
{
    g_damping = d;
}
