/* cpu.h — what this machine is: its instruction sets (CPUID and XGETBV,
 * probed once a process), its maker and family, its last-level cache; the
 * environment variables QKV_ISA, QKV_VENDOR, QKV_FAMILY and QKV_CACHE_BYTES
 * stand in for them, so that tests, CI and measurements can choose.
 *
 * stb-style: the interface everywhere, the implementation where
 * QKV_CPU_IMPLEMENTATION is defined (kernels.h's implementation does, after
 * kernels_isa.h). */
#ifndef QKV_CPU_H
#define QKV_CPU_H

#include <stddef.h>

/* Instruction sets, each a superset of the one before but one: ISA_AVX_VNNI
 * is AVX2 plus VNNI's integer dot products on 256-bit vectors, which the
 * int8 and 4-bit kernels use: AVX-VNNI's VEX form (Intel's cores from Alder
 * Lake and Sapphire Rapids on, their AVX2-only Xeons such as Sierra
 * Forest, AMD's Zen 5), else AVX-512 VNNI's EVEX form of the same
 * instruction (Ice Lake, Zen 4: so the path runs, and is tested, there
 * too). An AVX-512 CPU without VNNI (Skylake-X) has neither: QKV_ISA=avxvnni
 * gives it AVX2 (isa_available). ISA_AMX is AVX-512 VNNI plus AMX's int8
 * tiles, which the int8 and 4-bit kernels use for a prompt (a decode step
 * stays on VNNI). */
typedef enum {
    ISA_PORTABLE = 0, ISA_AVX2 = 1, ISA_AVX_VNNI = 2, ISA_AVX512 = 3, ISA_AVX512_VNNI = 4, ISA_AMX = 5, ISA_COUNT
} Isa;

/* CPU makers, for a kernel whose best form differs between them with the
 * same instructions (their prefetchers differ: see KERNELS). */
typedef enum { VENDOR_ANY = 0, VENDOR_INTEL = 1, VENDOR_AMD = 2, VENDOR_COUNT } Vendor;

const char *isa_name(Isa isa);
const char *vendor_name(Vendor vendor);
/* This CPU's maker (CPUID's leaf 0; VENDOR_ANY for any other), or the
 * environment variable QKV_VENDOR (intel, amd, any) instead, so that one
 * maker's choice can be measured on the other's CPU. */
Vendor cpu_vendor(void);
/* This CPU's family (CPUID leaf 1's base family, plus its extended family
 * where the base is 15: AMD's Zen 3 and Zen 4 are 25 (19h), Zen 5 is 26;
 * Intel's cores 6), or the environment variable QKV_FAMILY instead (25, or
 * 0x19: a C integer). */
int cpu_family(void);
/* The best instruction set this CPU and OS support, capped by the
 * environment variable QKV_ISA (portable, avx2, avxvnni, avx512, avx512vnni,
 * amx) so tests and CI can force each path. */
Isa isa_available(void);
/* The set a CPU whose best is cpu (with AVX-VNNI's VEX form or not) runs
 * under the cap (-1: none): the lower of the two, but AVX2 for
 * ISA_AVX_VNNI on a CPU with neither form of 256-bit VNNI (an AVX-512 CPU
 * without VNNI) */
Isa isa_within(Isa cpu, int avx_vnni, int cap);
/* Whether this CPU can run isa's kernels within QKV_ISA's cap */
int isa_runs(Isa isa);
/* Whether this CPU has AVX-VNNI's VEX form (CPUID.(7,1):EAX bit 4); without
 * it ISA_AVX_VNNI's kernels take AVX-512 VNNI's EVEX form */
int cpu_has_avx_vnni(void);
/* The last-level cache's bytes (the environment variable QKV_CACHE_BYTES,
 * else the largest cache Linux's sysfs lists for CPU 0, else 32 MiB), and
 * whether a decode step's bytes_per_token of weights come from
 * memory: more than half of it (the other cores, or a virtual machine's
 * neighbours, share it: measured on an AMD EPYC's 32 MiB, 16.6 MB of
 * weights decoded as if cached, 23.5 MB as if from memory). */
size_t last_level_cache_bytes(void);
int weights_from_memory(size_t bytes_per_token);
/* The values QKV_FAMILY and QKV_CACHE_BYTES may take, whole C integers
 * (25, 0x19): a family 0..INT_MAX (else -1), a byte count 1..SIZE_MAX
 * (else 0) */
int family_parse(const char *value);
size_t cache_bytes_parse(const char *value);
/* The names QKV_ISA and QKV_VENDOR take, in Isa's and Vendor's order, and
 * the index of value among n names (-1: none): how each choice is read and
 * checked (kernel_env_error) */
