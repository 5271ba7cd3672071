#!/usr/bin/env bash
# The README's first command: install what is missing, build gopt (Release),
# then run the main job on the bundled default graph.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
echo
echo "== gopt on the bundled graph (graphs/examples/mlp_train.graphml) =="
./build/gopt graph info graphs/examples/mlp_train.graphml
