# Runs the device contract tests on the CUDA backend: SKIP (77) when this
# build has no CUDA or the machine no CUDA device, with the reason.
: "${top_builddir:?run through make check}"
HS_TEST_DEVICE=cuda exec "$top_builddir/tests/test-device"
