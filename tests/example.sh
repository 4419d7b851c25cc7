# Checks the example the way a user builds it: `make install` into a
# temporary DESTDIR, then examples/hybrid-layer.c compiled with the build
# line its comment documents (installed header, pkg-config, nothing from the
# build tree), run on the tiny model's layers on the sim device.
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

# the build line of the example's comment, word for word but for the paths
line=$(sed -n 's/^ \*   \(cc hybrid-layer\.c .*\)$/\1/p' "$top_srcdir/examples/hybrid-layer.c")
[ -n "$line" ] || { fail "examples/hybrid-layer.c documents no 'cc hybrid-layer.c ...' line"; finish; }
cp "$top_srcdir/examples/hybrid-layer.c" "$TMP/"
# a sanitizer build's library needs its runtime in the program too
cmd="$CC ${HS_SAN_CFLAGS-} ${line#cc }"
(cd "$TMP" && eval "$cmd") >"$TMP/cc.log" 2>&1 ||
	{ fail "$line: $(head -c 1500 "$TMP/cc.log")"; finish; }
EX="$TMP/hybrid-layer"
[ -x "$EX" ] || { fail "$line made no ./hybrid-layer"; finish; }
pkg-config --cflags hotset | tr ' ' '\n' | grep -q "^-I$DEST" || fail "pkg-config --cflags does not name the installed header"

export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ldd "$EX" 2>/dev/null | grep -q "libhotset\.so.* => $libdir/" || fail "the example does not load the installed libhotset: $(ldd "$EX" 2>&1 | grep hotset)"
for L in 0 1; do
	expect_ok "example layer $L" "$EX" "$HS_DATA/models/gptoss-tiny-h256-e32.gguf" $L sim &&
		expect_grep "example device $L" '^device: sim' &&
		expect_grep "example result $L" "^layer $L: \|y\| = [0-9.e+-]+; 16 pairs: "
done
expect_fail "example without a model" "$EX" "$TMP/none.gguf" 0 sim
finish
