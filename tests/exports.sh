# Checks that libhotset.so exports exactly the functions include/hotset.h
# declares: nothing internal (hs__*, static helpers, kernels) leaks into the
# shared library's ABI, and nothing the header promises is missing.
. "${top_srcdir:-.}/tests/lib.sh"
so=${top_builddir:-.}/.libs/libhotset.so
[ -f "$so" ] || { echo "SKIP: no shared library built ($so)"; exit 77; }
command -v nm >/dev/null || { echo "SKIP: nm not installed"; exit 77; }
declared_functions >"$TMP/declared"
nm -D --defined-only "$so" | awk '$2 ~ /^[TDRBVWi]$/ {print $3}' | sed 's/@.*//' | sort -u >"$TMP/exported"
[ -s "$TMP/declared" ] || fail "no declarations found in hotset.h"
extra=$(comm -13 "$TMP/declared" "$TMP/exported" | tr '\n' ' ')
missing=$(comm -23 "$TMP/declared" "$TMP/exported" | tr '\n' ' ')
[ -z "$extra" ] || fail "exported but not declared in hotset.h: $extra"
[ -z "$missing" ] || fail "declared in hotset.h but not exported: $missing"
echo "$(wc -l <"$TMP/exported") symbols exported, all declared"
finish