extern const char *const ISA_NAMES[ISA_COUNT], *const VENDOR_NAMES[VENDOR_COUNT];
int name_index(const char *value, const char *const *names, int n);

#endif /* QKV_CPU_H */

/* ======================================================================== */
#ifdef QKV_CPU_IMPLEMENTATION
#ifndef QKV_CPU_IMPLEMENTED
#define QKV_CPU_IMPLEMENTED

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The CPU's instruction sets, probed at run time                           */

#ifdef QKV_HAVE_X86_KERNELS
#include <cpuid.h>

/* AMX's int8 tiles: CPUID.(7,0):EDX has AMX-TILE (bit 24) and AMX-INT8
 * (25), the OS saves the tile state (XCR0 bits 17, 18), and Linux lets
 * this process use it: the 8 KiB of tile data a thread saves on a context
 * switch are granted on request (arch_prctl ARCH_REQ_XCOMP_PERM for
 * XFEATURE_XTILEDATA, once for the process and its threads; asking again
 * is harmless). Without that grant the first tile instruction kills the
 * process. */
static int amx_usable(unsigned cpuid7_edx, unsigned xcr0) {
#ifdef QKV_HAVE_AMX
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    int cpu = ((cpuid7_edx >> 24) & 1) && ((cpuid7_edx >> 25) & 1), os = (xcr0 & 0x60000u) == 0x60000u;
    return cpu && os && syscall(SYS_arch_prctl, (long)ARCH_REQ_XCOMP_PERM, (long)XFEATURE_XTILEDATA) == 0;
#else
    (void)cpuid7_edx, (void)xcr0;
    return 0;
#endif
}

/* AVX-VNNI (VEX-encoded vpdpbusd on ymm): CPUID.(7,1):EAX bit 4, where
 * leaf 7 has a subleaf 1 (CPUID.(7,0):EAX, its last subleaf). Its kernels
 * need only AVX's registers, which probe_cpu checks the OS saves before it
 * gives any set above AVX2's. */
static int probe_avx_vnni(void) {
#ifdef QKV_HAVE_AVX_VNNI
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || a < 1) return 0;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 4) & 1);
#else
    return 0; /* a compiler without its VEX form: ISA_AVX_VNNI only where AVX-512 VNNI is */
#endif
}

/* CPUID and XGETBV: the CPU has the instructions and the OS saves their
 * registers. */
static Isa probe_cpu(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return ISA_PORTABLE;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!(fma && osxsave && avx && f16c)) return ISA_PORTABLE;
    unsigned xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & 0x6) != 0x6) return ISA_PORTABLE;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((b >> 5) & 1)) return ISA_PORTABLE;
    int avx512 = ((b >> 16) & 1) && ((b >> 17) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1) &&
                 (xcr0_lo & 0xe6) == 0xe6; /* F, DQ, BW, VL; opmask and upper ZMM state */
    if (!avx512) return probe_avx_vnni() ? ISA_AVX_VNNI : ISA_AVX2;
    if (!((c >> 11) & 1)) return ISA_AVX512;
    return amx_usable(d, xcr0_lo) ? ISA_AMX : ISA_AVX512_VNNI;
}

/* CPUID leaf 1's family: EAX bits 8-11, plus bits 20-27 where those are 15 */
static int probe_family(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int base = (int)((a >> 8) & 0xf);
    return base == 15 ? base + (int)((a >> 20) & 0xff) : base;
}

/* CPUID leaf 0's maker string, 12 bytes in EBX, EDX, ECX: "GenuineIntel",
 * "AuthenticAMD" (and Hygon's "HygonGenuine", AMD's Zen cores). */
static Vendor probe_vendor(void) {
    unsigned a, regs[3];
    char maker[13] = { 0 };
    if (!__get_cpuid(0, &a, &regs[0], &regs[2], &regs[1])) return VENDOR_ANY;
    memcpy(maker, regs, 12);
    if (strcmp(maker, "GenuineIntel") == 0) return VENDOR_INTEL;
    if (strcmp(maker, "AuthenticAMD") == 0 || strcmp(maker, "HygonGenuine") == 0) return VENDOR_AMD;
    return VENDOR_ANY;
}
#else
static int probe_avx_vnni(void) { return 0; }
static Isa probe_cpu(void) { return ISA_PORTABLE; }
static Vendor probe_vendor(void) { return VENDOR_ANY; }
static int probe_family(void) { return 0; }
#endif

