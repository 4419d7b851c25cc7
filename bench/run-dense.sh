#!/bin/sh
# The dense CPU ops benchmark with its raw output kept in bench/results/.
# usage: bench/run-dense.sh BUILD_DIR [bench-dense flags...]
exec "$(dirname "$0")/run-cpu.sh" dense "$@"
