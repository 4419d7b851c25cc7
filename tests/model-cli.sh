# Checks the model commands end to end: `run-layer` on the gpt-oss file
# written by another implementation matches the float64 NumPy outputs of
# layers 0 and 1 (relative L2 < 1e-5); `gen` + `model` report the shapes
# asked for; bad .npy inputs (NaN and Inf values too, named by row and
# column) and bad flags give one error line and leave no output file behind;
# `gen --split-max-size` writes shards that `model` lists and that run the
# same layer as the unsplit file, opened from any shard.
. "${top_srcdir:-.}/tests/lib.sh"
M=$HS_DATA/models
CMP=${top_builddir:-.}/tests/npy-cmp

for L in 0 1; do
	expect_ok "run-layer $L" "$HOTSET" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" --layer $L \
		--input "$M/x-h256-n4.npy" --output "$TMP/y$L.npy" --ref &&
		expect_ok "compare layer $L" "$CMP" "$TMP/y$L.npy" "$M/y-h256-n4-layer$L.npy" 1e-5
	cat "$TMP/out"
done
# Without --ref the CPU kernels run (Q8_0 activations): within the fused
# FFN bound of tests/test-kernels.c, 5e-2; so do their scalar twins.
for L in 0 1; do
	expect_ok "run-layer kernels $L" "$HOTSET" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" --layer $L \
		--input "$M/x-h256-n4.npy" --output "$TMP/f$L.npy" &&
		expect_ok "compare kernels $L" "$CMP" "$TMP/f$L.npy" "$M/y-h256-n4-layer$L.npy" 5e-2
	cat "$TMP/out"
	HS_USE_REF=1 expect_ok "run-layer twins $L" "$HOTSET" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" \
		--layer $L --input "$M/x-h256-n4.npy" --output "$TMP/s$L.npy" &&
		expect_ok "compare twins $L" "$CMP" "$TMP/s$L.npy" "$TMP/f$L.npy" 1e-3
	# the device path on the sim device: the same kernels behind the device
	# contract (slots, queues, events), so the same bound; it says "sim"
	expect_ok "run-layer sim $L" "$HOTSET" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" --layer $L \
		--input "$M/x-h256-n4.npy" --output "$TMP/d$L.npy" --device sim &&
		expect_grep "sim says sim $L" '^run-layer: layer [01], 4 tokens on device sim \(' &&
		expect_ok "compare sim $L" "$CMP" "$TMP/d$L.npy" "$M/y-h256-n4-layer$L.npy" 5e-2
done
# the hybrid runtime: both layers on the host (no cache), each mode on the
# sim device; the host experts are reported on node 0
HOTSET_PROFILES="$top_srcdir/profiles" expect_ok "plan for runtime" "$HOTSET" plan --model "$M/gptoss-tiny-h256-e32.gguf" \
	--profile gpu8g-ram96g --host-layers 2 --no-cache -o "$TMP/plan.json"
for mode in cpu stream hybrid auto; do
	expect_ok "run-layer --mode $mode" "$HOTSET" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" --layer 1 \
		--input "$M/x-h256-n4.npy" --output "$TMP/m$mode.npy" --device sim --mode $mode --plan "$TMP/plan.json" &&
		expect_grep "mode $mode placed" 'layer 1: host, 0 slots; host experts [0-9.]+ MiB placed on node 0 \(measured there' &&
		expect_grep "mode $mode says sim" '^device: sim' &&
		expect_ok "compare mode $mode" "$CMP" "$TMP/m$mode.npy" "$M/y-h256-n4-layer1.npy" 5e-2
done
expect_fail "bad mode" "$HOTSET" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" --layer 1 \
	--input "$M/x-h256-n4.npy" --output "$TMP/mx.npy" --mode fast
expect_fail "plan without mode" "$HOTSET" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" --layer 1 \
	--input "$M/x-h256-n4.npy" --output "$TMP/mx.npy" --plan "$TMP/plan.json"
expect_fail "device unknown" "$HOTSET" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" --layer 0 \
	--input "$M/x-h256-n4.npy" --output "$TMP/dx.npy" --device tpu
expect_fail "device and ref" "$HOTSET" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" --layer 0 \
	--input "$M/x-h256-n4.npy" --output "$TMP/dx.npy" --device sim --ref
[ ! -e "$TMP/dx.npy" ] || fail "a failed run-layer wrote its output"

expect_ok "model" "$HOTSET" model "$M/gptoss-tiny-h256-e32.gguf" && {
	expect_grep "model arch" '^architecture: gpt-oss$'
	expect_grep "model experts" '^experts: 32 per layer, 4 used per token$'
	expect_grep "model bytes" '^bytes per expert: 104,448 weights \+ 3,072 biases'
}
expect_ok "model json" "$HOTSET" model --json "$M/gptoss-tiny-h256-e32.gguf" &&
	expect_grep "model json" '"expert_weight_bytes": 104448'

