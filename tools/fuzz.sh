#!/usr/bin/env bash
# tools/fuzz.sh [--seconds S] [--keep DIR] [HARNESS...]: build the libFuzzer harnesses of
# tests/fuzz (clang, -fsanitize=fuzzer,address,undefined,float-cast-overflow; build folder
# build-fuzz) and run each for S seconds (default 30) over a copy of its seed corpus
# tests/fuzz/corpus/<kind>/ (the tree is not modified). HARNESS names a kind (graphml,
# graphml_gz, profile, decisions, checkpoint, state, ...); default: every tests/fuzz/fuzz_*.c.
# One harness at a time, one process, under nice. Exit 1 when any harness reports a finding
# (crash, sanitizer report, abort, leak, timeout, out of memory); its reproducer and log are
# kept in the output folder (--keep DIR, default a temporary one, printed). Per harness it
# prints libFuzzer's last status line: executions, coverage (cov), features (ft), corpus. A single
# allocation over 1 GiB or a process over 2 GiB is a finding too (no input that size is a
# valid small file).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=30
keep=""
kinds=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) secs="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) kinds+=("$1"); shift ;;
  esac
done
if [ ${#kinds[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.c; do k=$(basename "$f" .c); kinds+=("${k#fuzz_}"); done
fi
CC=$(command -v clang || command -v clang-14 || true)
if [ -z "$CC" ] || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz.sh: clang or libFuzzer missing; installing (tools/install-deps.sh)"
  bash tools/install-deps.sh
  CC=$(command -v clang || command -v clang-14)
fi
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGOPT_FUZZ=ON \
  -DGOPT_CUDA=OFF -DGOPT_BENCH=OFF >/dev/null
targets=()
for k in "${kinds[@]}"; do targets+=("fuzz_$k"); done
nice cmake --build build-fuzz -j2 --target "${targets[@]}" >/dev/null
out="${keep:-$(mktemp -d /tmp/gopt-fuzz-XXXXXX)}"
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1
status=0
for k in "${kinds[@]}"; do
  work="$out/$k"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  if [ -d "tests/fuzz/corpus/$k" ]; then cp -r "tests/fuzz/corpus/$k/." "$work/corpus/"; fi
  set +e
  nice "build-fuzz/tests/fuzz/fuzz_$k" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1
  rc=$?
  set -e
  last=$(grep -E '^#[0-9]+' "$work/log" | tail -1 || true)
  execs=$(grep -E '^stat::number_of_executed_units' "$work/log" | awk '{print $2}' || true)
  files=$(find "$work/corpus" -type f | wc -l)
  if [ $rc -ne 0 ] || [ -n "$(ls -A "$work/artifacts")" ]; then
    echo "fuzz $k: FINDING (exit $rc); log $work/log, reproducer(s):"
    ls "$work/artifacts" | sed "s|^|  $work/artifacts/|"
    grep -m3 -E 'ERROR|runtime error|fuzz finding' "$work/log" | sed 's/^/  | /' || true
    status=1
  else
    echo "fuzz $k: ok, ${secs}s, ${execs:-?} executions, corpus $files files; last: ${last:-?}"
  fi
done
[ -z "$keep" ] && [ $status -eq 0 ] && rm -rf "$out"
[ $status -eq 0 ] || echo "fuzz.sh: findings kept in $out"
exit $status
