/* hotset/npy.h: float32 arrays in .npy files.  Part of <hotset.h>: include
 * that, not this file. */
#ifndef HOTSET_NPY_H
#define HOTSET_NPY_H
#ifndef HOTSET_H_INSIDE
#error "include <hotset.h>, which includes this header"
#endif

/* Reads a float32 .npy file of shape (rows, cols) or (cols,) (one row).
 * *data is malloc'd, the caller frees it.  -EIO with a message naming the
 * file and what is wrong (dtype, order, shape, truncated, trailing bytes). */
int hs_npy_read_f32(const char *path, float **data, int64_t *rows, int64_t *cols);
/* Writes float32 [rows][cols] to path (through "<path>.part" and a rename). */
int hs_npy_write_f32(const char *path, const float *data, int64_t rows, int64_t cols);

#endif /* HOTSET_NPY_H */
