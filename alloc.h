/* alloc.h — the engine's buffers: zeroed, aligned to a cache line, and
 * large ones mapped on their own on 2 MiB pages (a decode step streams
 * every weight and, at long contexts, every key and value once: with 4 KiB
 * pages each 4 KiB is a TLB miss and a halt of the prefetcher).
 *
 * stb-style: the interface everywhere, the implementation where
 * QKV_ALLOC_IMPLEMENTATION is defined (kernels.h's implementation does). */
#ifndef QKV_ALLOC_H
#define QKV_ALLOC_H

#include <stddef.h>

/* count * size zeroed bytes starting on a 64-byte boundary (a cache line:
 * no vector load from a row that starts there splits across two lines,
 * which costs a prompt's tiles a quarter of their speed); NULL if the size
 * overflows or the memory cannot be had. Its pages stay untouched (not
 * resident) until used. A buffer of QKV_LARGE_PAGE_BYTES or more is mapped
 * on its own on a 2 MiB boundary and asks Linux for 2 MiB pages (below);
 * one of QKV_MAPPED_BYTES (16 KiB) or more is mapped on its own too; a
 * smaller one comes from calloc, as every one below 2 MiB does in a build
 * for a memory checker (QKV_CALLOC_BUFFERS, below). Freed with
 * free_aligned. */
void *zalloc_aligned(size_t count, size_t size);
/* The same for a buffer written whole at once (the weights' panels): one
 * of QKV_MAPPED_BYTES or more on 2 MiB pages whatever its size, so that
 * filling it faults once per 2 MiB, not once per 4 KiB page. Measured, AMD EPYC (a virtual machine, where a
 * fault is a trip to the host): `-m info` on the grammar model (1.4 MB of
 * panels) took 469 page faults, 121 after. Freed with free_aligned. */
void *zalloc_written_whole(size_t bytes);
void free_aligned(void *p);

#endif /* QKV_ALLOC_H */

/* ======================================================================== */
#ifdef QKV_ALLOC_IMPLEMENTATION
#ifndef QKV_ALLOC_IMPLEMENTED
#define QKV_ALLOC_IMPLEMENTED

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* madvise is Linux's (and the BSDs'), outside the POSIX names the build
 * asks for; POSIX's posix_madvise(POSIX_MADV_DONTNEED) does nothing on
 * Linux. */
#ifdef __linux__
#include <sys/mman.h>
#ifndef MADV_DONTNEED
#define MADV_DONTNEED 4
#define MADV_HUGEPAGE 14
int madvise(void *addr, size_t length, int advice);
#endif
#ifndef MAP_ANONYMOUS /* Linux's value; outside the POSIX names, as madvise */
#define MAP_ANONYMOUS 0x20
#endif
#endif

/* Large pages. A decode step streams every weight, and at long contexts
 * every key and value, once: with 4 KiB pages that is a new page, a TLB
 * miss and a halt of the hardware prefetcher (which stops at a page's end)
 * every 4 KiB. Linux gives a buffer 2 MiB pages when it is asked to
 * (transparent huge pages in "madvise" mode, Debian's default). Measured,
 * Intel Xeon, 1 thread: the int8 KV attention of the 15M shape at 16,384
 * positions read 10.3 -> 12.9 GB/s, a plain read of its 58 MiB 19 -> 23;
 * decode 5-15% faster for the Q8_0, Q4_0 and llama2.c float32 anchors. */
#define QKV_LARGE_PAGE_BYTES ((size_t)2 << 20)

static void advise_large_pages(void *p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (bytes < QKV_LARGE_PAGE_BYTES) return;
    uintptr_t first = ((uintptr_t)p + 4095) / 4096 * 4096, last = ((uintptr_t)p + bytes) / 4096 * 4096;
    if (last > first) madvise((void *)first, last - first, MADV_HUGEPAGE); /* advice: failure changes nothing */
#else
    (void)p, (void)bytes;
#endif
}

/* A buffer's start: the pointer and length to give back (length 0: a
 * calloc'd one), kept just below the aligned pointer. */
typedef struct {
    void *raw;
    size_t mapped;
} AllocationHead;

/* A buffer mapped on its own, zeroed by the kernel page by page as it is
 * first touched, starting on an align-byte boundary (64 or a large page),
 * its head just below that; NULL if it cannot be had. */
