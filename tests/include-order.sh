# Checks the direction of #include lines (DESIGN.md §3): a folder includes
# itself and folders below it only, so an upward include fails make check.
# Levels: base < topology, cpu_kernels, gpu_kernels < model < planner, device, text
# < runtime < measure < tools, server.  Folders on one level do not include
# each other.  include/hotset.h and config.h may be included anywhere.
. "${top_srcdir:-.}/tests/lib.sh"
level() {
	case $1 in
	base) echo 0 ;;
	topology | cpu_kernels | gpu_kernels) echo 1 ;;
	model) echo 2 ;;
	planner | device | text) echo 3 ;;
	runtime) echo 4 ;;
	measure) echo 5 ;;
	tools | server) echo 6 ;;
	*) echo -1 ;;
	esac
}
cd "$top_srcdir" || exit 1
n=0
for f in $(find base topology cpu_kernels gpu_kernels model planner device text runtime measure tools server \
	\( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | sort); do
	own=${f%%/*}
	lo=$(level "$own")
	for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
		n=$((n + 1))
		case $inc in */*) ;; *) continue ;; esac # "config.h", "hotset.h"
		dir=${inc%%/*}
		[ "$dir" = "$own" ] && continue
		li=$(level "$dir")
		if [ "$li" -lt 0 ]; then
			fail "$f includes $inc: '$dir' is not a library folder"
		elif [ "$li" -ge "$lo" ]; then
			fail "$f ($own, level $lo) includes $inc ($dir, level $li): includes run downward only"
		fi
	done
done
[ $n -gt 50 ] || fail "only $n include lines found: is top_srcdir right?"
echo "$n include lines checked"
finish
