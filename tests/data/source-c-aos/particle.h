#ifndef PARTICLE_H
#define PARTICLE_H

struct particle {
    double x, y, z;
    double vx, vy, vz;
    double mass, charge;
    double radius, temperature;
    double pressure, density;
};

typedef struct particle particle_t;

extern double g_damping;

void step(particle_t *p, int n, double dt);
void init_particles(struct particle *p, int n);

#endif
