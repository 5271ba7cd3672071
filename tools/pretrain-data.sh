#!/usr/bin/env bash
# pretrain-data.sh: build GO's pre-training corpus in one command (docs/zoo.md,
# "Pre-training corpus").
#
#   tools/pretrain-data.sh OUT_DIR [--synthetic N] [--synthetic-nodes N] [--synthetic-kind K] [--seed S]
#                          [--tables N] [--gopt PATH] [--torch-variants]
#
# OUT_DIR receives, flat (gopt train --graphs OUT_DIR reads *.graphml.gz):
#   synth_NNNNN.graphml.gz   N synthetic training steps (default 1,900; gopt graph gen
#                            synthetic --seed S: layered, cells, chain, grid kinds, 200-20k nodes,
#                            median 2k; --synthetic-nodes N: about N nodes each, e.g. fewer
#                            nodes in all for a shorter run;
#                            --synthetic-kind all: drawn from all seven kinds, transformer, recsys
#                            and unet too; default any, the four kinds above, as the 2026-11-21
#                            checkpoint's corpus; or one kind)
#   tables_NNNNN.graphml.gz  with --tables N: N recommenders dominated by a few very large
#                            embedding tables (gopt graph gen synthetic --kind tables, seed S + 10,
#                            200-2k nodes, median 400)
#   zoo_*.graphml.gz         the zoo families at many sizes and batches (132 graphs:
#                            rnnlm, gnmt, transformer_xl, amoebanet, wavenet, resnet; not
#                            inception_v3, whose PyTorch export is in the validation split)
#   real_*.graphml.gz        every model of the training split of graphs/real/splits.tsv
#   real_*_bB.graphml.gz     with --torch-variants: those models re-exported at half and
#                            twice their batch (needs /usr/bin/python3 with torch)
#   manifest.tsv             file, source (synthetic|zoo|real), family, settings, profile, devices:
#                            gopt train --manifest OUT_DIR/manifest.tsv reads it; profile and
#                            devices are left empty (drawn by gopt train from --profiles and
#                            --devices-range); fill them to pin a graph's cluster
# Nothing of the validation, test, holdout or holdout2 splits is written; the script checks it at the end.
# Re-running skips what exists (every file is written atomically), so a killed
# run continues where it stopped. Prints progress and the wall time.
set -euo pipefail

SRC="$(cd "$(dirname "$0")/.." && pwd)"
OUT="" NSYN=1900 SNODES=0 SKIND=any SEED=1 GOPT="" VARIANTS=0 NTAB=0
usage() { sed -n '5,6p' "$0" | sed 's/^# *//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --synthetic) NSYN="${2:?--synthetic needs a count}"; shift 2 ;;
    --synthetic-nodes) SNODES="${2:?--synthetic-nodes needs a count}"; shift 2 ;;
    --synthetic-kind) SKIND="${2:?--synthetic-kind needs a kind}"; shift 2 ;;
    --seed) SEED="${2:?--seed needs a value}"; shift 2 ;;
    --tables) NTAB="${2:?--tables needs a count}"; shift 2 ;;
    --gopt) GOPT="${2:?--gopt needs a path}"; shift 2 ;;
    --torch-variants) VARIANTS=1; shift ;;
    -h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "pretrain-data.sh: unknown option '$1'" >&2; usage ;;
    *) [ -z "$OUT" ] || { echo "pretrain-data.sh: one OUT_DIR only ('$OUT', '$1')" >&2; usage; }; OUT="$1"; shift ;;
  esac
done
[ -n "$OUT" ] || { echo "pretrain-data.sh: missing OUT_DIR" >&2; usage; }
case "$NSYN" in ''|*[!0-9]*) echo "pretrain-data.sh: --synthetic '$NSYN' is not a count" >&2; exit 2 ;; esac
case "$NTAB" in ''|*[!0-9]*) echo "pretrain-data.sh: --tables '$NTAB' is not a count" >&2; exit 2 ;; esac
case "$SNODES" in ''|*[!0-9]*) echo "pretrain-data.sh: --synthetic-nodes '$SNODES' is not a count" >&2; exit 2 ;; esac
case "$SKIND" in any|all|layered|cells|chain|grid|transformer|recsys|unet) ;;
  *) echo "pretrain-data.sh: --synthetic-kind '$SKIND' is not one of any, all, layered, cells, chain, grid, transformer, recsys, unet" >&2; exit 2 ;; esac
