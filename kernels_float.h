/* kernels_float.h — the float32 and float16 kernels that kernels_float.c
 * defines, as kernels.h's implementation calls them: its packing and its
 * table of kernels. Internal: not part of the engine's interface. */
#ifndef QKV_KERNELS_FLOAT_H
#define QKV_KERNELS_FLOAT_H

#include "kernels_isa.h" /* QKV_HAVE_X86_KERNELS */

/* Rows [g * 16, g * 16 + 16) of a float32 or float16 matrix (elem bytes a
 * value) into panel g; rows past the matrix's end are zeros. */
void pack_float(const void *data, int rows, int cols, int elem, void *panels);
/* Values j0..j0+n-1 of row i of the panels as stored before packing (elem
 * bytes each): pack_float undone for part of one row. */
void unpack_float_values(const void *panels, int cols, int elem, int i, int j0, int n, unsigned char *out);

/* The kernels (MatmulKernel), one per instruction set; _hw: float32's
 * AVX-512 decode without its own requests for lines ahead, _l2: a decode
 * step's requests into L2 only (both chosen on AMD: KERNELS in kernels.h). */
void matmul_f32_portable(float *out, int os, const Activations *a, const void *w, int cols, int begin, int end);
void matmul_f16_portable(float *out, int os, const Activations *a, const void *w, int cols, int begin, int end);
#ifdef QKV_HAVE_X86_KERNELS
void matmul_f32_avx2(float *out, int os, const Activations *a, const void *w, int cols, int begin, int end);
void matmul_f16_avx2(float *out, int os, const Activations *a, const void *w, int cols, int begin, int end);
void matmul_f32_avx512(float *out, int os, const Activations *a, const void *w, int cols, int begin, int end);
void matmul_f32_avx512_hw(float *out, int os, const Activations *a, const void *w, int cols, int begin, int end);
void matmul_f16_avx512(float *out, int os, const Activations *a, const void *w, int cols, int begin, int end);
void matmul_f16_avx512_l2(float *out, int os, const Activations *a, const void *w, int cols, int begin, int end);
#endif

#endif /* QKV_KERNELS_FLOAT_H */