# a llama-quantize Q4_K_M file: its mix of types, per expert part and per tensor
expect_ok "model q4_k_m" "$HOTSET" model "$HS_DATA/oracle/qwen3moe-l2-h512-e16k4-q4km.gguf" && {
	expect_grep "q4_k_m experts" '^n_embd: 512, expert n_ff: 256, expert types: gate q4_K, up q4_K, down q4_K/q6_K$'
	expect_grep "q4_k_m file type" '^file type: Q4_K_M \(general.file_type 15\)$'
	expect_grep "q4_k_m tensors" '^tensor types: q4_K 13 \(7.0 MiB\), q6_K 3 \(1.9 MiB\), f32 11 \(0.1 MiB\)$'
}
expect_ok "model json q4_k_m" "$HOTSET" model --json "$HS_DATA/oracle/qwen3moe-l2-h512-e16k4-q4km.gguf" &&
	expect_grep "model json types" '"q6_K": \{'

# gen writes K-quant mixes (and refuses shapes their blocks do not fit)
expect_ok "gen q4_K + q6_K" "$HOTSET" gen -q --arch qwen3moe --layers 2 --experts 8 --used 2 --embd 256 --ff 512 \
	--type q4_K --down-type q6_K --dense-type iq4_xs --vocab 512 -o "$TMP/k.gguf" &&
	expect_ok "model q4_K + q6_K" "$HOTSET" model "$TMP/k.gguf" && {
		expect_grep "gen mix" '^n_embd: 256, expert n_ff: 512, expert types: gate q4_K, up q4_K, down q6_K$'
		expect_grep "gen mix tensors" '^tensor types: q4_K 4 .*q6_K 2 .*iq4_xs'
	}
expect_ok "run q4_K + q6_K" "$HOTSET" run --model "$TMP/k.gguf" --tokens "1 2 3" -n 2
expect_fail "gen q4_K on 96 columns" "$HOTSET" gen -q --arch qwen3moe --layers 1 --experts 4 --used 2 --embd 96 \
	--ff 256 --type q4_K -o "$TMP/bad.gguf" && expect_grep "gen block message" 'embd 96: a multiple of 256' "$TMP/err"
expect_fail "gen unsupported type" "$HOTSET" gen -q --preset tiny --type iq2_xxs -o "$TMP/bad.gguf" &&
	expect_grep "gen type message" 'type iq2_xxs: one of f32, f16' "$TMP/err"
[ -e "$TMP/bad.gguf" ] && fail "gen left bad.gguf"

# gen with explicit shapes, both architectures, then model reads them back.
expect_ok "gen qwen" "$HOTSET" gen -q --arch qwen3moe --layers 3 --experts 8 --used 2 --embd 64 --ff 96 \
	--type q8_0 --seed 5 -o "$TMP/q.gguf" &&
	expect_ok "model qwen" "$HOTSET" model "$TMP/q.gguf" && {
		expect_grep "qwen shape" '^n_embd: 64, expert n_ff: 96, expert types: q8_0$'
		expect_grep "qwen layers" '^layers: 3 \(3 with experts\)$'
		expect_grep "qwen bias" 'weights \+ 0 biases'
	}
[ -e "$TMP/q.gguf.part" ] && fail "gen left q.gguf.part"
# glm4moe: a leading dense layer, a shared expert, sigmoid routing with a bias;
# the file runs (its tokenizer's glm4 pre-tokenizer and GLM-4.5's chat format)
expect_ok "gen glm" "$HOTSET" gen -q --arch glm4moe --layers 3 --dense-layers 1 --experts 16 --used 4 --embd 256 \
	--ff 128 --dense-ff 512 --shared-experts 1 --qk-norm --heads 8 --kv-heads 2 --head-dim 64 --vocab 300 \
	-o "$TMP/g.gguf" && expect_ok "model glm" "$HOTSET" model "$TMP/g.gguf" && {
	expect_grep "glm layers" '^layers: 3 \(2 with experts\)$'
	expect_grep "glm dense" '^dense FFN layers: 1 leading \(0..0\), ff 512,'
	expect_grep "glm shared" '^shared expert: one per MoE layer, ff 128,'
	expect_ok "run glm" "$HOTSET" run -q --json --model "$TMP/g.gguf" --chat "hi" -n 4 --device cpu &&
		expect_grep "run glm tokens" '"prompt_tokens": 7,'
}
expect_fail "gen dense layers on qwen3moe" "$HOTSET" gen -q --arch qwen3moe --layers 3 --dense-layers 1 --experts 8 \
	--used 2 --embd 64 --ff 96 -o "$TMP/bad.gguf" && expect_grep "gen dense layers message" 'glm4moe only' "$TMP/err"
