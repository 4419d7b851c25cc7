# Checks `hotset bench` end to end on a small generated model and the sim
# device: a row per (mode, batch, slots) with measured and predicted
# tokens/s, bytes that fit the mode (cpu copies nothing, stream at batch 1
# reads nothing on the CPU), a verdict per batch, the CSV, JSON and SVG
# outputs complete and nothing half-written, a generated model kept in the
# cache directory and reused, a recorded trace accepted, and bad input
# refused with one line (outputs that cannot be written before measuring,
# the real cause when the temporary trace cannot be written, even with -q).
# No timing is asserted.
. "${top_srcdir:-.}/tests/lib.sh"

export XDG_CACHE_HOME="$TMP/cache"
expect_ok "gen" "$HOTSET" gen --preset tiny -q -o "$TMP/m.gguf"

expect_ok "bench" "$HOTSET" bench --model "$TMP/m.gguf" --steps 4 --warmup 1 --batch 1,8 --slots 0,8 \
	--csv "$TMP/b.csv" --plot "$TMP/b.svg" -q
cp "$TMP/out" "$TMP/table"
expect_grep "label" '^hotset bench \(measurements; "predicted" = the cost model' "$TMP/table"
expect_grep "device" '^device: +sim .*\[sim: the device is threads of this CPU\]' "$TMP/table"
expect_grep "rates" '^rates before the 8-slot cases \(measured, sim\): host read [0-9.]+ GB/s, CPU kernel [0-9.]+ GB/s' "$TMP/table"
expect_grep "verdict decode" '^verdict, decode \(batch 1\): 0 slots: (cpu|stream|hybrid), [0-9.]+x' "$TMP/table"
expect_grep "verdict prefill" '^verdict, prefill \(batch 8\):' "$TMP/table"
# 4 modes x 2 batches x 2 slot counts; fields: mode ran batch slots tok/s range predicted ratio hit pred
# host/tok pcie/tok cpu gpu copy ovl bound...
awk '$1 ~ /^(cpu|stream|hybrid|auto)$/ && $3 ~ /^[0-9]+$/ {
	n++
	if ($5 <= 0 || $7 <= 0) bad = bad " no tok/s: " $0
	if ($1 == "cpu" && $2 != "cpu-compute") bad = bad " cpu ran " $2
	if ($1 == "auto" && $2 !~ /^(cpu-compute|pcie-stream|hybrid)$/) bad = bad " auto ran " $2
	if ($1 == "cpu" && $12 != "0.0Mi") bad = bad " cpu copied: " $0
	if ($1 == "stream" && $3 == 1 && $11 != "0.0Mi") bad = bad " stream read on the CPU: " $0
	if ($4 == 0 && ($1 == "cpu") && $9 != "0%") bad = bad " hits without slots: " $0
	} END { if (n != 16) bad = bad " rows: " n; if (bad) { print bad; exit 1 } }' "$TMP/table" >"$TMP/why" ||
	fail "table: $(cat "$TMP/why")"

lines=$(wc -l <"$TMP/b.csv")
[ "$lines" -eq 17 ] || fail "csv: $lines lines, want 17"
head -1 "$TMP/b.csv" | grep -q '^mode,ran,batch,slots,tok_s,tok_s_p25,tok_s_p75,predicted_tok_s,ratio,hit,' ||
	fail "csv header: $(head -1 "$TMP/b.csv")"
awk -F, 'NF != 19 { exit 1 }' "$TMP/b.csv" || fail "csv: a line without 19 fields"
head -1 "$TMP/b.svg" | grep -q '^<?xml' || fail "svg head"
grep -q '</svg>' "$TMP/b.svg" || fail "svg not closed"
if command -v gnuplot >/dev/null 2>&1; then # drawn by gnuplot: its legend names the modes
	for m in cpu stream hybrid auto; do grep -q ">$m<" "$TMP/b.svg" || fail "gnuplot svg: no '$m'"; done
	expect_ok "png" "$HOTSET" bench --model "$TMP/m.gguf" --steps 1 --warmup 0 --batch 1 --slots 0 --modes cpu \
		--plot "$TMP/p.png" -q
	head -c 4 "$TMP/p.png" | grep -q PNG || fail "not a PNG"
