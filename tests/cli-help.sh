# Checks that `hotset --help`, `--version` and every subcommand's `--help`
# work, and that an unknown subcommand or flag is refused.
. "${top_srcdir:-.}/tests/lib.sh"

expect_ok "--help" "$HOTSET" --help && expect_grep "--help" '^subcommands:'
subs=$(awk '/^subcommands:/{on=1; next} /^$/{on=0} on{print $1}' "$TMP/out")
[ -n "$subs" ] || fail "no subcommands listed"
for s in $subs; do
	expect_ok "$s --help" "$HOTSET" "$s" --help && expect_grep "$s --help" "^usage: hotset $s"
done
expect_ok "--version" "$HOTSET" --version && expect_grep "--version" '^hotset [0-9]+\.[0-9]+\.[0-9]+$'
expect_grep "--version build" 'AVX2 kernels: '
expect_fail "usage: unknown subcommand" "$HOTSET" frobnicate
expect_fail "usage: no subcommand" "$HOTSET"
finish