# qwen35moe: Gated DeltaNet layers (here 1 and 3) beside gated attention, a shared expert
expect_ok "gen qwen35" "$HOTSET" gen -q --arch qwen35moe --layers 4 --full-attn-every 2 --experts 8 --used 2 \
	--embd 256 --ff 256 --shared-experts 1 --heads 4 --kv-heads 2 --head-dim 64 --vocab 300 -o "$TMP/q35.gguf" &&
	expect_ok "model qwen35" "$HOTSET" model "$TMP/q35.gguf" && {
	expect_grep "qwen35 recurrent" '^Gated DeltaNet: 2 of 4 layers \(no KV cache\)'
	# llama.cpp refuses a qwen35moe file without its M-RoPE sections
	expect_grep "qwen35 rope sections" 'qwen35moe\.rope\.dimension_sections' "$TMP/q35.gguf"
	expect_ok "run qwen35" "$HOTSET" run -q --json --model "$TMP/q35.gguf" --chat "hi" -n 4 --device cpu &&
		expect_grep "run qwen35 reasoning" '"reasoning": "'
}
expect_fail "gen qwen35 interval" "$HOTSET" gen -q --arch qwen35moe --layers 2 --full-attn-every 3 --experts 8 --used 2 \
	--embd 256 --ff 256 -o "$TMP/bad.gguf" && expect_grep "gen qwen35 interval message" 'full-attn-every 3 \(1..layers\)' "$TMP/err"
expect_ok "gen tiny" "$HOTSET" gen -q --preset tiny --seed 9 -o "$TMP/t.gguf"
printf 'x' >"$TMP/x.txt"

