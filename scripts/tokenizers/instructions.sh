#!/bin/sh
# instructions.sh TEST_BINARY BENCHMARK [N]: the instructions one iteration
# of a text benchmark executes, counted by valgrind (cachegrind, no cache
# simulation) as the difference between runs of N and 5N iterations over 4N,
# so that loading and setting up cancel out; GOMAXPROCS=1 and GOGC=off keep
# idle threads and the collector out of the count. A figure that does not
# depend on what else runs on the machine.
#
#	go test -c -o /tmp/text.test ./text
#	cd text && ../scripts/tokenizers/instructions.sh /tmp/text.test 'BenchmarkSentencePieceSiglip$'
set -e
bin=$1
bench=$2
n=${3:-20000}
count() {
	GOMAXPROCS=1 GOGC=off valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
		"$bin" -test.run '^$' -test.bench "$bench" -test.benchtime "${1}x" 2>&1 |
		sed -n 's/.*I *refs: *//p' | tr -d ,
}
a=$(count "$n")
b=$(count $((5 * n)))
echo "$bench: $(((b - a) / (4 * n))) instructions per iteration"
