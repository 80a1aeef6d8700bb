/* The load client of server_load.py's paced workload, in C so that the
 * client is not what limits the measure: one thread, epoll, non-blocking
 * sockets, libc only. server_load.py compiles it (cc -O2) into a temporary
 * directory, cached by the source's hash.
 *
 *     _paced_client PORT PATH CONNECTIONS SECONDS BODY
 *
 * Opens CONNECTIONS keep-alive connections to 127.0.0.1:PORT, 50 more every
 * 50 ms (an accept queue is finite), each POSTing BODY to PATH; reads the
 * streamed answer (SSE over chunked HTTP/1.1) and, at its end (the frame
 * "data: [DONE]" then the chunked terminator "0\r\n\r\n"), sends the next
 * request on the same connection, until SECONDS from the start have passed;
 * an answer under way then is read to its end (for at most 60 s more).
 *
 * For each "text-delta" after the first in an answer it records the gap
 * since the answer's previous delta arrived (arrival: the time the read that
 * completed it returned from epoll_wait; several deltas completed by one
 * read: the first gets the gap, the others 0, also in the answer's first
 * read). Gaps are recorded from the moment the last connection
 * is opened to SECONDS (the ramp and the answers finishing after the time
 * is up are not measured); chunks and requests are counted throughout.
 * A connection that fails (refused, reset, end of file mid-answer, a status
 * other than 200, connected only after SECONDS or not at all) counts one
 * error and is not reopened.
 *
 * Prints one JSON line: chunks, requests, errors, open (answers under way at
 * the end: 0 unless cut off), peak (most answers under way at once), seconds
 * (from the start to the last connection's end), gaps (how many), gap_p50_ms,
 * gap_p99_ms, gap_max_ms (nearest rank as server_load.py's trio client:
 * sorted[min(n - 1, int(p * n))]), stream_s (the seconds answers were under
 * way, summed: from a request's start to its answer's end or failure),
 * client_cpu_s (this process's user + system CPU).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#define RAMP_BATCH 50
#define RAMP_EVERY 0.05
#define GRACE 60.0
#define READ_SIZE 65536

static const char DELTA[] = "\"text-delta\"";
static const char DONE[] = "[DONE]";
static const char END[] = "\r\n0\r\n\r\n";
#define DELTA_LEN (sizeof DELTA - 1)
#define DONE_LEN (sizeof DONE - 1)
#define END_LEN (sizeof END - 1)
#define CARRY 16 /* > every pattern's length */

enum state { CONNECTING, SENDING, READING, IDLE, CLOSED };

struct conn {
    int fd;
    enum state state;
    size_t sent;      /* bytes of the request sent */
    size_t got;       /* bytes of this answer read so far */
    double asked;     /* when this answer's request was started */
    double last;      /* when this answer's previous delta arrived; 0: none */
    int done;         /* "[DONE]" seen in this answer */
    char status[12];  /* the answer's first bytes: "HTTP/1.1 200" */
    size_t carry_len; /* the answer's last bytes read (up to CARRY) */
    char carry[CARRY];
};

static char *request;
static size_t request_len;
static long chunks, requests, errors, open_now, peak;
static double stream_s; /* the seconds answers were under way, summed */
static uint32_t *gaps; /* microseconds */
static size_t ngaps, gaps_cap;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void record(double gap) {
    if (ngaps == gaps_cap) {
        gaps_cap = gaps_cap ? gaps_cap * 2 : 1 << 16;
        gaps = realloc(gaps, gaps_cap * sizeof *gaps);
        if (gaps == NULL) {
            perror("realloc");
            exit(2);
        }
    }
    gaps[ngaps++] = gap < 0 ? 0 : (uint32_t)(gap * 1e6 + 0.5);
}

/* How many times ``pat`` occurs in ``carry`` + ``data`` ending inside
 * ``data`` (an occurrence split between two reads is counted once, in the
 * read that completes it). */