case "$SEED" in ''|*[!0-9]*) echo "pretrain-data.sh: --seed '$SEED' is not a number" >&2; exit 2 ;; esac
if [ -z "$GOPT" ]; then
  for g in "$SRC/build/gopt" "$(command -v gopt || true)"; do [ -x "$g" ] && { GOPT="$g"; break; }; done
fi
[ -n "$GOPT" ] && [ -x "$GOPT" ] || { echo "pretrain-data.sh: no gopt binary (build it, or --gopt PATH)" >&2; exit 2; }
SPLITS="$SRC/graphs/real/splits.tsv"
[ -r "$SPLITS" ] || { echo "pretrain-data.sh: cannot read $SPLITS" >&2; exit 2; }
mkdir -p "$OUT"
T0=$(date +%s)
MAN="$OUT/manifest.tsv.tmp"
printf 'file\tsource\tfamily\tsettings\tprofile\tdevices\n' > "$MAN"
say() { echo "pretrain-data.sh: $* ($(( $(date +%s) - T0 )) s)" >&2; }

# 1. synthetic graphs: regenerated unless all N are there with the same settings (gopt
# writes each atomically; .synthetic-settings records count, seed and size)
stamp="$NSYN seed $SEED nodes $SNODES"
[ "$SKIND" = any ] || stamp="$stamp kind $SKIND" # (any: the stamp of corpora made before --synthetic-kind)
have=$(find "$OUT" -maxdepth 1 -name 'synth_*.graphml.gz' | wc -l)
if [ "$NSYN" -gt 0 ] && { [ "$have" -ne "$NSYN" ] || [ "$(cat "$OUT/.synthetic-settings" 2>/dev/null)" != "$stamp" ]; }; then
  find "$OUT" -maxdepth 1 -name 'synth_*.graphml.gz' -delete
  say "generating $NSYN synthetic graphs (seed $SEED)"
  sizes=()
  note=""
  if [ "$SNODES" -gt 0 ]; then sizes=(--nodes "$SNODES"); note=", nodes $SNODES"; fi
  "$GOPT" graph gen synthetic --count "$NSYN" --seed "$SEED" --kind "$SKIND" "${sizes[@]}" -o "$OUT" >&2
  echo "$stamp" > "$OUT/.synthetic-settings"
fi
note=""
[ "$SNODES" -eq 0 ] || note=", nodes $SNODES"
[ "$SKIND" = any ] || note="$note, kind $SKIND"
for ((i = 0; i < NSYN; i++)); do
  printf 'synth_%05d.graphml.gz\tsynthetic\tsynthetic\tseed %s%s\t\t\n' "$i" "$SEED" "$note"
done >> "$MAN"
say "synthetic: $NSYN graphs"

# 1b. recommenders of a few very large tables (the same regeneration rule)
tstamp="$NTAB seed $((SEED + 10)) kind tables"
have=$(find "$OUT" -maxdepth 1 -name 'tables_*.graphml.gz' | wc -l)
if [ "$NTAB" -gt 0 ] && { [ "$have" -ne "$NTAB" ] || [ "$(cat "$OUT/.tables-settings" 2>/dev/null)" != "$tstamp" ]; }; then
  find "$OUT" -maxdepth 1 -name 'tables_*.graphml.gz' -delete
  say "generating $NTAB tables graphs (seed $((SEED + 10)))"
  "$GOPT" graph gen synthetic --count "$NTAB" --seed $((SEED + 10)) --kind tables --prefix tables -o "$OUT" >&2
  echo "$tstamp" > "$OUT/.tables-settings"
fi
for ((i = 0; i < NTAB; i++)); do
  printf 'tables_%05d.graphml.gz\tsynthetic\tsynthetic\tseed %s, kind tables\t\t\n' "$i" "$((SEED + 10))"
done >> "$MAN"
[ "$NTAB" -eq 0 ] || say "tables: $NTAB graphs"

