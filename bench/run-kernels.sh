#!/bin/sh
# Runs the CPU kernel benchmark and keeps its raw output, with the machine
# and the commit, in bench/results/kernels-DATE-COMMIT.{txt,json}.
# usage: bench/run-kernels.sh BUILD_DIR [bench-kernels flags...]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: run-kernels.sh BUILD_DIR [flags]}" && pwd)
shift
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$src" status --porcelain --untracked-files=no -- . ":!bench/results" 2>/dev/null | grep -q . && echo "+dirty" || true)
stamp=$(date -u +%Y%m%d-%H%M)
out="$src/bench/results/kernels-$stamp-$commit$dirty"
mkdir -p "$src/bench/results"
{
	echo "# hotset CPU kernel benchmark (measurements)"
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "commit: $commit$dirty"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) cores online)"
	echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	echo "kernel: $(uname -sr)"
	echo "OMP_PROC_BIND=${OMP_PROC_BIND:-true} OMP_PLACES=${OMP_PLACES:-cores}"
	echo "command: bench-kernels --json $*"
	echo
} >"$out.txt"
OMP_PROC_BIND=${OMP_PROC_BIND:-true} OMP_PLACES=${OMP_PLACES:-cores} \
	"$build/bench/bench-kernels" --json "$@" >"$out.json" 2>>"$out.txt"
cat "$out.txt"
echo "raw output: $out.txt, $out.json"
