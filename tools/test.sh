#!/usr/bin/env bash
# The README's second command: install what is missing, build with warnings
# as errors, run every test. `--sanitize` builds and tests under ASan+UBSan
# in a separate build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
dir=build-test
opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DGOPT_WERROR=ON)
if [ "${1:-}" = "--sanitize" ]; then
  dir=build-san
  opts=(-DCMAKE_BUILD_TYPE=Debug -DGOPT_WERROR=ON -DGOPT_ASAN=ON -DGOPT_UBSAN=ON -DGOPT_BENCH=OFF)
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
fi
cmake -S . -B "$dir" "${opts[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)"
cd "$dir" && ctest --output-on-failure -j"$(nproc)"
