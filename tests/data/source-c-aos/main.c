#include <stdlib.h>
#include "particle.h"

int main(void)
{
    int n = 1000;
    struct particle *p = malloc(n * sizeof *p);
    init_particles(p, n);
    set_damping(0.5);
    for (int t = 0; t < 10; t++)
        step(p, n, 0.01);
    free(p);
    return 0;
}
