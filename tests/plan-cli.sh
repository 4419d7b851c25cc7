# Checks `hotset plan` and `hotset tune` from the command line: the shipped
# profiles plan, JSON and -o agree, a measured profile of this machine
# plans, a profile put on another machine's topology says so and plans with
# the topology's nodes, and bad flags, files and profiles get one clear line
# each.
. "${top_srcdir:-.}/tests/lib.sh"
HOTSET_PROFILES="$top_srcdir/profiles"; export HOTSET_PROFILES
unset XDG_CACHE_HOME
HOME="$TMP/home"; export HOME

# the GLM presets: leading dense layers are not placed, the shared experts go with the dense part
expect_ok "plan glm-4.5-air" "$HOTSET" plan --preset glm-4.5-air --profile a6000-48g-pcie3 && {
	expect_grep "glm air layers" '^model: 45 MoE layers x 128 experts \(8 used\)'
	expect_grep "glm air dense" '1 dense FFN layers; shared experts [0-9.]+ MiB in all'
	expect_grep "glm air first layer" '^  layers 1-'
}
expect_ok "plan glm-4.5" "$HOTSET" plan --preset glm-4.5 --profile a6000-48g-pcie3 &&
	expect_grep "glm layers" '^model: 89 MoE layers x 160 experts \(8 used\)'
expect_ok "plan qwen3.5-35b-a3b" "$HOTSET" plan --preset qwen3.5-35b-a3b --profile a6000-48g-pcie3 --json && {
	expect_grep "qwen3.5 layers" '"gpu_layers": 40,'
	# K and V of the 10 attention layers only: 10 x 2 x 2 heads x 256 x 2 bytes x 8192
	expect_grep "qwen3.5 kv" '"kv_bytes_at_ctx": 167772160,'
}
expect_ok "profile list" "$HOTSET" plan --profile list
cp "$TMP/out" "$TMP/list"
for p in a6000-48g-pcie3 gpu8g-ram96g dual-ddr5-1gpu; do
	expect_grep "profile list $p" "^  $p +published: " "$TMP/list"
	expect_ok "plan $p" "$HOTSET" plan --preset gpt-oss-120b --profile "$p"
	expect_grep "plan $p" '^placement: [0-9]+ layers? resident on the GPU, [0-9]+ host layers?'
	expect_grep "plan $p labels" 'describes published figures, not measured here'
	expect_grep "plan $p units" 'GB/s = 1e9 B/s, MiB = 2\^20 B'
done

# the reference case (llama.cpp's split, 8 host layers), as text and as
# JSON; -o writes the same JSON.  Its VRAM as hotset's runtime allocates
# it (the MoE layers share their step buffers) fits this card's budget.
expect_ok "a6000" "$HOTSET" plan --preset gpt-oss-120b --profile a6000-48g-pcie3 --host-layers 8 -o "$TMP/plan.json"
expect_grep "a6000 host layers" '28 layers resident on the GPU, 8 host layers'
expect_grep "a6000 bytes" 'host expert bytes per token +404\.4[0-9] MiB \(8 host layers x 50\.56 MiB\)'
expect_grep "a6000 bound" 'host-read bound +(38\.9|39\.[0-9]|40\.[0-9]|41\.[0-9]) tok/s'
expect_grep "a6000 KV ring" "KV: 18 of 36 layers slide over 128 positions and keep a ring of 640 cells"
expect_grep "a6000 vram" 'VRAM 46\.96 GiB of 47\.49: '
expect_grep "a6000 vram parts" 'staging 0\.79, workspace 0\.10'
expect_grep "a6000 whole model" 'decode, empty context +33\.[0-9] tok/s \(MoE 27\.[0-9] ms \+ dense weights 1\.52 GiB at 768 GB/s'
expect_grep "a6000 whole model at ctx" 'decode at 8192 tokens +33\.[0-9] tok/s \(\+ K and V 0\.29 GiB'
grep -q '\[vram_over\]' "$TMP/out" && fail "a6000: llama.cpp's split said to be over the VRAM budget"
expect_ok "a6000 json" "$HOTSET" plan --preset gpt-oss-120b --profile a6000-48g-pcie3 --host-layers 8 --json
cmp -s "$TMP/out" "$TMP/plan.json" || fail "-o FILE differs from --json output"
for k in '"layers"' '"placement": "host"' '"placement": "gpu"' '"slots"' '"numa_nodes"' '"decode_tok_s"' \
	'"decode_host_bound_tok_s"' '"prefill_tok_s"' '"host_bytes_per_token": 424120320' '"vram_bytes"' \
	'"ram_bytes"' '"warnings"' '"code"' '"message"' '"whole_model"' '"decode_ctx_tok_s"'; do
	expect_grep "json $k" "$k" "$TMP/plan.json"
