#!/bin/sh
# GPU check: runs hotset's device tests and benchmarks on a machine with an
# NVIDIA GPU from programs built elsewhere: nothing is configured or
# compiled here (a bare machine has no autotools and no -dev packages).
# bench/gpu-bundle.sh copies this script into the bundle as run.sh, beside
# bin/ (the stripped programs), lib/ (the shared libraries a bare image
# lacks) and data/ (the small test files).
#
# Every step runs under its own `timeout`; all output goes to $OUT (or
# ./gpu-check-out), at most 8 files: env.txt (machine, driver, cuBLAS),
# tests.log, sanitizer.log, bench.log, hotset-bench.log, summary.txt.
# Steps (planned to finish within HS_GPU_BUDGET seconds, default 400, on
# an H200): the device contract tests, `run-layer --device cuda` against
# the reference outputs, the dense ops and the logits tests on the device,
# each with cuBLAS and without (HOTSET_CUBLAS=0: the tile kernels),
# `hotset tune --quick`, bench-device (kernel GB/s against the device's
# copy bandwidth, matrix products with and without cuBLAS), `hotset bench`
# (cpu / stream / hybrid / auto, batch 1 and 32, slots 0, E/4, E/2),
# `hotset bench --e2e --devices cpu,cuda`, then compute-sanitizer memcheck
# and racecheck on the contract tests.  A summary table comes last.
#
# usage: run.sh [--self-test]                 (inside a bundle)
#        bench/gpu-check.sh [--self-test] --build DIR   (a build tree here)
# --self-test runs the CPU-side steps only (the programs are there and their
# libraries resolve, the build says what it has, the no-driver path works,
# cuBLAS is looked for); without it and without a GPU the
# script stops after env.txt with "no GPU: <why>" and exit status 3.
# Exit status: 0 all steps passed, 1 a step failed, 2 usage, 3 no GPU.
set -u
self_test=0
build=
while [ $# -gt 0 ]; do
	case "$1" in
	--self-test) self_test=1 ;;
	--build) [ $# -ge 2 ] || { echo "gpu-check: --build needs a directory" >&2; exit 2; }; build=$2; shift ;;
	-h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "gpu-check: unknown argument '$1' (--self-test, --build DIR)" >&2; exit 2 ;;
	esac
	shift
done

here=$(cd "$(dirname "$0")" && pwd)
if [ -n "$build" ]; then # a build tree: programs where make puts them
	build=$(cd "$build" 2>/dev/null && pwd) || { echo "gpu-check: no build directory '$build'" >&2; exit 2; }
	src=$(cd "$here/.." && pwd)
	HOTSET=$build/hotset T=$build/tests B=$build/bench DATA=${HS_DATA:-$src/tests/data}
else # a bundle
	HOTSET=$here/bin/hotset T=$here/bin B=$here/bin DATA=${HS_DATA:-$here/data}
	[ -d "$here/lib" ] && LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} && export LD_LIBRARY_PATH
fi
[ -x "$HOTSET" ] || { echo "gpu-check: no hotset program at $HOTSET (build it, or run bench/gpu-bundle.sh)" >&2; exit 2; }
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT" || exit 2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hs-gpu-check.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
export XDG_CACHE_HOME=$TMP/cache HS_DATA=$DATA
budget=${HS_GPU_BUDGET:-400}
start=$(date +%s)
: >"$TMP/rows"
failed=0

# step LOG NAME SECONDS COMMAND...: COMMAND under `timeout`, output tee'd to
# $OUT/LOG, a row in the summary; no step starts past the budget, and none
# runs longer than what is left of it.  Exit status 77 is a skip.
step() {
	log=$1 name=$2 limit=$3
	shift 3
	now=$(date +%s)
	left=$((budget - (now - start)))
	if [ "$left" -lt 5 ]; then
		row "$name" "NOT RUN" "-"
		echo "== $name: not run, the budget of ${budget}s is spent" | tee -a "$OUT/$log"
		failed=1
		return 1
	fi
	[ "$limit" -gt "$left" ] && limit=$left
	echo "== $name (limit ${limit}s)" | tee -a "$OUT/$log"
	echo "\$ $*" >>"$OUT/$log"
	timeout -k 10 "$limit" "$@" >"$TMP/step.out" 2>&1
	rc=$?
	tee -a "$OUT/$log" <"$TMP/step.out" | tail -n 40
	t=$(($(date +%s) - now))
	case $rc in
	0) what=ok ;;
	77) what=SKIP ;;
	124 | 137) what=TIMEOUT; failed=1 ;;
	*) what="FAIL($rc)"; failed=1 ;;
	esac
	echo "-> $what in ${t}s" | tee -a "$OUT/$log"
	row "$name" "$what" "${t}s"
	return $rc
}

