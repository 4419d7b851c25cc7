# Checks the examples the way a user builds them: `make install` into a
# temporary DESTDIR, then examples/hybrid-layer.c and examples/generate.c
# compiled with the build line each one's comment documents (installed
# header, pkg-config, nothing from the build tree); hybrid-layer run on the
# tiny model's layers on the sim device, generate on a small Qwen3-MoE file
# on the CPU, whose text must be the answer `hotset run --chat` gives.
. "${top_srcdir:-.}/tests/lib.sh"
command -v pkg-config >/dev/null || { echo "SKIP: pkg-config is not installed (the documented build line needs it)"; exit 77; }
CC=${HS_CC:-cc}
command -v "${CC%% *}" >/dev/null || { echo "SKIP: no C compiler '$CC'"; exit 77; }
DEST="$TMP/dest"
${MAKE:-make} -s -C "${top_builddir:-.}" install DESTDIR="$DEST" >"$TMP/install.log" 2>&1 ||
	{ fail "make install DESTDIR=$DEST: $(tail -5 "$TMP/install.log")"; finish; }
pc=$(find "$DEST" -name hotset.pc | head -1)
h=$(find "$DEST" -name hotset.h | head -1)
[ -n "$pc" ] && [ -n "$h" ] || { fail "make install wrote no hotset.pc or hotset.h"; finish; }
libdir=$(dirname "$(dirname "$pc")")
# pkg-config as on the installed system, with the DESTDIR as its root
PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" PKG_CONFIG_SYSROOT_DIR="$DEST"
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR

# build NAME: examples/NAME.c with the build line of its comment, word for
# word but for the paths, into $TMP/NAME
build() {
	line=$(sed -n "s/^ \\*   \\(cc $1\\.c .*\\)\$/\\1/p" "$top_srcdir/examples/$1.c")
	[ -n "$line" ] || { fail "examples/$1.c documents no 'cc $1.c ...' line"; finish; }
	cp "$top_srcdir/examples/$1.c" "$TMP/"
	# a sanitizer build's library needs its runtime in the program too
	cmd="$CC ${HS_SAN_CFLAGS-} ${line#cc }"
	(cd "$TMP" && eval "$cmd") >"$TMP/cc.log" 2>&1 ||
		{ fail "$line: $(head -c 1500 "$TMP/cc.log")"; finish; }
	[ -x "$TMP/$1" ] || { fail "$line made no ./$1"; finish; }
}
build hybrid-layer
build generate
EX="$TMP/hybrid-layer"
pkg-config --cflags hotset | tr ' ' '\n' | grep -q "^-I$DEST" || fail "pkg-config --cflags does not name the installed header"

export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ldd "$EX" 2>/dev/null | grep -q "libhotset\.so.* => $libdir/" || fail "the example does not load the installed libhotset: $(ldd "$EX" 2>&1 | grep hotset)"
for L in 0 1; do
	expect_ok "example layer $L" "$EX" "$HS_DATA/models/gptoss-tiny-h256-e32.gguf" $L sim &&
		expect_grep "example device $L" '^device: sim' &&
		expect_grep "example result $L" "^layer $L: \|y\| = [0-9.e+-]+; 16 pairs: "
done
expect_fail "example without a model" "$EX" "$TMP/none.gguf" 0 sim

# generate: the same text as the command's answer (greedy, one user turn)
GEN="$TMP/generate" M="$HS_DATA/oracle/qwen3moe-l3-h256-e16k4-q8.gguf"
ldd "$GEN" 2>/dev/null | grep -q "libhotset\.so.* => $libdir/" || fail "generate does not load the installed libhotset"
if expect_ok "generate" "$GEN" "$M" "Why is the sky blue?" 12 cpu; then
	mv "$TMP/out" "$TMP/gen.txt"
	[ -s "$TMP/gen.txt" ] || fail "generate printed nothing"
	expect_ok "run --chat" "$HOTSET" run --model "$M" --chat "Why is the sky blue?" -n 12 --device cpu -q &&
		sed 1d "$TMP/out" >"$TMP/run.txt" &&
		{ cmp -s "$TMP/gen.txt" "$TMP/run.txt" || fail "generate printed '$(cat "$TMP/gen.txt")', hotset run '$(cat "$TMP/run.txt")'"; }
fi
expect_fail "generate without a model" "$GEN" "$TMP/none.gguf" "hi"
finish
