# Runs the kernel A/B tests (tests/test-kernels) on the AMX-INT8 tier alone:
# skipped (77), saying why, where this CPU, its OS or its kernel does not
# give this process the tile unit.
exec "${top_builddir:-.}/tests/test-kernels" amx