# 2. zoo families at many sizes (each setting 200-20k nodes)
zoo() { # name family args...
  local name="$1" fam="$2"; shift 2
  [ -e "$OUT/zoo_$name.graphml.gz" ] || "$GOPT" graph gen "$fam" "$@" -o "$OUT/zoo_$name.graphml.gz" >/dev/null
  printf 'zoo_%s.graphml.gz\tzoo\t%s\t%s\t\t\n' "$name" "$fam" "$*" >> "$MAN"
}
nzoo=0
for l in 1 2 3 4; do for s in 10 20 35; do for b in 16 64; do
  zoo "rnnlm_l${l}_s${s}_b${b}" rnnlm --layers $l --seq $s --batch $b; nzoo=$((nzoo + 1)); done; done; done
for l in 1 2 3 4; do for s in 4 8 12 16; do for b in 64 128; do
  zoo "gnmt_l${l}_s${s}_b${b}" gnmt --layers $l --seq $s --batch $b; nzoo=$((nzoo + 1)); done; done; done
for l in 1 2 3 4; do for s in 128 256 512 1024; do for b in 8 16; do
  zoo "txl_l${l}_s${s}_b${b}" transformer_xl --layers $l --seq $s --batch $b; nzoo=$((nzoo + 1)); done; done; done
for l in 1 2 3; do for b in 16 32 64; do
  zoo "amoeba_l${l}_b${b}" amoebanet --layers $l --batch $b; nzoo=$((nzoo + 1)); done; done
for l in 5 10 15 20 30; do for s in 4000 16000; do for b in 2 4; do
  zoo "wavenet_l${l}_s${s}_b${b}" wavenet --layers $l --seq $s --batch $b; nzoo=$((nzoo + 1)); done; done; done
for d in 18 34 50 101 152; do for b in 8 32 128; do
  zoo "resnet${d}_b${b}" resnet --layers $d --batch $b; nzoo=$((nzoo + 1)); done; done
say "zoo: $nzoo graphs"

# 3. the training split of the real PyTorch exports
nreal=0
while IFS=$'\t' read -r model split family _; do
  case "$model" in ''|'#'*) continue ;; esac
  [ "$split" = train ] || continue
  f="$SRC/graphs/real/$model.graphml.gz"
  [ -r "$f" ] || { echo "pretrain-data.sh: $SPLITS: model '$model' has no file $f" >&2; exit 1; }
  if [ ! -e "$OUT/real_$model.graphml.gz" ]; then
    cp "$f" "$OUT/real_$model.graphml.gz.tmp" && mv -f "$OUT/real_$model.graphml.gz.tmp" "$OUT/real_$model.graphml.gz"
  fi
  printf 'real_%s.graphml.gz\treal\t%s\tgraphs/real/%s.graphml.gz\t\t\n' "$model" "$family" "$model" >> "$MAN"
  nreal=$((nreal + 1))
  if [ "$VARIANTS" = 1 ]; then
    b=$(/usr/bin/python3 "$SRC/tools/export_torch.py" --list | awk -v m="$model" '$1 == m {print $5}')
    for bb in $(( b / 2 > 0 ? b / 2 : 1 )) $(( b * 2 )); do
      v="real_${model}_b$bb.graphml.gz"
      [ -e "$OUT/$v" ] || /usr/bin/python3 "$SRC/tools/export_torch.py" "$model" --batch "$bb" -o "$OUT/$v" >&2
      printf '%s\treal\t%s\t--batch %s\t\t\n' "$v" "$family" "$bb" >> "$MAN"
      nreal=$((nreal + 1))
    done
  fi
done < "$SPLITS"
say "real (training split): $nreal graphs"

# the validation, test, holdout and holdout2 splits must not be in the corpus
while IFS=$'\t' read -r model split _; do
  case "$model" in ''|'#'*) continue ;; esac
  if [ "$split" != train ] && ls "$OUT" | grep -q "^real_${model}\(_b[0-9]*\)\?\.graphml\.gz$"; then
    echo "pretrain-data.sh: $split model '$model' found in $OUT" >&2; exit 1
  fi
done < "$SPLITS"
mv -f "$MAN" "$OUT/manifest.tsv"
say "done: $((NSYN + NTAB + nzoo + nreal)) graphs in $OUT (manifest.tsv)"
