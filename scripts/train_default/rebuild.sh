#!/bin/sh
# Rebuilds the embedded default model in one command: writes the training
# scenes, trains three stages on the generator's one drawing of each shape
# (settings.json), then five on a mix of varied and plain drawings
# (settings_mixed.json, settings_late.json, settings_last.json three times),
# and measures the model on both renderers' held-out scenes (eval.json). Each
# stage trains in two processes, one per core, each with half of every batch
# (settings' "procs"). See README.md. Arguments (for example --out DIR --log
# FILE --eval-json FILE --data DIR) go to every step; the stages' checkpoints
# go to $CONDITION_TRAIN_WORK (default /tmp/condition-train).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=${CONDITION_TRAIN_WORK:-/tmp/condition-train}
mkdir -p "$work"
start=$(date +%s)
# the plain training scenes, then the varied ones
"$here/run.sh" --data-only "$@"
"$here/run.sh" --settings "$here/settings_mixed.json" --data-only "$@"
# stage 1: the first 1000 steps of a 1400-step schedule
"$here/run.sh" --work "$work" --steps 1400 --stop-after 1000 "$@"
cp "$work/checkpoint.pt" "$work/stage1.pt"
# stage 2: a fresh 1800-step schedule from that checkpoint (new auxiliary head)
"$here/run.sh" --work "$work" --init "$work/stage1.pt" --steps 1800 "$@"
cp "$work/checkpoint.pt" "$work/stage2.pt"
# stage 3: another fresh 1000-step schedule, keeping the auxiliary head
"$here/run.sh" --work "$work" --init "$work/stage2.pt" --init-aux --steps 1000 "$@"
cp "$work/checkpoint.pt" "$work/stage3.pt"
# stage 4: a fresh schedule on varied and plain scenes, keeping the auxiliary head
"$here/run.sh" --settings "$here/settings_mixed.json" --work "$work" --init "$work/stage3.pt" --init-aux --stop-after 2200 "$@"
cp "$work/checkpoint.pt" "$work/stage4.pt"
# stage 5: a gentler schedule with fewer plain scenes, keeping the auxiliary head
"$here/run.sh" --settings "$here/settings_late.json" --work "$work" --init "$work/stage4.pt" --init-aux --stop-after 1500 "$@"
cp "$work/checkpoint.pt" "$work/stage5.pt"
# stages 6, 7 and 8: the same at a lower peak learning rate, each with a new
# auxiliary head; stage 8 exports the model
"$here/run.sh" --settings "$here/settings_last.json" --work "$work" --init "$work/stage5.pt" --stop-after 1500 "$@"
cp "$work/checkpoint.pt" "$work/stage6.pt"
"$here/run.sh" --settings "$here/settings_last.json" --work "$work" --init "$work/stage6.pt" --stop-after 1500 "$@"
cp "$work/checkpoint.pt" "$work/stage7.pt"
"$here/run.sh" --settings "$here/settings_last.json" --work "$work" --init "$work/stage7.pt" "$@"
# the exported model on both renderers' held-out scenes -> eval.json
"$here/run.sh" --eval-only --write-eval "$@"
echo "rebuild took $(( $(date +%s) - start )) s"
