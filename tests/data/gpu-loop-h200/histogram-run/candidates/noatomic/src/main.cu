/* Harness (NOT editable): ./histogram N BINS REPS SEED
 * Generates N skewed bin indices in [0, BINS) on the GPU from SEED (about 3/4 of them in 4 hot
 * bins), builds the histogram REPS times with histogram() (cleared before each), copies it back
 * and prints every bin's count, one line a bin: the whole output, exact integers. */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "histogram.h"

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

__device__ static inline uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

__global__ void make_data(unsigned *d, long n, int bins, uint64_t seed)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    uint64_t h = mix(seed * 0x100000001b3ULL + (uint64_t)i);
    d[i] = (h >> 8) % 4 != 0 ? (unsigned)((h >> 16) % 4) * (bins / 4)
                             : (unsigned)((h >> 20) % (uint64_t)bins);
}

int main(int argc, char **argv)
{
    if (argc != 5) { fprintf(stderr, "usage: %s N BINS REPS SEED\n", argv[0]); return 2; }
    long n = atol(argv[1]);
    int bins = atoi(argv[2]), reps = atoi(argv[3]);
    uint64_t seed = strtoull(argv[4], NULL, 10);
    unsigned *data, *hist;
    CHECK(cudaMalloc(&data, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&hist, bins * sizeof(unsigned)));
    make_data<<<(unsigned)((n + 255) / 256), 256>>>(data, n, bins, seed);
    CHECK(cudaGetLastError());
    for (int r = 0; r < reps; r++) {
        CHECK(cudaMemsetAsync(hist, 0, bins * sizeof(unsigned), 0));
        histogram(data, n, hist, bins, 0);
    }
    CHECK(cudaGetLastError());
    std::vector<unsigned> h(bins);
    CHECK(cudaMemcpy(h.data(), hist, bins * sizeof(unsigned), cudaMemcpyDeviceToHost));
    printf("n %ld bins %d reps %d seed %llu\n", n, bins, reps, (unsigned long long)seed);
    unsigned long long total = 0;
    for (int b = 0; b < bins; b++) {
        printf("%d %u\n", b, h[b]);
        total += h[b];
    }
    printf("total %llu\n", total);
    CHECK(cudaFree(data)); CHECK(cudaFree(hist));
    return 0;
}
