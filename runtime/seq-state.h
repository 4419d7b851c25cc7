/* One sequence's state in a file (hs_context_seq_save / _load): a header
 * naming the model and the KV type, the sequence's tokens, then one
 * section per layer and kind of state.  The format is in docs/library.md. */
#ifndef HS_SEQ_STATE_H
#define HS_SEQ_STATE_H

#include <stdint.h>

#include "runtime/forward.h"

/* What the context keeps about a sequence besides its cells. */
struct hs_seq_head {
	int n_pos;      /* next position */
	int lost_below; /* positions below may be missing from the sliding rings */
	int n_tokens;   /* token ids in the file: 0 or n_pos */
};

/* Writes seq's cells (every layer's, positions < h->n_pos) with h and the
 * tokens to path through "<path>.part".  -EIO, -ENOMEM, a backend error. */
int hs__seq_state_save(struct hs_fwd *f, int seq, const struct hs_seq_head *h, const int32_t *tokens, const char *path);
/* Checks the whole file against f (model, KV type, n_ctx, every field and
 * value), and only then replaces seq's cells with the file's.  *h and up to
 * cap tokens out.  *emptied = 1 when the backend failed after seq was
 * cleared (it is empty then); otherwise nothing changed on an error. */
int hs__seq_state_load(struct hs_fwd *f, int seq, const char *path, struct hs_seq_head *h, int32_t *tokens, int cap,
		       int *emptied);

#endif
