#!/bin/sh
# Rebuilds the embedded default model in one command: the three stages on the
# generator's one drawing of each shape (settings.json), then three more on
# varied drawings (settings_variety.json), then measures the model on both
# renderers' held-out scenes (eval.json). See README.md. Arguments (for example
# --out DIR --log FILE --eval-json FILE --threads N) go to every stage; the
# stages' checkpoints go to $CONDITION_TRAIN_WORK (default /tmp/condition-train).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=${CONDITION_TRAIN_WORK:-/tmp/condition-train}
mkdir -p "$work"
start=$(date +%s)
# stage 1: the first 1000 steps of a 1400-step schedule
"$here/run.sh" --work "$work" --steps 1400 --stop-after 1000 "$@"
cp "$work/checkpoint.pt" "$work/stage1.pt"
# stage 2: a fresh 1800-step schedule from that checkpoint (new auxiliary head)
"$here/run.sh" --work "$work" --init "$work/stage1.pt" --steps 1800 "$@"
cp "$work/checkpoint.pt" "$work/stage2.pt"
# stage 3: another fresh 1000-step schedule, keeping the auxiliary head
"$here/run.sh" --work "$work" --init "$work/stage2.pt" --init-aux --steps 1000 "$@"
cp "$work/checkpoint.pt" "$work/stage3.pt"
# stage 4: a fresh 400-step schedule on varied scenes (new auxiliary head)
"$here/run.sh" --settings "$here/settings_variety.json" --work "$work" --init "$work/stage3.pt" --steps 400 "$@"
cp "$work/checkpoint.pt" "$work/stage4.pt"
# stage 5: another fresh 400-step schedule on varied scenes, keeping the auxiliary head
"$here/run.sh" --settings "$here/settings_variety.json" --work "$work" --init "$work/stage4.pt" --init-aux --steps 400 "$@"
cp "$work/checkpoint.pt" "$work/stage5.pt"
# stage 6: a fresh 800-step schedule on varied scenes, keeping the auxiliary head; exports the model
"$here/run.sh" --settings "$here/settings_variety.json" --work "$work" --init "$work/stage5.pt" --init-aux --steps 800 "$@"
# the exported model on both renderers' held-out scenes -> eval.json
"$here/run.sh" --eval-only --write-eval "$@"
echo "rebuild took $(( $(date +%s) - start )) s"
