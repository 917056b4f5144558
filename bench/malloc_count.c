/* An LD_PRELOAD shim for bench/tls_heap.py: counts the bytes a process holds from malloc.
 *
 * On MicroPython's unix port mbedTLS allocates with the C library's calloc, outside the
 * interpreter's heap (gc.mem_alloc() does not see it), as on an ESP32 it allocates from
 * ESP-IDF's heap, outside MicroPython's. This shim makes that memory visible to the program
 * under test through getenv(), which MicroPython's os.getenv() calls:
 *   os.getenv("FW_MALLOC")        -> "LIVE PEAK": bytes held now, and the most held since
 *                                    the last reset (malloc_usable_size of each block)
 *   os.getenv("FW_MALLOC_RESET")  -> None, and the peak starts again from what is held now
 * Built by the bench with the system compiler (cc -shared -fPIC; -m32 for a 32-bit port).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static char *(*real_getenv)(const char *);
static long live, peak;
static int resolving;
/* dlsym may calloc before calloc is resolved: serve it from here (never freed) */
static char early[8192];
static size_t early_used;

static void resolve(void) {
    resolving = 1;
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_free = dlsym(RTLD_NEXT, "free");
    real_getenv = dlsym(RTLD_NEXT, "getenv");
    resolving = 0;
}

static void held(long n) {
    live += n;
    if (live > peak) {
        peak = live;
    }
}

static int is_early(void *p) {
    return (char *)p >= early && (char *)p < early + sizeof(early);
}

void *malloc(size_t n) {
    if (!real_malloc) {
        resolve();
    }
    void *p = real_malloc(n);
    if (p) {
        held((long)malloc_usable_size(p));
    }
    return p;
}

void *calloc(size_t a, size_t b) {
    if (!real_calloc) {
        if (resolving) {
            size_t n = (a * b + 15) & ~(size_t)15;
            if (early_used + n > sizeof(early)) {
                return NULL;
            }
            void *p = early + early_used;
            early_used += n;
            return p;
        }
        resolve();
    }
    void *p = real_calloc(a, b);
    if (p) {
        held((long)malloc_usable_size(p));
    }
    return p;
}

void *realloc(void *p, size_t n) {
    if (!real_realloc) {
        resolve();
    }
    if (is_early(p)) {
        void *q = malloc(n);
        if (q) {
            memcpy(q, p, n);
        }
        return q;
    }
    long old = p ? (long)malloc_usable_size(p) : 0;
    void *q = real_realloc(p, n);
    if (q) {
        held((long)malloc_usable_size(q) - old);
    } else if (n == 0) {
        live -= old;
    }
    return q;
}

void free(void *p) {
    if (!p || is_early(p)) {
        return;
    }
    if (!real_free) {
        resolve();
    }
    live -= (long)malloc_usable_size(p);
    real_free(p);
}

char *getenv(const char *name) {
    static char text[64];
    if (!real_getenv) {
        resolve();
    }
    if (strcmp(name, "FW_MALLOC") == 0) {
        snprintf(text, sizeof(text), "%ld %ld", live, peak);
        return text;
    }
    if (strcmp(name, "FW_MALLOC_RESET") == 0) {
        peak = live;
        return NULL;
    }
    return real_getenv(name);
}