# Bad inputs: one line, non-zero exit, no output file.
mknpy() { # FILE DESCR SHAPE DATA_BYTES
	h="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
	while [ $(( (10 + ${#h} + 1) % 64 )) -ne 0 ]; do h="$h "; done
	len=$(( ${#h} + 1 ))
	{ printf '\223NUMPY\001\000'; printf "\\$(printf %03o $((len % 256)))\\$(printf %03o $((len / 256)))";
	  printf '%s\n' "$h"; head -c "$4" /dev/zero; } >"$1"
}
mknpy "$TMP/f8.npy" '<f8' '(2, 256)' 4096
mknpy "$TMP/short.npy" '<f4' '(2, 256)' 2000
mknpy "$TMP/long.npy" '<f4' '(2, 256)' 2050
mknpy "$TMP/3d.npy" '<f4' '(2, 2, 64)' 1024
mknpy "$TMP/cols.npy" '<f4' '(2, 128)' 1024
mknpy "$TMP/ok.npy" '<f4' '(2, 256)' 2048
# NaN at row 1, column 7 (little-endian 0x7fc00000), +Inf at row 0, column 3
for v in nan:'\000\000\300\177':263 inf:'\000\000\200\177':3; do
	name=${v%%:*}; rest=${v#*:}; bytes=${rest%:*}; at=${rest##*:}
	cp "$TMP/ok.npy" "$TMP/$name.npy"
	printf "$bytes" | dd of="$TMP/$name.npy" bs=1 seek=$(( $(wc -c <"$TMP/ok.npy") - 2048 + 4 * at )) conv=notrunc 2>/dev/null
done
for bad in f8:float32 short:truncated long:trailing 3d:dimensions cols:"n, 256" x.txt:"not a .npy" \
	nan:"nan\.npy: row 1, column 7 is NaN; the values must be finite" inf:"row 0, column 3 is \+Inf"; do
	f=${bad%%:*}; why=${bad#*:}
	case $f in *.*) ;; *) f=$f.npy ;; esac
	expect_fail "input $f" "$HOTSET" run-layer --model "$TMP/t.gguf" --layer 0 --input "$TMP/$f" --output "$TMP/out.npy" &&
		expect_grep "input $f message" "$why" "$TMP/err"
	[ -e "$TMP/out.npy" ] && fail "output written for bad input $f"
done
expect_ok "ok input" "$HOTSET" run-layer --model "$TMP/t.gguf" --layer 1 --input "$TMP/ok.npy" --output "$TMP/out.npy"
[ -e "$TMP/out.npy.part" ] && fail "run-layer left a .part file"
expect_fail "layer 2" "$HOTSET" run-layer --model "$TMP/t.gguf" --layer 2 --input "$TMP/ok.npy" --output "$TMP/o2.npy"
expect_fail "missing model" "$HOTSET" run-layer --model "$TMP/none.gguf" --layer 0 --input "$TMP/ok.npy" --output "$TMP/o2.npy"
expect_fail "not a model" "$HOTSET" model "$TMP/x.txt"
expect_fail "model of a npy" "$HOTSET" model "$TMP/ok.npy"
expect_fail "missing --output" "$HOTSET" run-layer --model "$TMP/t.gguf" --layer 0 --input "$TMP/ok.npy"
expect_fail "gen bad embd" "$HOTSET" gen --arch gpt-oss --layers 1 --experts 4 --used 2 --embd 100 --ff 64 -o "$TMP/b.gguf" &&
	expect_grep "gen embd message" 'embd 100: a multiple of 32' "$TMP/err"
expect_fail "gen used > experts" "$HOTSET" gen --preset tiny --used 40 -o "$TMP/b.gguf"
expect_fail "gen bad preset" "$HOTSET" gen --preset nope -o "$TMP/b.gguf"
expect_fail "gen no output" "$HOTSET" gen --preset tiny
expect_fail "gen unwritable" "$HOTSET" gen -q --preset tiny -o "$TMP/no/such/dir/b.gguf"
[ -e "$TMP/b.gguf" ] && fail "gen wrote a file after an error"

# Split files: -o names the prefix (a trailing .gguf dropped), 3M = 3 x 10^6
# bytes of tensor data a shard, as llama-gguf-split counts.
expect_ok "gen split" "$HOTSET" gen -q --preset tiny --seed 9 --split-max-size 3M -o "$TMP/s.gguf"
S=$TMP/s-00002-of-00003.gguf
[ -e "$TMP/s-00001-of-00003.gguf" ] && [ -e "$S" ] && [ -e "$TMP/s-00003-of-00003.gguf" ] ||
	fail "gen split wrote: $(ls "$TMP")"
ls "$TMP" | grep -q 'part$' && fail "gen split left a .part file"
total=$(cat "$TMP"/s-0000?-of-00003.gguf | wc -c)
expect_ok "model split" "$HOTSET" model "$S" && {
	expect_grep "split file bytes" "^file bytes: $(echo "$total" | sed -e ':a' -e 's/\B[0-9]\{3\}\>/,&/' -e 'ta') "
	expect_grep "split shards" '^shards: 3$'
	expect_grep "split shard 1" '^  s-00001-of-00003\.gguf: [0-9,]+ bytes, [0-9]+ tensors$'
	expect_grep "split shard 3" '^  s-00003-of-00003\.gguf: [0-9,]+ bytes'
	grep -v -e '^model:' -e '^file bytes:' -e '^shards:' -e '^  s-' "$TMP/out" >"$TMP/split.txt"
}
expect_ok "model unsplit" "$HOTSET" model "$TMP/t.gguf" &&
	grep -v -e '^model:' -e '^file bytes:' "$TMP/out" >"$TMP/whole.txt" &&
	{ cmp -s "$TMP/split.txt" "$TMP/whole.txt" || fail "model of the split file differs: $(diff "$TMP/split.txt" "$TMP/whole.txt")"; }
expect_ok "model split json" "$HOTSET" model --json "$TMP/s-00001-of-00003.gguf" && {
	expect_grep "split json file_bytes" "\"file_bytes\": $total,"
	expect_grep "split json shard" "\"file\": \"$TMP/s-00003-of-00003\\.gguf\","
}
# the host experts come from each tensor's shard: the same layer output
HOTSET_PROFILES="$top_srcdir/profiles" expect_ok "plan split" "$HOTSET" plan --model "$S" \
	--profile gpu8g-ram96g --host-layers 2 --no-cache -o "$TMP/splan.json"
for f in "$TMP/t.gguf" "$S"; do
	expect_ok "run-layer host $f" "$HOTSET" run-layer --model "$f" --layer 1 --input "$M/x-h256-n4.npy" \
		--output "$TMP/h-${f##*/}.npy" --device sim --mode cpu --plan "$TMP/splan.json"
done
cmp -s "$TMP/h-t.gguf.npy" "$TMP/h-s-00002-of-00003.gguf.npy" || fail "a split model's layer differs from the whole file's"
mv "$TMP/s-00003-of-00003.gguf" "$TMP/s3"
expect_fail "missing shard" "$HOTSET" model "$TMP/s-00001-of-00003.gguf" &&
	expect_grep "missing shard message" "s-00003-of-00003\.gguf: missing \(split.count 3 in .*s-00001-of-00003\.gguf\)" "$TMP/err"
for bad in 0 4K -3M 1.5G M; do
	expect_fail "split size $bad" "$HOTSET" gen -q --preset tiny --split-max-size "$bad" -o "$TMP/b" &&
		expect_grep "split size $bad message" '^hotset gen: --split-max-size' "$TMP/err"
done
ls "$TMP" | grep -q '^b' && fail "gen wrote files after a bad --split-max-size"
finish