else # the built-in SVG: measured and predicted, 4 modes, 2 panels
	[ "$(grep -c '<polyline' "$TMP/b.svg")" -eq 16 ] || fail "svg: $(grep -c '<polyline' "$TMP/b.svg") lines, want 16"
fi
ls "$TMP"/*.part >/dev/null 2>&1 && fail "a .part file was left"

expect_ok "json" "$HOTSET" bench --model "$TMP/m.gguf" --steps 2 --warmup 0 --batch 1 --slots 0 --modes cpu,hybrid --json -q
expect_grep "json head" '"hotset_bench": 1'
expect_grep "json rates" '"slots": 0, "host_read_gbps": [0-9.]+'
[ "$(grep -c '"mode": ' "$TMP/out")" -eq 2 ] || fail "json rows: $(cat "$TMP/out")"

# a preset model is generated once into the cache directory, then reused
expect_ok "preset" "$HOTSET" bench --preset tiny --layers 1 --steps 2 --warmup 0 --batch 1 --slots 0 --modes cpu
[ -f "$XDG_CACHE_HOME/hotset/bench-tiny-L1-E32-s1.gguf" ] || fail "no cached model: $(ls -R "$XDG_CACHE_HOME")"
grep -q "generating" "$TMP/err" || fail "first run did not say it generates: $(cat "$TMP/err")"
expect_ok "preset again" "$HOTSET" bench --preset tiny --layers 1 --steps 2 --warmup 0 --batch 1 --slots 0 --modes cpu
grep -q "reused" "$TMP/err" || fail "second run did not reuse the model: $(cat "$TMP/err")"

# a recorded trace routes the steps
expect_ok "trace gen" "$HOTSET" trace gen --layers 2 --experts 32 --used 4 --steps 20 --tokens 1 -o "$TMP/t.trace"
expect_ok "bench --trace" "$HOTSET" bench --model "$TMP/m.gguf" --trace "$TMP/t.trace" --steps 4 --warmup 1 \
	--batch 1,2 --slots 8 --modes cpu -q
expect_grep "trace rows" "^cpu +cpu-compute +2 +8 "
expect_ok "trace 16" "$HOTSET" trace gen --layers 2 --experts 16 --used 4 --top 2 --steps 4 --tokens 1 -o "$TMP/t16.trace"

# --e2e: the whole model token to token; -v then breaks a generated token
# and the prompt down step by step
expect_ok "e2e" "$HOTSET" bench --e2e --preset tiny --layers 1 --devices cpu --pp 16 --tg 4 --reps 1 -v -q
expect_grep "e2e row" '^cpu +- +[0-9.]+ \[[0-9]+-[0-9]+\] +[0-9.]+ \['
expect_grep "e2e tg steps" '^  tg step +ms/token +share +MB/token'
expect_grep "e2e pp steps" '^  pp step +ms/prompt +share +dispatches$'
expect_grep "e2e pp experts" '^  experts +[0-9.]+ +[0-9.]+% +[1-9][0-9]*$'
expect_grep "e2e pp all" '^  all +[0-9.]+ +100\.0% +\(16 tokens\)$'
expect_fail "e2e pp 0" "$HOTSET" bench --e2e --preset tiny --pp 0
expect_grep "e2e pp 0 says" '^hotset bench: --pp' "$TMP/err"

expect_fail "wrong trace" "$HOTSET" bench --model "$TMP/m.gguf" --trace "$TMP/t16.trace"
expect_grep "wrong trace says" '16 experts, 4 per token; the model has 32 and 4' "$TMP/err"
expect_fail "mode" "$HOTSET" bench --model "$TMP/m.gguf" --modes cpu,turbo
expect_grep "mode says" "'turbo' is not cpu, stream, hybrid or auto" "$TMP/err"
expect_fail "slots" "$HOTSET" bench --model "$TMP/m.gguf" --slots 0,30
expect_grep "slots says" 'at most 24 for 32 experts' "$TMP/err"
expect_fail "batch" "$HOTSET" bench --model "$TMP/m.gguf" --batch 0
expect_fail "batch twice" "$HOTSET" bench --model "$TMP/m.gguf" --batch 1,1
expect_fail "device" "$HOTSET" bench --model "$TMP/m.gguf" --device gpu
# empty items and values are refused, not skipped
expect_fail "batch 1,,2" "$HOTSET" bench --model "$TMP/m.gguf" --batch 1,,2
expect_grep "batch 1,,2 says" '^hotset bench: --batch 1,,2: item 2 is empty$' "$TMP/err"
expect_fail "modes cpu," "$HOTSET" bench --model "$TMP/m.gguf" --modes cpu,
expect_grep "modes cpu, says" '^hotset bench: --modes cpu,: item 2 is empty$' "$TMP/err"
expect_fail "slots ,8" "$HOTSET" bench --model "$TMP/m.gguf" --slots ,8
expect_fail "device ''" "$HOTSET" bench --model "$TMP/m.gguf" --device ''
expect_grep "device '' says" "^hotset bench: --device '': give cuda or sim$" "$TMP/err"
expect_fail "policy" "$HOTSET" bench --model "$TMP/m.gguf" --policy mru
expect_fail "skew" "$HOTSET" bench --model "$TMP/m.gguf" --skew wild
expect_fail "missing model" "$HOTSET" bench --model "$TMP/none.gguf"
expect_fail "model and preset" "$HOTSET" bench --model "$TMP/m.gguf" --preset tiny
expect_fail "argument" "$HOTSET" bench --model "$TMP/m.gguf" extra
# outputs that cannot be written are refused before a minute of measuring
expect_fail "csv folder" "$HOTSET" bench --model "$TMP/m.gguf" --csv "$TMP/no/b.csv" -q
expect_grep "csv folder says" '--csv .*/no/b\.csv: folder .*/no: No such file or directory \(folders are not created\)' "$TMP/err"
[ -s "$TMP/out" ] && fail "csv folder: it measured before refusing"
[ ! -e "$TMP/no" ] || fail "csv folder: a folder was created"
expect_fail "plot folder" "$HOTSET" bench --model "$TMP/m.gguf" --plot "$TMP/" -q
# -q still says why the temporary trace cannot be written, with the real cause
TMPDIR="$TMP/none" expect_fail "no TMPDIR" "$HOTSET" bench --model "$TMP/m.gguf" -q
expect_grep "no TMPDIR says" 'temporary trace .*/none/hotset-bench-.*: No such file or directory' "$TMP/err"
mkdir "$TMP/tmp"
TMPDIR="$TMP/tmp" expect_fail "file-size limit" sh -c 'ulimit -f 4; exec "$0" "$@"' "$HOTSET" bench \
	--model "$TMP/m.gguf" -q --steps 8 --warmup 0 --batch 32
expect_grep "file-size limit says" 'trace .*: write failed: File too large' "$TMP/err"
[ -z "$(ls "$TMP/tmp")" ] || fail "file-size limit: left $(ls "$TMP/tmp")"
if ! command -v gnuplot >/dev/null 2>&1; then
	expect_fail "png without gnuplot" "$HOTSET" bench --model "$TMP/m.gguf" --steps 1 --warmup 0 --batch 1 \
		--slots 0 --modes cpu --plot "$TMP/p.png" -q
	[ ! -e "$TMP/p.png" ] || fail "a png was written"
fi
finish
