# Helpers for hotset's shell tests (sourced).  The harness exports HOTSET
# (the built command) and HS_DATA (tests/data).
fails=0
: "${HOTSET:?run through make check}"
: "${HS_DATA:?run through make check}"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hs-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# expect_ok DESC CMD...: CMD must exit 0; its stdout lands in $TMP/out.
expect_ok() {
	desc=$1; shift
	"$@" >"$TMP/out" 2>"$TMP/err" || { fail "$desc: exit $? ($(head -c 300 "$TMP/err"))"; return 1; }
}

# expect_fail DESC CMD...: CMD must exit non-zero (not by a signal) and say
# exactly one line on stderr.
expect_fail() {
	desc=$1; shift
	"$@" >"$TMP/out" 2>"$TMP/err"
	rc=$?
	if [ $rc -eq 0 ]; then fail "$desc: succeeded"; return 1; fi
	if [ $rc -ge 128 ]; then fail "$desc: killed by signal $((rc - 128))"; return 1; fi
	lines=$(grep -c . "$TMP/err")
	[ "$lines" -ge 1 ] || fail "$desc: no message on stderr"
	case $desc in *usage*) ;; *) [ "$lines" -le 1 ] || fail "$desc: $lines lines on stderr: $(cat "$TMP/err")" ;; esac
}

# expect_grep DESC PATTERN [FILE]: an extended regex must match FILE ($TMP/out).
expect_grep() {
	grep -Eq -- "$2" "${3:-$TMP/out}" || fail "$1: no match for '$2' in: $(head -c 2000 "${3:-$TMP/out}")"
}

# declared_functions: every function include/hotset.h declares, one a line,
# sorted (the header without comments, each hs_ name followed by "(").
declared_functions() {
	${CC:-cc} -E -P -I"$top_srcdir/include" "$top_srcdir/include/hotset.h" |
		grep -oE '\bhs_[a-z0-9_]+[[:space:]]*\(' | sed 's/[[:space:]]*($//' | sort -u
}

finish() {
	[ $fails -eq 0 ] || { echo "$fails check(s) failed" >&2; exit 1; }
	exit 0
}