static void *map_zeroed(size_t bytes, size_t align) {
#if defined(__linux__) && defined(MAP_PRIVATE)
    size_t rounded = align_up(bytes, align);
    size_t mapped = rounded + align + sizeof(AllocationHead);
    if (rounded < bytes || mapped < rounded) return NULL;
    void *raw = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uintptr_t at = align_up((uintptr_t)raw + sizeof(AllocationHead), align);
    AllocationHead head = { raw, mapped };
    memcpy((unsigned char *)at - sizeof head, &head, sizeof head);
    return (void *)at;
#else
    (void)bytes, (void)align;
    return NULL;
#endif
}

/* A buffer of a large page or more is mapped on its own and starts on a
 * large page's boundary, its advice running to the boundary past its end:
 * calloc's pages begin 4 KiB-aligned, so the partial large pages at both
 * ends stayed small pages (the stories model's float32 panels: 3.3 of
 * 27.3 MiB), and calloc can take such a buffer from the heap and clear it
 * whole at once. The extra large page of address space is never touched.
 * Measured, AMD EPYC (KVM), one thread, a sum over the stories model's
 * float32 panels as calloc placed them: 58-60 GB/s; over a copy on
 * aligned large pages: 68-69. */
static void *map_large(size_t bytes) {
    void *p = map_zeroed(bytes, QKV_LARGE_PAGE_BYTES);
    if (p) advise_large_pages(p, align_up(bytes, QKV_LARGE_PAGE_BYTES));
    return p;
}

/* From this size on a buffer is mapped on its own even below a large
 * page: calloc clears a buffer it takes from the heap, touching every page
 * of the run state's prompt-sized buffers (a chunk of 128 positions) that
 * a decode step never reads. A memory checker sees past the end of a
 * calloc'd buffer (AddressSanitizer's poisoned bytes, valgrind's heap
 * blocks) but not of a mapping: under AddressSanitizer (gcc's and clang's
 * ways of saying so), or with -DQKV_CALLOC_BUFFERS (CI's valgrind build),
 * every buffer below 2 MiB, the weights' panels included, is calloc's. */
#if defined(__SANITIZE_ADDRESS__) && !defined(QKV_CALLOC_BUFFERS)
#define QKV_CALLOC_BUFFERS 1
#endif
#if defined(__has_feature) && !defined(QKV_CALLOC_BUFFERS)
#if __has_feature(address_sanitizer)
#define QKV_CALLOC_BUFFERS 1
#endif
#endif
#ifdef QKV_CALLOC_BUFFERS
#define QKV_MAPPED_BYTES QKV_LARGE_PAGE_BYTES
#else
#define QKV_MAPPED_BYTES ((size_t)16 << 10)
#endif

void *zalloc_aligned(size_t count, size_t size) {
    size_t slack = 64 + sizeof(AllocationHead);
    if (size && count > (SIZE_MAX - 2 * QKV_LARGE_PAGE_BYTES) / size) return NULL;
    if (count * size >= QKV_MAPPED_BYTES) {
        void *p = count * size >= QKV_LARGE_PAGE_BYTES ? map_large(count * size) : map_zeroed(count * size, 64);
        if (p) return p;
    }
    unsigned char *raw = calloc(count * size + slack, 1);
    if (!raw) return NULL;
    uintptr_t at = align_up((uintptr_t)raw + sizeof(AllocationHead), 64);
    AllocationHead head = { raw, 0 };
    memcpy((unsigned char *)at - sizeof head, &head, sizeof head);
    return (void *)at;
}

void *zalloc_written_whole(size_t bytes) {
    void *p = bytes >= QKV_MAPPED_BYTES ? map_large(bytes) : NULL;
    return p ? p : zalloc_aligned(bytes, 1);
}

void free_aligned(void *p) {
    if (!p) return;
    AllocationHead head;
    memcpy(&head, (unsigned char *)p - sizeof head, sizeof head);
#if defined(__linux__) && defined(MAP_PRIVATE)
    if (head.mapped) {
        munmap(head.raw, head.mapped);
        return;
    }
#endif
    free(head.raw);
}

#endif /* QKV_ALLOC_IMPLEMENTED */
#endif /* QKV_ALLOC_IMPLEMENTATION */
