# Checks routing traces end to end: `trace gen` writes a trace with the asked
# skew, `stats` reports it (the Belady bound above every policy, hit rates
# growing with slots), `csv` has one line per routed slot, `project` labels
# its figure a projection, the runtime records what run-layer routed (and
# leaves no trace when the output cannot be written), and
# broken trace files (cut short, reserved fields set, expert counts, layers
# or token counts past the format's limits) each get one clear line.
. "${top_srcdir:-.}/tests/lib.sh"

expect_ok "gen" "$HOTSET" trace gen --layers 3 --experts 32 --used 4 --steps 100 --tokens 2 --top 4 --share 0.5 \
	--locality 0.2 -o "$TMP/t.trace"
[ ! -e "$TMP/t.trace.part" ] || fail "gen left a .part file"
expect_ok "stats" "$HOTSET" trace stats "$TMP/t.trace" --slots 2,4,8,16 --top 4
expect_grep "stats head" '^trace .*: 3 layers, 32 experts, 4 used per token$'
# the top-4 share of each layer is near the asked 0.5 (below it: a token draws 4 distinct experts)
awk '/^ +[0-9]+ +100 +800 /{ if ($4 < 0.35 || $4 > 0.60) bad++; n++ } END { exit !(n == 3 && !bad) }' "$TMP/out" ||
	fail "top-4 shares: $(cat "$TMP/out")"
# the last four fields of each policy line are its hit rates at 2, 4, 8, 16 slots
awk '$1 ~ /^(lru|lfu|lfru|static|belady)$/ { for (k = 1; k <= 4; k++) v[$1, k] = $(NF - 4 + k); p[$1] = 1 }
     END { if (length(p) != 5) exit 1
	   for (q in p) for (k = 1; k <= 4; k++) {
		if (v[q, k] > v["belady", k] + 1e-9) exit 1
		if (k > 1 && v[q, k] + 1e-9 < v[q, k - 1]) exit 1 } }' "$TMP/out" ||
	fail "hit rates: a policy above the Belady bound, or fewer hits with more slots: $(cat "$TMP/out")"
expect_ok "csv" "$HOTSET" trace csv "$TMP/t.trace" -o "$TMP/t.csv"
lines=$(wc -l <"$TMP/t.csv")
[ "$lines" -eq $((3 * 100 * 2 * 4 + 1)) ] || fail "csv has $lines lines, expected 2401"
head -1 "$TMP/t.csv" | grep -q '^step,layer,token,slot,expert,weight$' || fail "csv header"

# a plan for a 3-layer, 32-expert model and the projection from the trace
M=$HS_DATA/models
expect_ok "gen model" "$HOTSET" gen --arch gpt-oss --layers 3 --experts 32 --used 4 --embd 64 --ff 64 -o "$TMP/m.gguf" -q
HOTSET_PROFILES="$top_srcdir/profiles" expect_ok "plan" "$HOTSET" plan --model "$TMP/m.gguf" --profile gpu8g-ram96g \
	--host-layers 3 --vram 2.6 -o "$TMP/p.json"
expect_ok "project" "$HOTSET" trace project --plan "$TMP/p.json" "$TMP/t.trace" --policy lfu
expect_grep "project label" '^projection \(not a measurement\)'
expect_grep "project figure" '^decode: [0-9.]+ tok/s projected from the trace'

# the runtime records the routing it ran
expect_ok "record" "$HOTSET" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" --layer 0 --input "$M/x-h256-n4.npy" \
	--output "$TMP/y.npy" --mode cpu --device sim --trace "$TMP/r.trace"
expect_ok "recorded csv" "$HOTSET" trace csv "$TMP/r.trace" -o "$TMP/r.csv"
[ "$(wc -l <"$TMP/r.csv")" -eq 17 ] || fail "recorded trace: $(wc -l <"$TMP/r.csv") lines, expected 4 tokens x 4 + 1"

# when the output cannot be written, no trace is left either (it was left complete)
expect_fail "output fails" sh -c 'ulimit -f 2; exec "$0" "$@"' "$HOTSET" run-layer \
	--model "$M/gptoss-tiny-h256-e32.gguf" --layer 0 --input "$M/x-h256-n4.npy" --output "$TMP/yf.npy" --mode cpu \
	--device sim --trace "$TMP/f.trace"
expect_grep "output fails says" 'yf\.npy: write failed: File too large' "$TMP/err"
for f in f.trace f.trace.part yf.npy yf.npy.part; do [ ! -e "$TMP/$f" ] || fail "output fails: $f left"; done
expect_fail "output folder" "$HOTSET" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" --layer 0 \
	--input "$M/x-h256-n4.npy" --output "$TMP/no/y.npy" --mode cpu --device sim --trace "$TMP/f.trace"
[ ! -e "$TMP/f.trace" ] || fail "output folder: a trace was left"

# replaying that trace routes the same way: the same output, bit for bit
expect_ok "replay" "$HOTSET" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" --layer 0 --input "$M/x-h256-n4.npy" \
	--output "$TMP/y2.npy" --mode cpu --device sim --replay "$TMP/r.trace"
