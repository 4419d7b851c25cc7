# Checks that `hotset --help`, `--version` and every subcommand's `--help`
# work, that an unknown subcommand or flag is refused, that -v lets the
# library's messages reach stderr (silent without it, debug with -vv), and
# that --version names the CPU kernel tier and HOTSET_CPU_TIER moves it.
. "${top_srcdir:-.}/tests/lib.sh"

expect_ok "--help" "$HOTSET" --help && expect_grep "--help" '^subcommands:'
expect_grep "--help lists -v" '^  -v, --verbose'
subs=$(awk '/^subcommands:/{on=1; next} /^$/{on=0} on{print $1}' "$TMP/out")
[ -n "$subs" ] || fail "no subcommands listed"
for s in $subs; do
	expect_ok "$s --help" "$HOTSET" "$s" --help && expect_grep "$s --help" "^usage: hotset $s"
done
expect_ok "--version" "$HOTSET" --version && expect_grep "--version" '^hotset [0-9]+\.[0-9]+\.[0-9]+$'
expect_grep "--version build" 'CPU kernels: (ref|avx2|avx-vnni|avx512-vnni|amx) \(tiers built:'
HOTSET_CPU_TIER=ref expect_ok "-v --version, tier ref" "$HOTSET" -v --version
expect_grep "--version tier ref" 'CPU kernels: ref \('
expect_grep "-v: the tier asked for" '^hotset: info: CPU kernels: ref; HOTSET_CPU_TIER=ref: running ref' "$TMP/err"
HOTSET_CPU_TIER=ref expect_ok "--version, tier ref, no -v" "$HOTSET" --version
[ -s "$TMP/err" ] && fail "--version without -v: stderr not empty: $(cat "$TMP/err")"
# -v: the library says which CPU kernels and which device it chose
expect_ok "-v --version" "$HOTSET" -v --version
expect_grep "-v: CPU kernels" '^hotset: info: CPU kernels: ' "$TMP/err"
expect_grep "-v: decode prefetch" '^hotset: info: CPU kernels: .*; decode prefetch (4|8|16) KiB ahead( \(512-bit: into L2, 3 KiB ahead\))?$' "$TMP/err"
[ -s "$TMP/err" ] && ! grep -vq '^hotset: info: ' "$TMP/err" || fail "-v --version: stray stderr: $(cat "$TMP/err")"
M="$HS_DATA/models/gptoss-tiny-h256-e32.gguf" X="$HS_DATA/models/x-h256-n4.npy"
expect_ok "run-layer quiet" "$HOTSET" run-layer --model "$M" --layer 0 --input "$X" --output "$TMP/y.npy" --device sim
[ -s "$TMP/err" ] && fail "run-layer without -v: stderr not empty: $(cat "$TMP/err")"
expect_ok "-v run-layer" "$HOTSET" -v run-layer --model "$M" --layer 0 --input "$X" --output "$TMP/y.npy" --device sim
expect_grep "-v: device" '^hotset: info: device: sim 0 opened, sim \(' "$TMP/err"
grep -q '^hotset: debug: ' "$TMP/err" && fail "-v: debug messages without -vv"
# a layer the device cannot take is said at -v (warning), the layer list at -vv (debug)
HOTSET_SIM_FAIL_PIN=1 expect_ok "-vv run-layer --mode" "$HOTSET" -vv run-layer --model "$M" --layer 0 --input "$X" \
	--output "$TMP/y.npy" --mode hybrid --device sim
expect_grep "-vv: layer left to the CPU" '^hotset: warning: runtime: layer 0: no device side .*the CPU computes all its experts' "$TMP/err"
expect_grep "-vv: debug" '^hotset: debug: runtime: layer 1: ' "$TMP/err"
expect_fail "usage: unknown subcommand" "$HOTSET" frobnicate
expect_fail "usage: no subcommand" "$HOTSET"
finish
