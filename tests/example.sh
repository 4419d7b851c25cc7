# Checks that the example program of the README (examples/hybrid-layer.c,
# built by make check against the public header only) runs the tiny model's
# layers on the sim device and says what happened.
. "${top_srcdir:-.}/tests/lib.sh"
EX=${top_builddir:-.}/examples/hybrid-layer
for L in 0 1; do
	expect_ok "example layer $L" "$EX" "$HS_DATA/models/gptoss-tiny-h256-e32.gguf" $L sim &&
		expect_grep "example device $L" '^device: sim' &&
		expect_grep "example result $L" "^layer $L: \|y\| = [0-9.e+-]+; 16 pairs: "
done
expect_fail "example without a model" "$EX" "$TMP/none.gguf" 0 sim
finish
