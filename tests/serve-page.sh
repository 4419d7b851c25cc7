# Checks the chat page of `hotset serve` in headless Chromium (Debian's
# chromium; skipped with 77 where it is not installed): the page asks a
# question, the answer streams in and finishes with its usage line, no
# error is shown, and a screenshot is taken (docs/serve-chat.png is one).
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/serve-lib.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
browser=
for b in chromium chromium-browser google-chrome; do
	command -v $b >/dev/null && browser=$(command -v $b) && break
done
[ -n "$browser" ] || { echo "SKIP: no chromium installed (Debian package chromium)"; exit 77; }
gen_model "$TMP/m.gguf"
start_server page --model "$TMP/m.gguf" --device cpu -q || fail "no server"
wait_ready || fail "not ready: $(cat "$TMP/page.err")"
HOME=$TMP python3 "$top_srcdir/tests/serve-page.py" "$browser" "$URL/?q=Hello%20there&max=16&temp=0" \
	"$TMP/chat.png" $((60 * SLOW)) || fail "the chat page (above)"
stop_server "page server"
finish
