/* The AMX tile of cpu_kernels/arch/x86/amx/amx-body.h run on a scalar model
 * of the tile unit, for tests/test-amx-model.c (this file is compiled with
 * the AVX-512 flags, as the body's scaling is AVX-512 code).  The model
 * refuses what the hardware would fault on: a tile used before a
 * configuration is loaded or after it is released, rows or row bytes past
 * 16 x 64, a product whose shapes do not fit (C rows = A rows, A row bytes
 * / 4 = B rows, C row bytes = B row bytes). */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tests/amx-model.h"

struct amx_cfg;
static void emu_config(const struct amx_cfg *c);
static void emu_load(int t, const void *p, long stride);
static void emu_zero(int t);
static void emu_dpbssd(int c, int a, int b);
static void emu_store(int t, void *p, long stride);
static void emu_release(void);

#define AMX_CONFIG(cfg) emu_config(cfg)
#define AMX_LOAD(t, p, stride) emu_load(t, p, stride)
#define AMX_ZERO(t) emu_zero(t)
#define AMX_DPBSSD(c, a, b) emu_dpbssd(c, a, b)
#define AMX_STORE(t, p, stride) emu_store(t, p, stride)
#define AMX_RELEASE() emu_release()

#include "cpu_kernels/arch/x86/amx/amx-body.h"

static struct amx_cfg cfg;
static int configured, faults, products, wide;
static int8_t tile[8][16][64];

static void fault(const char *what)
{
	if (faults++ < 5)
		fprintf(stderr, "AMX model: %s (the hardware would fault)\n", what);
}

static void emu_config(const struct amx_cfg *c)
{
	if (c->palette != 1)
		fault("palette other than 1");
	for (int t = 0; t < 8; t++)
		if (c->rows[t] > 16 || c->colsb[t] > 64 || (!c->rows[t]) != (!c->colsb[t]))
			fault("tile shape past 16 rows x 64 bytes, or half set");
	cfg = *c;
	configured = 1;
	memset(tile, 0, sizeof tile);
}

static int usable(int t)
{
	if (!configured || t < 0 || t > 7 || !cfg.rows[t]) {
		fault("tile used unconfigured");
		return 0;
	}
	return 1;
}

static void emu_load(int t, const void *p, long stride)
{
	if (!usable(t))
		return;
	memset(tile[t], 0, sizeof tile[t]);
	for (int r = 0; r < cfg.rows[t]; r++)
		memcpy(tile[t][r], (const uint8_t *)p + (size_t)r * (size_t)stride, cfg.colsb[t]);
}

static void emu_zero(int t)
{
	if (usable(t))
		memset(tile[t], 0, sizeof tile[t]);
}

/* c[m][n] += sum over k < colsb(a)/4 of the 4 signed byte products of
 * a[m] dword k and b[k] dword n (TDPBSSD) */
static void emu_dpbssd(int c, int a, int b)
{
	if (!usable(c) || !usable(a) || !usable(b))
		return;
	if (cfg.rows[c] != cfg.rows[a] || cfg.colsb[a] / 4 != cfg.rows[b] || cfg.colsb[c] != cfg.colsb[b] ||
	    cfg.colsb[a] % 4 || cfg.colsb[c] % 4) {
		fault("product shapes do not fit");
		return;
	}
	products++;
	wide += cfg.colsb[a] == 64;
	for (int m = 0; m < cfg.rows[a]; m++)
		for (int n = 0; n < cfg.colsb[c] / 4; n++) {
			int32_t acc;
			memcpy(&acc, &tile[c][m][4 * n], 4);
			for (int k = 0; k < cfg.colsb[a] / 4; k++)
				for (int i = 0; i < 4; i++)
					acc += tile[a][m][4 * k + i] * tile[b][k][4 * n + i];
			memcpy(&tile[c][m][4 * n], &acc, 4);
		}
}

static void emu_store(int t, void *p, long stride)
{
	if (!usable(t))
		return;
	for (int r = 0; r < cfg.rows[t]; r++)
		memcpy((uint8_t *)p + (size_t)r * (size_t)stride, tile[t][r], cfg.colsb[t]);
}

static void emu_release(void)
{
	if (!configured)
		fault("release without a configuration");
	configured = 0;
}

int hs__amx_model_tile(int type, const uint8_t *w, int r0, int r1, int ncols, const struct hs_block_q8_0 *const *x,
		       int nt, float *const *out, int *n_products)
{
	faults = products = 0;
	amx_tile(type, w, r0, r1, ncols, x, nt, out);
	if (configured)
		fault("tiles left configured");
	*n_products = products;
	return faults;
}

int hs__amx_model_tile_qx(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
			  const struct hs_block_q8_0 *const *x, int nt, float *const *out, int *n_products)
{
	faults = products = wide = 0;
	amx_tile_qx(type, w, row_bytes, r0, r1, ncols, x, nt, out);
	if (configured)
		fault("tiles left configured");
	*n_products = products;
	return faults;
}

int hs__amx_model_tile_q4k_packed(const uint8_t *w, int r0, int r1, int ncols, const struct hs_block_q8_0 *const *x,
				  int nt, float *const *out, int *n_products)
{
	faults = products = wide = 0;
	amx_tile_q4k_packed(w, r0, r1, ncols, x, nt, out, hs__kernels_ref.tile_q);
	if (configured)
		fault("tiles left configured");
	*n_products = products;
	return faults;
}

int hs__amx_model_wide_products(void)
{
	return wide;
}
