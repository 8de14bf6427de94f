#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# tests/fuzz/libfuzzer.sh: run libFuzzer builds of the fuzz targets (make fuzz
# builds them into BUILD/bin), one after another, from the repository root.
#
#   tests/fuzz/libfuzzer.sh BUILD SECONDS NAME...     (NAME: http, addr, ...)
#
# Each target runs for SECONDS (-max_total_time; FUZZ_RUNS, when set, also
# caps the executions) with tests/fuzz/dict/NAME.dict and its corpus and
# regression folders as seeds. Inputs are at most FUZZ_MAX_LEN bytes (4096):
# libFuzzer would otherwise grow them to the largest seed (18 KiB for http),
# and a parse of every byte traced for coverage costs that much more; the
# small limits fuzz_http also parses under reach the 414 and 431 paths. What it finds goes under BUILD, never into the
# repository: new inputs to BUILD/corpus/NAME (kept for the next run), crash
# reproducers to BUILD/crashes/NAME/, the whole output to BUILD/log/NAME.log.
# Prints libFuzzer's final statistics per target; exits 1 if any crashed.
set -u

if [ $# -lt 3 ]; then
	echo "usage: $0 BUILD SECONDS NAME..." >&2
	exit 2
fi
build=$1
seconds=$2
shift 2
runs=${FUZZ_RUNS:--1}
max_len=${FUZZ_MAX_LEN:-4096}
failed=""

for name in "$@"; do
	bin=$build/bin/fuzz_$name
	corpus=$build/corpus/$name
	crashes=$build/crashes/$name
	log=$build/log/$name.log
	mkdir -p "$corpus" "$crashes" "$build/log"
	# libFuzzer stops at a missing folder; git keeps no empty ones.
	seeds=""
	for d in tests/fuzz/corpus/$name tests/fuzz/regressions/$name; do
		[ -d "$d" ] && seeds="$seeds $d"
	done
	echo "fuzz_$name: fuzzing for $seconds s (log: $log)"
	# shellcheck disable=SC2086
	"$bin" -max_total_time="$seconds" -runs="$runs" -max_len="$max_len" -timeout=10 -print_final_stats=1 \
		-dict="tests/fuzz/dict/$name.dict" -artifact_prefix="$crashes/" "$corpus" $seeds >"$log" 2>&1
	rc=$?
	grep '^stat::' "$log" | sed 's/^/    /'
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	if [ $rc -eq 0 ]; then
		echo "fuzz_$name: ${execs:-?} executions, no crash; corpus $corpus has $(ls "$corpus" | wc -l) inputs"
	else
		failed="$failed fuzz_$name"
		echo "fuzz_$name: FAILED (exit $rc) after ${execs:-?} executions; the end of $log:"
		tail -n 60 "$log" | sed 's/^/    /'
		ls "$crashes" | sed "s|^|    reproducer: $crashes/|"
	fi
done

if [ -n "$failed" ]; then
	echo "fuzz: crashed:$failed"
	exit 1
fi
echo "fuzz: no target crashed"