row() { printf '%-44s %-8s %6s\n' "$1" "$2" "$3" >>"$TMP/rows"; }

# the table, last on stdout and in summary.txt
summary() {
	{
		echo
		echo "== summary ($(($(date +%s) - start))s of a ${budget}s budget; logs in $OUT)"
		grep -m1 '^name' "$OUT/env.txt" -A1 2>/dev/null | tail -n 1 | sed 's/^/gpu: /'
		echo "cuBLAS: ${HOTSET_CUBLAS:-none}"
		printf '%-44s %-8s %6s\n' "step" "result" "time"
		cat "$TMP/rows"
		[ "$1" = ok ] && echo "gpu-check: all steps passed" || echo "gpu-check: $1"
	} | tee "$OUT/summary.txt"
}

# ---- the machine, the driver, cuBLAS ----------------------------------------
{
	echo "# hotset GPU check (measurements), $(date -u '+%Y-%m-%d %H:%M UTC')"
	[ -f "$here/MANIFEST" ] && sed 's/^/bundle: /' "$here/MANIFEST"
	echo "host: $(uname -srm); cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) cores)"
	if command -v nvidia-smi >/dev/null 2>&1; then
		nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version,pcie.link.gen.max,pcie.link.width.max \
			--format=csv 2>&1
		nvidia-smi 2>&1 | head -n 20
	else
		echo "nvidia-smi: not found"
	fi
	[ -r /proc/driver/nvidia/version ] && sed 's/^/driver: /' /proc/driver/nvidia/version
} >"$OUT/env.txt" 2>&1

# cuBLAS: HOTSET_CUBLAS when set, else the loader's cache, the toolkit,
# then a Python package's nvidia/cu13/lib (where a PyTorch image keeps it);
# named to hotset with HOTSET_CUBLAS so that its search is not the only one
if [ -z "${HOTSET_CUBLAS-}" ]; then
	for f in $(ldconfig -p 2>/dev/null | sed -n 's/.*libcublas\.so\.13 .*=> //p') \
		/usr/local/cuda/lib64/libcublas.so.13 /usr/local/cuda-13*/lib64/libcublas.so.13 \
		/opt/*/.venv/lib/python3*/site-packages/nvidia/cu13/lib/libcublas.so.13 \
		/usr/local/lib/python3*/dist-packages/nvidia/cu13/lib/libcublas.so.13 \
		/usr/lib/python3*/dist-packages/nvidia/cu13/lib/libcublas.so.13; do
		[ -e "$f" ] && { HOTSET_CUBLAS=$f; break; }
	done
	if [ -z "${HOTSET_CUBLAS-}" ] && command -v python3 >/dev/null 2>&1; then
		f=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib", "libcublas.so.13"))' 2>/dev/null)
		[ -n "$f" ] && [ -e "$f" ] && HOTSET_CUBLAS=$f
	fi
fi
[ -n "${HOTSET_CUBLAS-}" ] && export HOTSET_CUBLAS
echo "cuBLAS located: ${HOTSET_CUBLAS:-none (the tile kernels take every product)}" >>"$OUT/env.txt"
"$HOTSET" --version >>"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# ---- CPU side: the programs start and say what they were built with ---------
step tests.log "hotset --version" 20 "$HOTSET" --version
for p in "$T/test-device" "$T/test-device-dense" "$T/test-logits" "$T/test-cuda-nodriver" "$T/npy-cmp" \
	"$B/bench-device"; do
	[ -x "$p" ] || { echo "gpu-check: missing program $p" | tee -a "$OUT/tests.log"; failed=1; }
