/* memory-latency SIZE_MB...: for each size, the nanoseconds of one read that depends on the one before, over a
 * working set of that many megabytes (one read per 64-byte line, in a random cycle through all of them), on
 * the CPU it runs on. bench/entitlements/run.sh prints it before each round: a hit of the benchmark reads about
 * 15 MB of held answers at random, so how fast this machine's caches and memory answer at such sizes sets
 * much of the hot figure, and the machine's neighbours change that from one run to the next. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define LINE 64
#define STEPS 4000000

static double nanoseconds_per_read(size_t megabytes) {
    size_t lines = megabytes * 1024 * 1024 / LINE;
    uint64_t *memory = aligned_alloc(LINE, lines * LINE);
    size_t *order = malloc(lines * sizeof *order);
    if (!memory || !order) { perror("memory-latency"); exit(1); }
    uint64_t seed = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i < lines; i++) order[i] = i;
    for (size_t i = lines - 1; i > 0; i--) {  /* Fisher-Yates with xorshift64 */
        seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
        size_t j = seed % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    const size_t words = LINE / sizeof *memory;
    for (size_t i = 0; i < lines; i++) memory[order[i] * words] = order[(i + 1) % lines] * words;
    free(order);
    uint64_t at = 0;
    for (size_t i = 0; i < lines && i < STEPS; i++) at = memory[at];  /* warm: caches and page tables */
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (size_t i = 0; i < STEPS; i++) at = memory[at];
    clock_gettime(CLOCK_MONOTONIC, &end);
    free(memory);
    double elapsed = (end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec);
    return elapsed / STEPS + (at == 1 ? 1e-12 : 0);  /* `at` used, so the chain is not optimized away */
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) printf("%s%.1f", i > 1 ? " " : "", nanoseconds_per_read((size_t)atol(argv[i])));
    printf("\n");
    return 0;
}
