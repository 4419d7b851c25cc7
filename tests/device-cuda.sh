# Runs the device contract tests on the CUDA backend (SKIP, 77, with the
# reason when this build has no CUDA or the machine no CUDA device), and
# first the GPU check's script (bench/gpu-check.sh, the bundle's run.sh)
# against this build tree: its CPU-side self-test passes, and without a GPU
# the full run stops with "no GPU: <why>" and exit status 3, its logs
# (at most 8 files) and summary table in $OUT, rather than failing a step.
: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hs-device-cuda.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
check="$top_srcdir/bench/gpu-check.sh"

OUT=$TMP/self sh "$check" --self-test --build "$top_builddir" >"$TMP/self.txt" 2>&1 ||
	fail "gpu-check --self-test: exit $?: $(tail -n 15 "$TMP/self.txt")"
grep -q '^gpu-check: all steps passed' "$TMP/self.txt" || fail "self-test: no verdict line: $(tail -n 5 "$TMP/self.txt")"
grep -q '^cuBLAS located: ' "$TMP/self.txt" || fail "self-test names no cuBLAS"
[ -s "$TMP/self/summary.txt" ] && [ -s "$TMP/self/env.txt" ] || fail "self-test: no summary.txt / env.txt in OUT"
[ "$(ls "$TMP/self" | wc -l)" -le 8 ] || fail "self-test: more than 8 files in OUT: $(ls "$TMP/self")"

if [ "$("$HOTSET" --version | grep -c '^[1-9][0-9]* CUDA device')" = 0 ]; then
	OUT=$TMP/full sh "$check" --build "$top_builddir" >"$TMP/full.txt" 2>&1
	rc=$?
	[ $rc = 3 ] || fail "gpu-check without a GPU: exit $rc, not 3: $(tail -n 15 "$TMP/full.txt")"
	grep -q '^no GPU: ' "$TMP/full.txt" && grep -q '^gpu-check: no GPU: ' "$TMP/full/summary.txt" ||
		fail "gpu-check without a GPU does not say so: $(tail -n 8 "$TMP/full.txt")"
	[ "$(ls "$TMP/full" | wc -l)" -le 8 ] || fail "more than 8 files in OUT: $(ls "$TMP/full")"
	echo "gpu-check without a GPU: $(grep '^no GPU: ' "$TMP/full.txt")"
fi
# cuBLAS as --version reports it (CUDA builds): turned off, a named file
# that is not there, and the file it found named back to it
if "$HOTSET" --version | grep -q '^cuBLAS: '; then
	HOTSET_CUBLAS=0 "$HOTSET" --version | grep -q '^cuBLAS: not used: turned off by HOTSET_CUBLAS=0' ||
		fail "HOTSET_CUBLAS=0: $("$HOTSET" --version | grep cuBLAS)"
	HOTSET_CUBLAS=$TMP/none/libcublas.so.13 "$HOTSET" --version |
		grep -q "^cuBLAS: not used: HOTSET_CUBLAS=$TMP/none/libcublas.so.13: " ||
		fail "a missing HOTSET_CUBLAS file: $(HOTSET_CUBLAS=$TMP/none/libcublas.so.13 "$HOTSET" --version | grep cuBLAS)"
	found=$("$HOTSET" --version | sed -n 's/^cuBLAS: \(\/[^ ]*\) (.*/\1/p')
	if [ -n "$found" ]; then
		got=$(HOTSET_CUBLAS=$found "$HOTSET" --version | sed -n 's/^cuBLAS: \(\/[^ ]*\) (.*/\1/p')
		[ "$got" = "$found" ] || fail "HOTSET_CUBLAS=$found: reported '$got'"
	fi
fi
# a bad argument is a usage error, not a run
sh "$check" --bogus >/dev/null 2>&1
[ $? = 2 ] || fail "gpu-check --bogus: not a usage error"

HS_TEST_DEVICE=cuda exec "$top_builddir/tests/test-device"
