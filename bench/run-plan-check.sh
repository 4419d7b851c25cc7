#!/bin/sh
# Sets `hotset plan`'s whole-model prediction beside a measurement in the
# same run: measures this machine (`hotset tune`), plans each model without a
# GPU from that profile, then runs `hotset bench --e2e` on the CPU on the
# same files; and what the same profile with its MXFP4 figures alone (as
# profiles were before they had a figure per expert type) predicts.  Raw
# output with the machine and the commit goes to
# bench/results/plan-check-DATE-COMMIT.txt.
# usage: bench/run-plan-check.sh BUILD_DIR [MODEL.gguf ...]
#   (default: the two generated e2e models, vocabulary 1024 and 201088)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: run-plan-check.sh BUILD_DIR [MODEL.gguf ...]}" && pwd)
shift
. "$src/bench/results.sh"
results_open plan-check "hotset plan's whole-model prediction (from hotset tune) beside hotset bench --e2e (measured)" \
	"hotset tune; hotset plan --gpu none --profile P --model M; hotset bench --e2e --devices cpu --model M"
if [ $# -eq 0 ]; then
	for v in 1024 201088; do
		m=$("$build/hotset" bench --e2e --devices cpu --vocab "$v" --reps 1 --pp 8 --tg 2 -q |
			sed -n 's/^model: \([^ ]*\) .*/\1/p')
		set -- "$@" "$m"
	done
fi
prof="$out.profile.json"
{
	echo
	echo "## hotset tune"
	"$build/hotset" tune -o "$prof" 2>&1
} >>"$out.txt"
# the same profile with the MXFP4 figures only: what a plan priced every
# type with before profiles had a figure per type
prof1="$out.mxfp4-only.json"
python3 -c 'import json,sys
p=json.load(open(sys.argv[1]))
for n in p["nodes"]: n["kernel"]=[k for k in n["kernel"] if k.get("type","mxfp4")=="mxfp4"]
json.dump(p,open(sys.argv[2],"w"),indent=1)' "$prof" "$prof1"
predict() { # profile model -> "decode prefill" of the whole model
	"$build/hotset" plan --gpu none --profile "$1" --model "$2" --json |
		python3 -c 'import json,sys; w=json.load(sys.stdin)["predicted"]["whole_model"]; print("%.1f %.0f" % (w["decode_tok_s"], w["prefill_tok_s"]))'
}
summary=""
# the read bandwidth the profile holds (its first node's own memory), to
# set beside the one the bench measures minutes later: a VM's moves by a
# quarter from minute to minute
tread=$(python3 -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))["nodes"][0]["read_gbps"][0]["gbps"])' "$prof")
for m in "$@"; do
	{
		echo
		echo "## plan (prediction): $m"
		"$build/hotset" plan --gpu none --profile "$prof" --model "$m" 2>&1
		echo
		echo "## bench --e2e (measurement): $m"
	} >>"$out.txt"
	"$build/hotset" bench --e2e --devices cpu -q --model "$m" >"$out.round" 2>&1
	cat "$out.round" >>"$out.txt"
	pd=$(predict "$prof" "$m")
	p1=$(predict "$prof1" "$m")
	mtg=$(awk '$1 == "cpu" {print $5}' "$out.round")
	mpp=$(awk '$1 == "cpu" {print $3}' "$out.round")
	bread=$(sed -n 's/^read bandwidth of this machine (measured now, .*): \([0-9.]*\) GB\/s/\1/p' "$out.round")
	ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
	summary="$summary$(basename "$m"): tg predicted ${pd% *} measured $mtg, ratio $(ratio "$mtg" "${pd% *}"); pp512 predicted ${pd#* } measured $mpp, ratio $(ratio "$mpp" "${pd#* }")
  with the MXFP4 figures alone: tg predicted ${p1% *}, ratio $(ratio "$mtg" "${p1% *}"); pp512 predicted ${p1#* }, ratio $(ratio "$mpp" "${p1#* }")
  read bandwidth: $tread GB/s in the tune, $bread beside the bench; the tg ratio with the prediction scaled by the two (decode is read-bound; what is left is the plan's own error): $(awk -v a="$mtg" -v b="${pd% *}" -v t="$tread" -v r="$bread" 'BEGIN { printf "%.2f", a / (b * r / t) }')
"
done
rm -f "$out.round" # the profiles stay beside the raw output
{
	echo
	echo "## summary (measured / predicted, same run)"
	printf "%s" "$summary"
} >>"$out.txt"
printf "%s" "$summary"
echo "raw output: $out.txt"