done
[ ! -e "$TMP/plan.json.part" ] || fail "-o left a .part file"

# forced like llama.cpp's --n-cpu-moe 12: over the RAM budget, said with numbers
expect_ok "12 host layers" "$HOTSET" plan --profile a6000-48g-pcie3 --host-layers 12
expect_grep "12 host layers" '\[ram_over\] host experts need 18\.96 GiB, the RAM budget is 13\.00 GiB'

# a dual-socket machine from hwloc XML, GPU 1 on node 1, CPU-only planning
expect_ok "dual socket" "$HOTSET" --topology "$HS_DATA/topologies/32em64t-2n8c2t-pci-wholeio.xml" \
	plan --preset gpt-oss-20b --gpu 1 --vram 6
expect_grep "dual socket node" 'host(\+cache)? +node 1 '
expect_grep "dual socket cpu" 'one per core of node 1'
# --topology with --profile of another machine: one line says so, the plan
# uses the topology's nodes (6 cores each) and GPUs and the profile's rates
T24="$HS_DATA/topologies/24em64t-2n6c2t-pci.xml"
expect_ok "topology + profile" "$HOTSET" --topology "$T24" plan --preset gpt-oss-120b --profile a6000-48g-pcie3
[ "$(grep -c . "$TMP/err")" -eq 1 ] || fail "topology + profile: not one line on stderr: $(cat "$TMP/err")"
expect_grep "topology + profile note" "^hotset plan: note: topology $T24 \(2 NUMA nodes, 12 cores, 3 GPUs\) and profile .*a6000-48g-pcie3\.json \(1 node, 1 GPU\) describe different machines" "$TMP/err"
expect_grep "topology + profile cores" '^CPU: 6 threads, one per core of node [01]$'
expect_grep "topology + profile nodes" 'node 1 [0-9.]+$'
expect_grep "topology + profile rates" 'figures used +host read 16\.5, .* GPU memory 768 GB/s'
expect_fail "topology without GPU memory" "$HOTSET" --topology "$HS_DATA/topologies/32em64t-2n8c2t-pci-wholeio.xml" \
	plan --gpu 1
expect_grep "GPU memory message" "^hotset plan: topology '[^']*32em64t-2n8c2t-pci-wholeio\.xml' does not say how much memory GPU 1 has; give --vram" "$TMP/err"
expect_ok "cpu only" "$HOTSET" plan --profile dual-ddr5-1gpu --gpu none --preset qwen3-30b-a3b
expect_grep "cpu only" '\[no_gpu\]'

# tune here, MXFP4 and one other type (about 6 s; 35 s under ASan), then
# plan on what it measured (the README's main command)
expect_fail "tune types" "$HOTSET" tune --quick -q --types q4_K,q9_K
expect_grep "tune types says" "^hotset tune: tune: type 'q9_K' is not one the CPU kernels are measured on" "$TMP/err"
[ -s "$TMP/out" ] && fail "tune measured before refusing a type"
expect_ok "tune" "$HOTSET" tune --quick -q --types q4_K
expect_grep "tune saved" "^saved: $HOME/.cache/hotset/profile.json"
expect_grep "tune read" 'read GB/s: from node 0 [0-9]+\.[0-9]'
expect_grep "tune kernel" 'CPU kernel \([^)]*\), mxfp4 +[0-9]+ threads?: +[0-9.]+ GB/s at 1 token'
expect_grep "tune q4_K" 'CPU kernel \([^)]*\), q4_K +[0-9]+ threads?: +[0-9.]+ GB/s at 1 token'
expect_grep "tune q4_K saved" '"type": "q4_K"' "$HOME/.cache/hotset/profile.json"
[ ! -e "$HOME/.cache/hotset/profile.json.part" ] || fail "tune left a .part file"
expect_ok "plan on measured" "$HOTSET" plan --preset gpt-oss-120b
expect_grep "plan on measured" "^profile: $HOME/.cache/hotset/profile.json \(measured\)"
# a Q4_K_M-like file (q4_K, down q6_K): q4_K at its own figure, q6_K at MXFP4's, said so
expect_ok "gen q4_K" "$HOTSET" gen -q --arch qwen3moe --layers 1 --experts 8 --used 2 --embd 256 --ff 256 \
	--type q4_K --down-type q6_K -o "$TMP/q4km.gguf"