expect_grep "replay said" 'routing replayed from'
cmp -s "$TMP/y.npy" "$TMP/y2.npy" || fail "replayed routing gave another output"
expect_fail "replay other layer" "$HOTSET" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" --layer 1 \
	--input "$M/x-h256-n4.npy" --output "$TMP/y3.npy" --mode cpu --device sim --replay "$TMP/r.trace"
expect_grep "replay message" 'no more records for layer 1' "$TMP/err"
expect_fail "replay shape" "$HOTSET" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" --layer 0 \
	--input "$M/x-h256-n4.npy" --output "$TMP/y3.npy" --mode cpu --device sim --replay "$TMP/t.trace"
expect_grep "replay shape message" 'record 0 of layer 0 has 2 tokens, forward got 4' "$TMP/err"

# broken files: one line each
head -c 100 "$TMP/t.trace" >"$TMP/cut.trace"
expect_fail "truncated" "$HOTSET" trace stats "$TMP/cut.trace"
expect_grep "truncated says where" 'record at byte 32 is cut short|record header at byte' "$TMP/err"
printf 'NOTATRACE-------------------------------' >"$TMP/bad.trace"
expect_fail "magic" "$HOTSET" trace stats "$TMP/bad.trace"
expect_grep "magic message" 'not a hotset trace' "$TMP/err"
# trace HEAD: magic, version 1, 32 experts, 1 used, then 12 reserved bytes
# (each a 4-byte word given as octal escapes); a record of one token follows
head32='HSTRACE\000\001\000\000\000\040\000\000\000\001\000\000\000'
zero4='\000\000\000\000' one4='\001\000\000\000' w1='\000\000\200\077'
rec="$zero4$zero4$one4$zero4$one4$w1" # step 0, layer 0, 1 token, reserved; id 1, weight 1.0
printf "$head32$zero4$zero4$zero4$rec" >"$TMP/ok.trace"
expect_ok "hand-made trace" "$HOTSET" trace stats "$TMP/ok.trace"
printf "$head32$zero4$one4$zero4$rec" >"$TMP/bad.trace"
expect_fail "reserved header" "$HOTSET" trace stats "$TMP/bad.trace"
expect_grep "reserved header message" 'header bytes 20\.\.31 are reserved and must be zero' "$TMP/err"
printf "$head32$zero4$zero4$zero4$zero4$zero4$one4$one4$one4$w1" >"$TMP/bad.trace"
expect_fail "reserved record" "$HOTSET" trace stats "$TMP/bad.trace"
expect_grep "reserved record message" 'record at byte 32: its reserved field is 1, not zero' "$TMP/err"
# a 56-byte file declaring 65,536 experts: refused at once (it cost minutes of `stats`)
printf 'HSTRACE\000\001\000\000\000\000\000\001\000\001\000\000\000'"$zero4$zero4$zero4$rec" >"$TMP/bad.trace"
expect_fail "65536 experts" "$HOTSET" trace stats "$TMP/bad.trace"
expect_grep "65536 experts message" '65536 experts, 1 used \(version 1, 1\.\.4096 experts' "$TMP/err"
printf "$head32$zero4$zero4$zero4$zero4"'\000\040\000\000'"$one4$zero4$one4$w1" >"$TMP/bad.trace"
expect_fail "layer 8192" "$HOTSET" trace stats "$TMP/bad.trace"
expect_grep "layer message" 'layer 8192 \(0\.\.4095\)' "$TMP/err"
# a record declaring a million tokens in a file of 56 bytes: no allocation for them
printf "$head32$zero4$zero4$zero4$zero4$zero4"'\000\000\020\000'"$zero4$one4$w1" >"$TMP/bad.trace"
expect_fail "declared tokens" "$HOTSET" trace stats "$TMP/bad.trace"
expect_grep "declared tokens message" 'record at byte 32 is cut short \(1048576 tokens x 1 need 8388608 bytes, 8 left\)' "$TMP/err"
expect_fail "missing" "$HOTSET" trace csv "$TMP/none.trace" -o "$TMP/x.csv"
[ ! -e "$TMP/x.csv" ] && [ ! -e "$TMP/x.csv.part" ] || fail "a failed csv left a file"
expect_fail "gen share" "$HOTSET" trace gen --experts 32 --top 4 --share 0.05 -o "$TMP/x.trace"
[ ! -e "$TMP/x.trace" ] && [ ! -e "$TMP/x.trace.part" ] || fail "a failed gen left a file"
expect_fail "slots 4," "$HOTSET" trace stats "$TMP/t.trace" --slots 4,
expect_grep "slots 4, says" '^hotset trace stats: --slots 4,: item 2 is empty$' "$TMP/err"
expect_fail "run-layer device ''" "$HOTSET" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" --layer 0 \
	--input "$M/x-h256-n4.npy" --output "$TMP/y4.npy" --device ''
expect_grep "device '' says" "^hotset run-layer: --device '': give sim or cuda$" "$TMP/err"
expect_fail "usage: action" "$HOTSET" trace frob
finish
