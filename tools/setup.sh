#!/usr/bin/env bash
# The README's first command: install what is missing, build gopt (Release),
# then run the main job on the bundled default: GO (the shipped pre-trained
# checkpoint, zero-shot) optimizes Inception-v3's training step for 8 V100s,
# compared on the simulator against the classical baselines.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
echo
G=graphs/real/inception_v3.graphml.gz
P=profiles/v100-dgx1-x8.json
echo "== the graph: $G (exported from torchvision) =="
./build/gopt graph info "$G"
echo
echo "== GO zero-shot against the baselines, 8 x V100 (simulated step time) =="
./build/gopt compare "$G" --profile "$P" --methods single,expert,metis,heft,metf,msct,heft+cp+xla,go --samples 16
