#!/bin/sh
# table.sh prints the report table of issue 22: the question workload
# through the minimum floor, Interlock driven with raw CloudEvents and
# Interlock driven through its Go client package (--systems minimum,raw,go),
# with fsync before ack and lazy, at concurrency 1 and 32; for each cell the
# medians over ROUNDS invocations, the cells taken in turn in each round so
# that the invocations of one cell alternate with the others'. Every
# invocation waits for the lock LOCK, which every benchmark on the machine
# takes, so that no two run at once.
#
#	sh bench/table.sh                      # 3 rounds of 2000 runs per system
#	ROUNDS=5 RUNS=1000 sh bench/table.sh
#
# Run it from the module's root; it needs go, flock and jq. The JSON of every
# invocation is kept in OUT (a new temporary directory unless set).
set -eu

ROUNDS=${ROUNDS:-3}
RUNS=${RUNS:-2000}
LOCK=${LOCK:-/tmp/bench.lock}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/bench-table.XXXXXX")}
SYSTEMS=minimum,raw,go

for tool in go flock jq; do
	command -v "$tool" >/dev/null || {
		echo "table.sh: $tool is not on PATH; install it and run again" >&2
		exit 2
	}
done
[ -f bench/main.go ] || {
	echo "table.sh: run it from the root of the interlock module (bench/main.go not found)" >&2
	exit 2
}
[ "$ROUNDS" -ge 3 ] || {
	echo "table.sh: ROUNDS is $ROUNDS; medians need at least 3" >&2
	exit 2
}

mkdir -p "$OUT"
go build -o "$OUT/bench" ./bench
echo "table.sh: $ROUNDS rounds of --runs $RUNS, JSON in $OUT" >&2

round=1
while [ "$round" -le "$ROUNDS" ]; do
	for fsync in always lazy; do
		for c in 1 32; do
			f="$OUT/$fsync-c$c-$round.json"
			echo "table.sh: round $round of $ROUNDS: fsync $fsync, concurrency $c" >&2
			flock "$LOCK" "$OUT/bench" --systems "$SYSTEMS" --workload question \
				--runs "$RUNS" --concurrency "$c" --fsync "$fsync" --json >"$f"
		done
	done
	round=$((round + 1))
done

echo "| fsync | concurrency | system | runs/s | runs/s ratio | start->interrupted p50 / p99 ms | p99 ratio | resume->completed p50 / p99 ms | CPU ms/run (+ server) |"
echo "|---|---|---|---|---|---|---|---|---|"
for fsync in always lazy; do
	for c in 1 32; do
		# Medians of each figure, and of each invocation's ratio to the
		# minimum floor measured in the same invocation.
		jq -rs --arg fsync "$fsync" --arg c "$c" '
			def median: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
			def r(n): . * n | round / n;
			[.[].modes[0].systems] | transpose | .[] |
			"| \($fsync) | \($c) | \(.[0].label) | \([.[].result.runsPerSec] | median | round)" +
			" | \(if .[0].ratio then "\([.[].ratio.runsPerSec] | median | r(100))x" else "" end)" +
			" | \([.[].result.startToInterrupted.p50ms] | median | r(100)) / \([.[].result.startToInterrupted.p99ms] | median | r(100))" +
			" | \(if .[0].ratio then "\([.[].ratio.p99StartToInterrupted] | median | r(100))x" else "" end)" +
			" | \([.[].result.resumeToCompleted.p50ms] | median | r(100)) / \([.[].result.resumeToCompleted.p99ms] | median | r(100))" +
			" | \([.[].result.cpuMsPerRun] | median | r(100)) (+ \([.[].result.serverCPUMsPerRun // 0] | median | r(100))) |"
		' "$OUT/$fsync-c$c-"*.json
	done
done
