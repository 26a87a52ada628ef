/*
 * Reference HTTP/1.1 server for bench/http/run.sh: the least a libuv + http-parser server can do to answer
 * GET /healthz with {"status":"ok"} over keep-alive connections. It parses every request with http-parser,
 * answers 404 for other paths, honours Connection: close, and writes with uv_try_write (falling back to
 * uv_write). No logging, no metrics, no timeouts: the floor our server is measured against.
 *
 * Listens on LISTEN_ADDR (default 127.0.0.1) and PORT (default 8080), like entitlement-service.
 * REFERENCE_BODY_BYTES=N (at least 28) pads the body to N bytes ({"status":"ok","padding":"xx…"}), so that
 * bench/entitlements can also measure the floor for an answer as long as its own; below 28 the body stays
 * {"status":"ok"}.
 */
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

/* The /healthz answers, keep-alive and closing, made once in main. */
static char *OK, *OK_CLOSE;
static size_t OK_LENGTH, OK_CLOSE_LENGTH;
static const char NOT_FOUND[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
static const char NOT_FOUND_CLOSE[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

typedef struct {
    uv_tcp_t handle;
    http_parser parser;
    char url[256];
    size_t url_length;
    int closing;
} connection_t;

typedef struct {
    uv_write_t request;
    char bytes[];
} write_t;

static uv_loop_t *loop;
static http_parser_settings settings;
static char read_buffer[65536];

static void on_close(uv_handle_t *handle) { free(handle->data); }

static void close_connection(connection_t *connection) {
    if (!uv_is_closing((uv_handle_t *)&connection->handle)) uv_close((uv_handle_t *)&connection->handle, on_close);
}

static void on_write(uv_write_t *request, int status) {
    connection_t *connection = request->handle->data;
    free(request);
    if (status < 0 || connection->closing) close_connection(connection);
}

static void respond(connection_t *connection, const char *bytes, size_t length) {
    uv_buf_t buffer = uv_buf_init((char *)bytes, (unsigned)length);
    int written = uv_try_write((uv_stream_t *)&connection->handle, &buffer, 1);
    if (written == (int)length) {
        if (connection->closing) close_connection(connection);
        return;
    }
    if (written < 0 && written != UV_EAGAIN) {
        close_connection(connection);
        return;
    }
    size_t offset = written > 0 ? (size_t)written : 0;
    write_t *request = malloc(sizeof(write_t) + length - offset);
    memcpy(request->bytes, bytes + offset, length - offset);
    buffer = uv_buf_init(request->bytes, (unsigned)(length - offset));
    if (uv_write(&request->request, (uv_stream_t *)&connection->handle, &buffer, 1, on_write) != 0) {
        free(request);
        close_connection(connection);
    }
}

static int on_message_begin(http_parser *parser) {
    ((connection_t *)parser->data)->url_length = 0;
    return 0;
}

static int on_url(http_parser *parser, const char *at, size_t length) {
    connection_t *connection = parser->data;
    if (connection->url_length + length > sizeof connection->url) return 1;
    memcpy(connection->url + connection->url_length, at, length);
    connection->url_length += length;
    return 0;
}

static int on_message_complete(http_parser *parser) {
    connection_t *connection = parser->data;
    int keep_alive = http_should_keep_alive(parser);
    int healthz = parser->method == HTTP_GET && connection->url_length == 8 && memcmp(connection->url, "/healthz", 8) == 0;
    connection->closing = !keep_alive;
    if (healthz)
        respond(connection, keep_alive ? OK : OK_CLOSE, keep_alive ? OK_LENGTH : OK_CLOSE_LENGTH);
    else
        respond(connection, keep_alive ? NOT_FOUND : NOT_FOUND_CLOSE, keep_alive ? sizeof NOT_FOUND - 1 : sizeof NOT_FOUND_CLOSE - 1);
    return 0;
}

/* The answer with BODY, keep-alive or closing, in newly allocated memory; its length in *length. */
static char *answer(const char *body, int closing, size_t *length) {
    size_t size = strlen(body) + 128;
    char *bytes = malloc(size);
    int written = snprintf(bytes, size, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n%s\r\n%s",
                           strlen(body), closing ? "Connection: close\r\n" : "", body);
    *length = (size_t)written;
    return bytes;
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buffer) {
    (void)handle;
    (void)suggested;
    *buffer = uv_buf_init(read_buffer, sizeof read_buffer);
}

static void on_read(uv_stream_t *stream, ssize_t count, const uv_buf_t *buffer) {
    connection_t *connection = stream->data;
    if (count < 0) {
        close_connection(connection);
        return;
    }
    if (count == 0 || connection->closing) return;
    size_t parsed = http_parser_execute(&connection->parser, &settings, buffer->base, (size_t)count);
    if (connection->parser.http_errno != HPE_OK || parsed != (size_t)count) close_connection(connection);
}

static void on_connection(uv_stream_t *server, int status) {
    if (status < 0) return;
    connection_t *connection = calloc(1, sizeof *connection);
    uv_tcp_init(loop, &connection->handle);
    connection->handle.data = connection;
    if (uv_accept(server, (uv_stream_t *)&connection->handle) != 0) {
        close_connection(connection);
        return;
    }
    uv_tcp_nodelay(&connection->handle, 1);
    http_parser_init(&connection->parser, HTTP_REQUEST);
    connection->parser.data = connection;
    uv_read_start((uv_stream_t *)&connection->handle, on_alloc, on_read);
}

int main(void) {
    const char *host = getenv("LISTEN_ADDR") ? getenv("LISTEN_ADDR") : "127.0.0.1";
    int port = getenv("PORT") ? atoi(getenv("PORT")) : 8080;
    const char *padded = getenv("REFERENCE_BODY_BYTES");
    size_t body_bytes = padded ? (size_t)atol(padded) : 0;
    static const char PAD_OPEN[] = "{\"status\":\"ok\",\"padding\":\"", PAD_CLOSE[] = "\"}";
    size_t around = sizeof PAD_OPEN - 1 + sizeof PAD_CLOSE - 1;
    char *body;
    if (body_bytes >= around) {
        body = malloc(body_bytes + 1);
        strcpy(body, PAD_OPEN);
        memset(body + sizeof PAD_OPEN - 1, 'x', body_bytes - around);
        strcpy(body + body_bytes - (sizeof PAD_CLOSE - 1), PAD_CLOSE);
    } else {
        body = strdup("{\"status\":\"ok\"}");
    }
    OK = answer(body, 0, &OK_LENGTH);
    OK_CLOSE = answer(body, 1, &OK_CLOSE_LENGTH);
    free(body);
    loop = uv_default_loop();
    http_parser_settings_init(&settings);
    settings.on_message_begin = on_message_begin;
    settings.on_url = on_url;
    settings.on_message_complete = on_message_complete;

    struct sockaddr_in address;
    uv_tcp_t server;
    uv_tcp_init(loop, &server);
    int error = uv_ip4_addr(host, port, &address);
    if (!error) error = uv_tcp_bind(&server, (const struct sockaddr *)&address, 0);
    if (!error) error = uv_listen((uv_stream_t *)&server, 1024, on_connection);
    if (error) {
        fprintf(stderr, "reference: cannot listen on %s:%d: %s\n", host, port, uv_strerror(error));
        return 1;
    }
    fprintf(stderr, "reference: listening on %s:%d\n", host, port);
    return uv_run(loop, UV_RUN_DEFAULT);
}
