#ifndef ENTITLEMENT_CCURL_SHIM_H
#define ENTITLEMENT_CCURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are variadic, which Swift cannot call.
   These typed wrappers fix the argument type per family of options. */

static inline CURLcode ccurl_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_share(CURL *h, CURLSH *v) { return curl_easy_setopt(h, CURLOPT_SHARE, v); }
static inline CURLcode ccurl_easy_setopt_off_t(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }

typedef size_t (*ccurl_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);
static inline CURLcode ccurl_easy_setopt_data_callback(CURL *h, CURLoption o, ccurl_data_callback v) { return curl_easy_setopt(h, o, v); }

static inline CURLcode ccurl_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_easy_getinfo_pointer(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_easy_getinfo_double(CURL *h, CURLINFO i, double *v) { return curl_easy_getinfo(h, i, v); }

static inline CURLMcode ccurl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode ccurl_multi_setopt_pointer(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }

typedef int (*ccurl_socket_callback)(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp);
typedef int (*ccurl_timer_callback)(CURLM *multi, long timeout_ms, void *userp);
static inline CURLMcode ccurl_multi_setopt_socket_callback(CURLM *m, ccurl_socket_callback f) { return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, f); }
static inline CURLMcode ccurl_multi_setopt_timer_callback(CURLM *m, ccurl_timer_callback f) { return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, f); }

static inline CURLSHcode ccurl_share_setopt_long(CURLSH *s, CURLSHoption o, long v) { return curl_share_setopt(s, o, v); }

/* curl_global_init's flags and the pseudo-socket of timeouts are macros Swift does not import reliably. */
static const long ccurl_global_default = CURL_GLOBAL_DEFAULT;
static const curl_socket_t ccurl_socket_timeout = CURL_SOCKET_TIMEOUT;

/* CURLMsg carries a union; Swift reads the result through this accessor. */
static inline CURLcode ccurl_msg_result(CURLMsg *m) { return m->data.result; }
#endif
