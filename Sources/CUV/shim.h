#ifndef ENTITLEMENT_CUV_SHIM_H
#define ENTITLEMENT_CUV_SHIM_H
#include <uv.h>
#include <http_parser.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>

/// libuv handles all start with the same fields; these casts let Swift pass a concrete handle where
/// libuv wants the generic one without spelling out unsafe pointer rebinding at every call.
static inline uv_handle_t *cuv_handle(void *h) { return (uv_handle_t *)h; }
static inline uv_stream_t *cuv_stream(void *h) { return (uv_stream_t *)h; }

/// Sets one integer socket option; returns 0, or -1 with `errno` set.
static inline int cuv_setsockopt_int(int fd, int level, int name, int value) {
    return setsockopt(fd, level, name, &value, sizeof value) == 0 ? 0 : -1;
}
#endif