done
if [ $self_test = 1 ]; then
	step tests.log "test-cuda-nodriver (no GPU or driver)" 60 "$T/test-cuda-nodriver"
	step tests.log "shared libraries of the programs resolve" 30 sh -c \
		'for p; do ldd "$p" | grep "not found" && exit 1; done; exit 0' sh "$HOTSET" "$T/test-device" \
		"$T/test-device-dense" "$T/test-logits" "$B/bench-device"
	[ $failed = 0 ] && summary ok || summary "some steps FAILED (logs in $OUT)"
	exit $failed
fi

# ---- no GPU: say so and stop ---------------------------------------------------
why=
if grep -q "CUDA: not built" "$OUT/env.txt"; then
	why="this build has no CUDA (configure --with-cuda, or use bench/gpu-bundle.sh)"
elif ! "$HOTSET" --version 2>&1 | grep -q '^[1-9][0-9]* CUDA device'; then
	why=$("$HOTSET" --version 2>&1 | grep -i 'cuda device' | head -n 1)
	why=${why:-no CUDA device answered}
fi
if [ -n "$why" ]; then
	echo "no GPU: $why" | tee -a "$OUT/env.txt"
	row "GPU steps" "NO GPU" "-"
	summary "no GPU: $why"
	exit 3
fi

# ---- the device's tests ----------------------------------------------------------
M=$DATA/models
step tests.log "test-device (contract, cuda)" 90 env HS_TEST_DEVICE=cuda "$T/test-device"
for L in 0 1; do
	step tests.log "run-layer --device cuda, layer $L" 30 sh -c '"$1" run-layer --model "$2/gptoss-tiny-h256-e32.gguf" \
		--layer "$3" --input "$2/x-h256-n4.npy" --output "$4/y$3.npy" --device cuda &&
		"$5" "$4/y$3.npy" "$2/y-h256-n4-layer$3.npy" 5e-2' sh "$HOTSET" "$M" "$L" "$TMP" "$T/npy-cmp"
done
for blas in 1 0; do
	[ $blas = 1 ] && with="cuBLAS" || with="HOTSET_CUBLAS=0"
	cb=${HOTSET_CUBLAS:-1}
	[ $blas = 0 ] && cb=0
	step tests.log "test-device-dense (cuda, $with)" 60 env HOTSET_CUBLAS="$cb" HS_TEST_DEVICE=cuda "$T/test-device-dense"
	if [ -d "$DATA/oracle" ]; then
		step tests.log "test-logits (cuda, $with)" 90 env HOTSET_CUBLAS="$cb" HS_TEST_DEVICE=cuda "$T/test-logits"
	else
		echo "test-logits: SKIP, no $DATA/oracle (run from a checkout, or HS_DATA=.../tests/data)" | tee -a "$OUT/tests.log"
		row "test-logits (cuda, $with)" "SKIP" "-"
	fi
done

# ---- measurements ---------------------------------------------------------------
step bench.log "hotset tune --quick" 60 "$HOTSET" tune --quick -o "$TMP/profile.json"
step bench.log "bench-device cuda (cuBLAS)" 60 "$B/bench-device" cuda 32
step bench.log "bench-device cuda (HOTSET_CUBLAS=0)" 60 env HOTSET_CUBLAS=0 "$B/bench-device" cuda 32
step hotset-bench.log "hotset bench (modes x batch 1,32 x slots)" 120 "$HOTSET" bench --device cuda -q
step hotset-bench.log "hotset bench --e2e --devices cpu,cuda" 120 "$HOTSET" bench --e2e --devices cpu,cuda -q

# ---- compute-sanitizer on the contract tests (last: slow, and the budget may
# run out before them rather than before the measurements) --------------------
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
if [ -n "$CS" ]; then
	step sanitizer.log "compute-sanitizer memcheck test-device" 120 env HS_TEST_DEVICE=cuda \
		"$CS" --tool memcheck --error-exitcode 9 "$T/test-device"
	step sanitizer.log "compute-sanitizer racecheck test-device" 120 env HS_TEST_DEVICE=cuda \
		"$CS" --tool racecheck --error-exitcode 9 "$T/test-device"
else
	echo "compute-sanitizer: not found" | tee -a "$OUT/sanitizer.log"
	row "compute-sanitizer" "SKIP" "-"
fi

[ $failed = 0 ] && summary ok || summary "some steps FAILED (logs in $OUT)"
exit $failed
