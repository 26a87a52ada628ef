#ifndef ENTITLEMENT_CUV_SHIM_H
#define ENTITLEMENT_CUV_SHIM_H
#include <uv.h>
#include <http_parser.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/// libuv handles all start with the same fields; these casts let Swift pass a concrete handle where
/// libuv wants the generic one without spelling out unsafe pointer rebinding at every call.
static inline uv_handle_t *cuv_handle(void *h) { return (uv_handle_t *)h; }
static inline uv_stream_t *cuv_stream(void *h) { return (uv_stream_t *)h; }

/// Sets one integer socket option; returns 0, or -1 with `errno` set.
static inline int cuv_setsockopt_int(int fd, int level, int name, int value) {
    return setsockopt(fd, level, name, &value, sizeof value) == 0 ? 0 : -1;
}

/// Asks the kernel to send `signal` to this process when the thread that started it ends (Linux
/// `PR_SET_PDEATHSIG`; `prctl` is variadic, which Swift cannot call). Returns 0, or -1 with `errno` set.
static inline int cuv_set_parent_death_signal(int signal) {
    return prctl(PR_SET_PDEATHSIG, (unsigned long)signal, 0UL, 0UL, 0UL);
}
/// Asks the CPU to start loading the `count` bytes at `p` into its caches without waiting for them (x86
/// `prefetcht0`, one per 64-byte line): memory about to be read is fetched while other work goes on.
static inline void cuv_prefetch(const void *p, long count) {
    for (long offset = 0; offset < count; offset += 64) __builtin_prefetch((const char *)p + offset, 0, 3);
}

/// A new anonymous memory file (Linux `memfd_create`, close-on-exec), for memory that processes started by
/// this one share through an inherited descriptor; -1 with `errno` set on failure.
static inline int cuv_memfd_create(const char *name) {
    return (int)syscall(SYS_memfd_create, name, 1U /* MFD_CLOEXEC */);
}

/// Reads the 64-bit word at `p` atomically (acquire): what another process stored there, whole.
static inline unsigned long long cuv_atomic_load(const unsigned long long *p) {
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/// Adds 1 to the 64-bit word at `p` atomically and returns the new value: concurrent increments, from any
/// process mapping the word, each get their own value.
static inline unsigned long long cuv_atomic_increment(unsigned long long *p) {
    return __atomic_add_fetch(p, 1ULL, __ATOMIC_SEQ_CST);
}
#endif