static long occurrences(const char *carry, size_t carry_len, const char *data,
                        size_t len, const char *pat, size_t pat_len) {
    long n = 0;
    char window[2 * CARRY];
    size_t head = carry_len < pat_len - 1 ? carry_len : pat_len - 1;
    size_t tail = len < pat_len - 1 ? len : pat_len - 1;
    memcpy(window, carry + carry_len - head, head);
    memcpy(window + head, data, tail);
    for (size_t i = 0; i + pat_len <= head + tail; i++) {
        if (i < head && i + pat_len > head && memcmp(window + i, pat, pat_len) == 0) {
            n++;
        }
    }
    const char *p = data, *end = data + len;
    while ((p = memmem(p, (size_t)(end - p), pat, pat_len)) != NULL) {
        n++;
        p += pat_len;
    }
    return n;
}

static void set_events(int ep, struct conn *c, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static long live; /* connections not closed */

/* Closes the connection; ``error``: it failed (counted). */
static void finish(struct conn *c, int error) {
    if (c->state == CLOSED) {
        return;
    }
    if (c->state == READING || c->state == SENDING) {
        open_now--;
        stream_s += now() - c->asked;
    }
    errors += error;
    close(c->fd);
    c->state = CLOSED;
    live--;
}

static void fail(struct conn *c) { finish(c, 1); }

static void start_request(int ep, struct conn *c) {
    c->state = SENDING;
    c->asked = now();
    c->sent = 0;
    c->got = 0;
    c->last = 0;
    c->done = 0;
    c->carry_len = 0;
    open_now++;
    if (open_now > peak) {
        peak = open_now;
    }
    set_events(ep, c, EPOLLOUT);
}

static void send_some(int ep, struct conn *c) {
    while (c->sent < request_len) {
        ssize_t n = send(c->fd, request + c->sent, request_len - c->sent, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) {
                return;
            }
            fail(c);
            return;
        }
        c->sent += (size_t)n;
    }
    c->state = READING;
    set_events(ep, c, EPOLLIN);
}

/* Reads what there is; returns 1 when the answer ended. */
static int read_some(struct conn *c, char *buffer, double t, double measure_from,
                     double deadline) {
    for (;;) {
        ssize_t n = recv(c->fd, buffer, READ_SIZE, 0);
        if (n == 0) {
            fail(c); /* end of file mid-answer */
            return 0;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) {
                return 0;
            }
            fail(c);
            return 0;
        }
        size_t len = (size_t)n;
        if (c->got < sizeof c->status) {
            size_t take = sizeof c->status - c->got;
            take = take < len ? take : len;
            memcpy(c->status + c->got, buffer, take);
            if (c->got + take == sizeof c->status &&
                memcmp(c->status, "HTTP/1.1 200", sizeof c->status) != 0) {
                fail(c);
                return 0;
            }
        }
        c->got += len;
        long deltas = occurrences(c->carry, c->carry_len, buffer, len, DELTA, DELTA_LEN);
        if (deltas) {
            if (t >= measure_from && t <= deadline) {
                if (c->last != 0) {
                    record(t - c->last);
                }
                for (long i = 1; i < deltas; i++) {
                    record(0); /* completed by the same read */
                }
            }
            c->last = t;
            chunks += deltas;
        }
        if (!c->done &&
            occurrences(c->carry, c->carry_len, buffer, len, DONE, DONE_LEN)) {
            c->done = 1;
        }
        /* Keep the answer's last CARRY bytes. */
        if (len >= CARRY) {
            memcpy(c->carry, buffer + len - CARRY, CARRY);
            c->carry_len = CARRY;
        } else {
            size_t keep = c->carry_len + len > CARRY ? CARRY - len : c->carry_len;
            memmove(c->carry, c->carry + c->carry_len - keep, keep);
            memcpy(c->carry + keep, buffer, len);
            c->carry_len = keep + len;
        }
        if (c->done && c->carry_len >= END_LEN &&
            memcmp(c->carry + c->carry_len - END_LEN, END, END_LEN) == 0) {
            return 1; /* the client sends nothing until the answer ends: no more bytes */
        }
        if (len < READ_SIZE) {
            return 0; /* drained, most likely: epoll (level-triggered) says if not */
        }
    }
}

