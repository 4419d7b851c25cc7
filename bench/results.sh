# Sourced by the bench/run-*.sh scripts: where raw output goes and the
# header that says which machine and commit it came from.
# results_open KIND TITLE COMMAND: sets $out (bench/results/KIND-DATE-COMMIT,
# no extension) and writes the header to $out.txt.
results_open() {
	commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
	dirty=$(git -C "$src" status --porcelain --untracked-files=no -- . ":!bench/results" 2>/dev/null | grep -q . && echo "+dirty" || true)
	out="$src/bench/results/$1-$(date -u +%Y%m%d-%H%M)-$commit$dirty"
	mkdir -p "$src/bench/results"
	{
		echo "# $2"
		echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "commit: $commit$dirty"
		echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) cores online)"
		echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
		echo "kernel: $(uname -sr)"
		echo "command: $3"
	} >"$out.txt"
}
