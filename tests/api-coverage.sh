# Checks that tests/test-api (the NULL and bad-value test of the public API)
# calls every function include/hotset.h declares: a new function fails
# here until the test drives it too.  The functions are read from the
# compiled test's object, so a name in a comment does not count.
. "${top_srcdir:-.}/tests/lib.sh"
command -v nm >/dev/null || { echo "SKIP: nm not installed"; exit 77; }
obj=${top_builddir:-.}/tests/test-api.o
[ -f "$obj" ] || { fail "no $obj: build tests/test-api first (make check does)"; finish; }
declared_functions >"$TMP/declared"
[ -s "$TMP/declared" ] || { fail "no declarations found in hotset.h"; finish; }
nm -u "$obj" | awk '{print $NF}' | sed 's/@.*//' | grep -E '^hs_[a-z0-9_]+$' | sort -u >"$TMP/called"
missing=$(comm -23 "$TMP/declared" "$TMP/called" | tr '\n' ' ')
[ -z "$missing" ] || fail "declared in hotset.h but not called by tests/test-api.c: $missing"
echo "$(wc -l <"$TMP/declared") declared functions, all called by tests/test-api.c"
finish