expect_ok "plan q4_K" "$HOTSET" plan --gpu none --model "$TMP/q4km.gguf"
expect_grep "plan q4_K assumes q6_K" "CPU kernel on q6_K at MXFP4's speed"
grep -q "CPU kernel on q4_K" "$TMP/out" && fail "plan q4_K: q4_K assumed though measured"
expect_fail "wait without a GPU" "$HOTSET" plan --preset gpt-oss-20b --wait=1
expect_grep "wait message" '--wait needs a GPU of this machine' "$TMP/err"

# bad input: one line each, nothing written
expect_fail "kv" "$HOTSET" plan --kv q4
expect_fail "unknown profile" "$HOTSET" plan --profile no-such-card
expect_grep "unknown profile named" "no-such-card: no such file, and no shipped profile" "$TMP/err"
# uninstalled, with no HOTSET_PROFILES, the list says where it looked
# (where an install put profiles in the configured folder, it lists them)
if ! env HOTSET_PROFILES= "$HOTSET" plan --profile list >/dev/null 2>&1; then
	expect_fail "no profile folder" env HOTSET_PROFILES= "$HOTSET" plan --profile list
	expect_grep "no profile folder named" "no shipped profiles in .*HOTSET_PROFILES" "$TMP/err"
fi
expect_fail "vram" "$HOTSET" plan --vram lots
expect_fail "ctx" "$HOTSET" plan --ctx 0
expect_fail "preset" "$HOTSET" plan --preset gpt-oss-999b
expect_grep "preset message" 'known: gpt-oss-120b' "$TMP/err"
expect_fail "both" "$HOTSET" plan --preset gpt-oss-20b --model x.gguf
expect_fail "missing profile" "$HOTSET" plan --profile "$TMP/none.json"
echo '{"hotset_profile": 1, "machine": "m", "source": "measured", "nodes": [{"os_index": 0, "cores": 0, "memory_bytes": 1}]}' >"$TMP/bad.json"
expect_fail "bad profile" "$HOTSET" plan --profile "$TMP/bad.json"
expect_grep "bad profile message" 'nodes\[\]\.cores.* outside 1\.\.' "$TMP/err"
expect_fail "routing file" "$HOTSET" plan --profile a6000-48g-pcie3 --routing "$TMP/bad.json"
expect_fail "routing shape" "$HOTSET" plan --profile a6000-48g-pcie3 --routing "$HS_DATA/models/x-h256-n4.npy"
expect_grep "routing shape message" 'routing table is 4 x 256' "$TMP/err"
expect_fail "output folder" "$HOTSET" plan --profile a6000-48g-pcie3 -o "$TMP/no/such/dir/plan.json"
# over a file-size limit: the real cause (it once said "No such file or directory"), nothing left;
# a small plan, so that the failure shows when the buffered file is closed
expect_fail "file-size limit" sh -c 'ulimit -f 1; exec "$0" "$@"' "$HOTSET" plan --profile a6000-48g-pcie3 \
	--model "$HS_DATA/models/gptoss-tiny-h256-e32.gguf" -o "$TMP/big.json"
expect_grep "file-size limit says" 'big\.json: write failed: File too large' "$TMP/err"
[ ! -e "$TMP/big.json" ] && [ ! -e "$TMP/big.json.part" ] || fail "file-size limit: a file was left"
# tune checks where it writes before it measures, and makes no folders
expect_fail "tune folder" "$HOTSET" tune --quick -q -o "$TMP/no/such/p.json"
expect_grep "tune folder says" "^hotset tune: -o $TMP/no/such/p\.json: folder $TMP/no/such: No such file or directory \(folders are not created\)$" "$TMP/err"
[ ! -e "$TMP/no" ] || fail "tune made a folder"
[ -s "$TMP/out" ] && fail "tune measured before refusing"
expect_fail "tune into a file" "$HOTSET" tune --quick -q -o "$HS_DATA/models/README.md/p.json"
expect_grep "tune into a file says" 'README\.md is not a folder' "$TMP/err"
expect_fail "tune topology" "$HOTSET" --topology "$HS_DATA/topologies/nvidiaDGX2.xml" tune
expect_fail "usage: plan extra" "$HOTSET" plan extra
finish