/* probe_cpu, probe_vendor, probe_family and probe_avx_vnni, asked once, as
 * one value (the instruction set in the low byte, the maker in the next,
 * the family in the 12 bits above, AVX-VNNI in bit 28): CPUID is slow in a
 * virtual machine (a trap to the host), and a prompt quantizes its
 * activations hundreds of times. Two threads that both ask store the same
 * answer. */
static int cpu_of_this_machine(void) {
    static _Atomic int known = -1;
    int cpu = known;
    if (cpu < 0)
        known = cpu = (int)probe_cpu() | (int)probe_vendor() << 8 | (probe_family() & 0xfff) << 16 |
                      probe_avx_vnni() << 28;
    return cpu;
}

static Isa isa_of_cpu(void) { return (Isa)(cpu_of_this_machine() & 0xff); }
static Vendor vendor_of_cpu(void) { return (Vendor)((cpu_of_this_machine() >> 8) & 0xff); }
static int family_of_cpu(void) { return (cpu_of_this_machine() >> 16) & 0xfff; }

int cpu_has_avx_vnni(void) { return (cpu_of_this_machine() >> 28) & 1; }

const char *const ISA_NAMES[ISA_COUNT] = { "portable", "avx2", "avxvnni", "avx512", "avx512vnni", "amx" };
const char *const VENDOR_NAMES[VENDOR_COUNT] = { "any", "intel", "amd" };

int name_index(const char *value, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(value, names[i]) == 0) return i;
    return -1;
}

const char *isa_name(Isa isa) { return isa >= 0 && isa < ISA_COUNT ? ISA_NAMES[isa] : "?"; }

Isa isa_within(Isa cpu, int avx_vnni, int cap) {
    Isa isa = cap >= 0 && (Isa)cap < cpu ? (Isa)cap : cpu;
    int vnni256 = avx_vnni || cpu >= ISA_AVX512_VNNI; /* AVX-VNNI's form, or AVX-512 VNNI's with VL */
    return isa == ISA_AVX_VNNI && !vnni256 ? ISA_AVX2 : isa;
}

Isa isa_available(void) {
    const char *cap = getenv("QKV_ISA");
    return isa_within(isa_of_cpu(), cpu_has_avx_vnni(), cap ? name_index(cap, ISA_NAMES, ISA_COUNT) : -1);
}

int isa_runs(Isa isa) { return isa <= isa_available() && isa_within(isa_of_cpu(), cpu_has_avx_vnni(), isa) == isa; }

const char *vendor_name(Vendor vendor) { return vendor >= 0 && vendor < VENDOR_COUNT ? VENDOR_NAMES[vendor] : "?"; }

Vendor cpu_vendor(void) {
    const char *name = getenv("QKV_VENDOR");
    int asked = name ? name_index(name, VENDOR_NAMES, VENDOR_COUNT) : -1;
    return asked >= 0 ? (Vendor)asked : vendor_of_cpu();
}

int family_parse(const char *value) {
    char *end;
    errno = 0;
    long family = strtol(value, &end, 0);
    return end == value || *end || errno || family < 0 || family > INT_MAX ? -1 : (int)family;
}

int cpu_family(void) {
    const char *name = getenv("QKV_FAMILY");
    int family = name ? family_parse(name) : -1;
    return family >= 0 ? family : family_of_cpu();
}

/* The largest cache sysfs lists for CPU 0 ("32768K"), or 0 */
static size_t sysfs_largest_cache(void) {
    size_t largest = 0;
    for (int index = 0; index < 8; index++) {
        char path[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        unsigned long size = 0;
        char unit = 0;
        if (fscanf(f, "%lu%c", &size, &unit) >= 1) {
            size_t bytes = unit == 'K' ? (size_t)size << 10 : unit == 'M' ? (size_t)size << 20 : (size_t)size;
            if (bytes > largest) largest = bytes;
        }
        fclose(f);
    }
    return largest;
}

size_t cache_bytes_parse(const char *value) {
    char *end;
    errno = 0;
    unsigned long long bytes = strtoull(value, &end, 0);
    int negative = value[strspn(value, " \t")] == '-'; /* strtoull takes "-1" as 2^64 - 1 */
    return end == value || *end || errno || negative || bytes > SIZE_MAX ? 0 : (size_t)bytes;
}

size_t last_level_cache_bytes(void) {
    const char *set = getenv("QKV_CACHE_BYTES");
    if (set && cache_bytes_parse(set)) return cache_bytes_parse(set);
    size_t bytes = sysfs_largest_cache();
    return bytes ? bytes : (size_t)32 << 20;
}

int weights_from_memory(size_t bytes_per_token) { return bytes_per_token > last_level_cache_bytes() / 2; }

#endif /* QKV_CPU_IMPLEMENTED */
#endif /* QKV_CPU_IMPLEMENTATION */
