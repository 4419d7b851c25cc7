# Checks `hotset topo` on real machines' exports (table and JSON), on this
# machine, and that bad topology files (cut short, missing, a folder, over
# the 16 MiB cap, an object hwloc would crash on) give one error line and a
# non-zero exit.
. "${top_srcdir:-.}/tests/lib.sh"
T=$HS_DATA/topologies

expect_ok "24em64t table" "$HOTSET" topo --topology "$T/24em64t-2n6c2t-pci.xml" &&
{
	expect_grep "24em64t" '^2 NUMA nodes, 12 cores, 24 CPUs'
	expect_grep "gpu 06" '^0000:06:00\.0 +10de:06d2 +0 +4\.00 GB/s'
	expect_grep "gpu 11" '^0000:11:00\.0 +10de:06d2 +1 +4\.00 GB/s'
	expect_grep "gpu 14" '^0000:14:00\.0 +10de:06d2 +1 +4\.00 GB/s'
	n=$(grep -Ec '^[0-9a-f]{4}:[0-9a-f]{2}:' "$TMP/out")
	[ "$n" -eq 3 ] || fail "24em64t: $n GPU rows, want 3"
	grep -q '1002:515e' "$TMP/out" && fail "24em64t: the ATI VGA device is listed"
}

# The global flag and the environment variable select the file too.
expect_ok "global --topology" "$HOTSET" --topology "$T/nvidiaDGX2.xml" topo &&
{
	n0=$(grep -Ec '^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f] +10de:1db8 +0 ' "$TMP/out")
	n1=$(grep -Ec '^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f] +10de:1db8 +1 ' "$TMP/out")
	[ "$n0" -eq 8 ] && [ "$n1" -eq 8 ] || fail "DGX-2: $n0 GPUs on node 0, $n1 on node 1, want 8 and 8"
	expect_grep "DGX-2 link" '15\.75 GB/s +gen3 x16'
}
HOTSET_TOPOLOGY="$T/32em64t-2n8c2t-pci-wholeio.xml" expect_ok "env topology json" "$HOTSET" topo --json &&
{
	expect_grep "json bus id" '"pci_bus_id": "0000:84:00\.0"'
	expect_grep "json cuda index" '"cuda_index": 0'
	expect_grep "json unknown link" '"link_gbps": null'
}

expect_ok "this machine" "$HOTSET" topo && expect_grep "this machine" '^topology: this machine'
expect_grep "cuda line" '^CUDA: '
expect_ok "this machine json" "$HOTSET" topo --json && expect_grep "json nodes" '"nodes": \['

# memory added to a VM while it runs: the nodes report less than the
# system has; node memory is scaled up to the system's (and -v says so), and
# left alone when the system says no more than the nodes (an empty meminfo:
# the nodes' own figures)
HOTSET_MEMINFO=/dev/null expect_ok "this machine json" "$HOTSET" topo --json
nodes=$(python3 -c 'import json,sys; print(sum(n["memory_bytes"] for n in json.load(open(sys.argv[1]))["nodes"]))' "$TMP/out" 2>/dev/null)
if [ -n "$nodes" ]; then
	printf 'MemTotal:       %d kB\nMemFree:        1 kB\n' $((nodes / 1024 * 4)) >"$TMP/meminfo-big"
	printf 'MemTotal:       %d kB\n' $((nodes / 1024 / 2)) >"$TMP/meminfo-small"
	HOTSET_MEMINFO="$TMP/meminfo-big" expect_ok "hot-added memory" "$HOTSET" -v topo --json &&
		python3 -c 'import json,sys; t=sum(n["memory_bytes"] for n in json.load(open(sys.argv[1]))["nodes"]); sys.exit(0 if abs(t - int(sys.argv[2]) * 4) < 4 * 1024 * len(json.load(open(sys.argv[1]))["nodes"]) + 4096 else 1)' "$TMP/out" "$nodes" ||
		fail "hot-added memory: the nodes do not add up to the system's memory"
	expect_grep "hot-added message" 'NUMA nodes report .* GiB of memory, the system .* GiB' "$TMP/err"
	HOTSET_MEMINFO="$TMP/meminfo-small" expect_ok "nodes above the system" "$HOTSET" topo --json &&
		python3 -c 'import json,sys; t=sum(n["memory_bytes"] for n in json.load(open(sys.argv[1]))["nodes"]); sys.exit(0 if t == int(sys.argv[2]) else 1)' "$TMP/out" "$nodes" ||
		fail "nodes above the system: node memory changed"
fi

printf '<?xml version="1.0"?>\n<topology><object type="Machine"' >"$TMP/cut.xml"
expect_fail "cut XML" "$HOTSET" topo --topology "$TMP/cut.xml" && expect_grep "cut message" 'cut\.xml' "$TMP/err"
expect_fail "missing XML" "$HOTSET" topo --topology "$TMP/nope.xml" && expect_grep "missing message" 'nope\.xml: No such file' "$TMP/err"
# a file over the 16 MiB cap is refused before hwloc parses it (a forged
# 166 MB export claiming a million nodes took hwloc minutes and 2 GB)
{ head -c 200 "$HS_DATA/topologies/24em64t-2n6c2t-pci.xml"; head -c 16777300 /dev/zero | tr '\0' ' '; } >"$TMP/big.xml"
expect_fail "XML over the cap" "$HOTSET" topo --topology "$TMP/big.xml" &&
	expect_grep "cap message" 'big\.xml: 16777500 bytes, more than the 16 MiB limit for an hwloc export' "$TMP/err"
rm -f "$TMP/big.xml"
# an object with a cpuset but no complete_cpuset crashed hwloc 2.9 (a null
# pointer): refused before hwloc sees it
sed '/<object type="PU"/{s/ complete_cpuset="[^"]*"//;:a;n;ba}' "$T/24em64t-2n6c2t-pci.xml" >"$TMP/nocomplete.xml"
expect_fail "PU without complete_cpuset" "$HOTSET" topo --topology "$TMP/nocomplete.xml" &&
	expect_grep "complete_cpuset message" 'nocomplete\.xml: the object at byte [0-9]+ has a cpuset but no complete_cpuset$' "$TMP/err"
expect_fail "XML folder" "$HOTSET" topo --topology "$TMP" && expect_grep "folder message" 'not a regular file' "$TMP/err"
expect_fail "usage: bad flag" "$HOTSET" topo --bogus
expect_fail "usage: extra argument" "$HOTSET" topo extra
finish