static int by_value(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static double quantile_ms(double p) {
    if (ngaps == 0) {
        return 0.0;
    }
    size_t i = (size_t)(p * (double)ngaps);
    if (i > ngaps - 1) {
        i = ngaps - 1;
    }
    return gaps[i] / 1000.0;
}

static void open_connection(int ep, struct conn *c, const struct sockaddr_in *to) {
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        c->state = CLOSED;
        errors++;
        return;
    }
    live++;
    c->state = CONNECTING;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    if (connect(c->fd, (const struct sockaddr *)to, sizeof *to) == 0) {
        start_request(ep, c);
    } else if (errno != EINPROGRESS) {
        fail(c);
    }
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s PORT PATH CONNECTIONS SECONDS BODY\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    const char *path = argv[2];
    long connections = atol(argv[3]);
    double seconds = atof(argv[4]);
    const char *body = argv[5];
    if (port <= 0 || connections <= 0 || seconds < 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    size_t body_len = strlen(body);
    request = malloc(strlen(path) + body_len + 256);
    request_len = (size_t)sprintf(request,
                                  "POST %s HTTP/1.1\r\nhost: x\r\ncontent-type: "
                                  "application/json\r\ncontent-length: %zu\r\n\r\n%s",
                                  path, body_len, body);

    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);

    struct conn *conns = calloc((size_t)connections, sizeof *conns);
    char *buffer = malloc(READ_SIZE);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (conns == NULL || buffer == NULL || ep < 0) {
        perror("setup");
        return 2;
    }
    struct epoll_event events[1024];
    double started = now();
    double deadline = started + seconds;
    double measure_from = deadline; /* until the ramp is over */
    long opened = 0;
    double next_batch = started;

    for (;;) {
        double t = now();
        if (opened < connections && t >= next_batch) {
            long stop = opened + RAMP_BATCH < connections ? opened + RAMP_BATCH : connections;
            for (; opened < stop; opened++) {
                open_connection(ep, &conns[opened], &to);
            }
            next_batch += RAMP_EVERY;
            if (opened == connections) {
                measure_from = now();
            }
        }
        if ((opened == connections && live == 0) || t > deadline + GRACE) {
            break; /* the time is up and every answer under way has ended */
        }
        double wake = opened < connections ? next_batch : deadline + GRACE;
        int timeout = (int)((wake - t) * 1000) + 1;
        int n = epoll_wait(ep, events, 1024, timeout < 0 ? 0 : timeout);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            perror("epoll_wait");
            return 2;
        }
        t = now();
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (c->state == CONNECTING) {
                int err = 0;
                socklen_t err_len = sizeof err;
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &err_len);
                if (err != 0) {
                    fail(c);
                } else if (t >= deadline) {
                    fail(c); /* connected too late: it never asked */
                } else {
                    start_request(ep, c);
                }
            }
            if (c->state == SENDING) {
                send_some(ep, c);
            } else if (c->state == READING &&
                       read_some(c, buffer, t, measure_from, deadline)) {
                requests++;
                open_now--;
                stream_s += t - c->asked;
                c->state = IDLE;
                if (t < deadline) {
                    start_request(ep, c);
                    send_some(ep, c);
                } else {
                    finish(c, 0);
                }
            }
        }
    }
    long cut = open_now;
    for (long k = 0; k < opened; k++) {
        struct conn *c = &conns[k];
        if (c->state == CONNECTING) {
            finish(c, 1); /* still not connected after the grace time */
        } else if (c->state != CLOSED) {
            stream_s += now() - c->asked; /* cut off: held until now */
        }
    }
    qsort(gaps, ngaps, sizeof *gaps, by_value);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu = (double)usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 +
                 (double)usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
    printf("{\"chunks\": %ld, \"requests\": %ld, \"errors\": %ld, \"open\": %ld, "
           "\"peak\": %ld, \"seconds\": %.6f, \"gaps\": %zu, \"gap_p50_ms\": %.3f, "
           "\"gap_p99_ms\": %.3f, \"gap_max_ms\": %.3f, \"stream_s\": %.6f, "
           "\"client_cpu_s\": %.3f}\n",
           chunks, requests, errors, cut, peak, now() - started, ngaps, quantile_ms(0.5),
           quantile_ms(0.99), ngaps ? gaps[ngaps - 1] / 1000.0 : 0.0, stream_s, cpu);
    return 0;
}
