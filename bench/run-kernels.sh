#!/bin/sh
# The CPU expert kernel benchmark with its raw output kept in bench/results/.
# usage: bench/run-kernels.sh BUILD_DIR [bench-kernels flags...]
exec "$(dirname "$0")/run-cpu.sh" kernels "$@"
