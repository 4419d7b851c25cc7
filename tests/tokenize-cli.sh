# Checks `hotset tokenize` end to end: ids on one line as tiktoken gives them,
# --special, --pieces, --json, --file taking the bytes exactly (newline kept,
# stdin with -), the qwen2 file; and one-line errors for a missing model, a
# file with no tokenizer, --text with --file, neither, an unreadable file.
. "${top_srcdir:-.}/tests/lib.sh"
V=$HS_DATA/vocab/gptoss-o200k-harmony-vocab.gguf
Q=$HS_DATA/oracle/qwen3moe-l3-h256-e16k4-q8.gguf

expect_ok "text" "$HOTSET" tokenize --model "$V" --text "Hello world" && expect_grep "text ids" '^13225 2375$'
expect_ok "plain special text" "$HOTSET" tokenize --model "$V" --text "<|end|>" &&
	expect_grep "several ids" '^[0-9]+ [0-9]+ [0-9]+'
expect_ok "--special" "$HOTSET" tokenize --model "$V" --text "<|start|>user<|message|>Hi<|end|>" --special &&
	expect_grep "special ids" '^200006 1428 200008 12194 200007$'
expect_ok "--pieces" "$HOTSET" tokenize --model "$V" --text "Hi there" --pieces && {
	expect_grep "piece 1" '^12194	"Hi"$'
	expect_grep "piece 2" '^1354	" there"$'
}
expect_ok "--pieces escapes" "$HOTSET" tokenize --model "$V" --text "$(printf 'a\tb"c\\')" --pieces &&
	expect_grep "escapes" '"\\t"|\\"|\\\\'
expect_ok "--json" "$HOTSET" tokenize --model "$V" --text "Hello world" --json &&
	expect_grep "json" '^\{"ids":\[13225,2375\],"pieces":\["Hello"," world"\]\}$'
# a piece that is part of a character shows U+FFFD in JSON
expect_ok "--json partial" "$HOTSET" tokenize --model "$V" --text "$(printf '\344\270')" --json &&
	expect_grep "json partial" "\"pieces\":\\[\"$(printf '\357\277\275')\"\\]"
printf 'Hello world\n' >"$TMP/in.txt"
expect_ok "--file" "$HOTSET" tokenize --model "$V" --file "$TMP/in.txt" && expect_grep "file ids" '^13225 2375 198$'
expect_ok "--file -" sh -c "printf 'Hello world' | \"$HOTSET\" tokenize --model \"$V\" --file -" &&
	expect_grep "stdin ids" '^13225 2375$'
# the tiny vocabulary merges "wo", "wor", ... before " w": Hugging Face gives these too
expect_ok "qwen2" "$HOTSET" tokenize --model "$Q" --text "hello world" && expect_grep "qwen ids" '^274 32 283$'

expect_fail "missing model" "$HOTSET" tokenize --model "$TMP/none.gguf" --text x &&
	expect_grep "missing model message" 'none.gguf' "$TMP/err"
expect_fail "no --model" "$HOTSET" tokenize --text x
expect_fail "both" "$HOTSET" tokenize --model "$V" --text x --file "$TMP/in.txt" &&
	expect_grep "both message" 'cannot be given together' "$TMP/err"
expect_fail "neither" "$HOTSET" tokenize --model "$V"
expect_fail "unreadable file" "$HOTSET" tokenize --model "$V" --file "$TMP/no/such.txt" &&
	expect_grep "unreadable message" 'such.txt' "$TMP/err"
expect_fail "a directory" "$HOTSET" tokenize --model "$V" --file "$TMP"
expect_fail "not a GGUF" "$HOTSET" tokenize --model "$TMP/in.txt" --text x
expect_fail "usage: bad flag" "$HOTSET" tokenize --model "$V" --text x --frob
finish
