#!/bin/sh
# compare.sh: condition run against transformers.js, side by side, in alternated rounds.
#
#   scripts/transformersjs/compare.sh MODEL_DIR PHOTO_DIR [ROUNDS] [BATCH]
#
# MODEL_DIR: a CLIP folder in the Hugging Face layout (scripts/bench_models/make_clip.py);
# PHOTO_DIR: images (scripts/bench_photos/make_photos.py). Run from the repository root,
# after `npm install --ignore-scripts` in scripts/transformersjs (transformers.js ships
# onnxruntime-node's libonnxruntime.so.1; condition is pointed at that same file, so both
# sides run the same ONNX Runtime).
#
# It makes the optimized and optimized-int8 variants (condition models optimize), then
# runs, ROUNDS times, in an order that turns each round:
#   condition-plain      condition run on the model's own graphs        (--variant plain)
#   condition-optimized  condition run on the fused float32 graphs      (--variant optimized)
#   condition-optimized-int8  condition run on the fused int8 graphs    (--variant optimized-int8)
#   tjs-fp32             transformers.js on the model's own vision graph (one session, THREADS threads)
#   tjs-int8             transformers.js on condition's int8 vision graph
#   tjs-fp32-w2, tjs-int8-w2  the same with two worker threads, a session of THREADS/2 threads each
#   encoder-plain, encoder-optimized-int8  condition's vision encoder alone on the same graphs
#                        (condition-bench pipeline: the photos preprocessed once, then only the
#                        encoder calls, in condition run's streams and threads)
# The ratios are taken against the faster of transformers.js's two set-ups for each graph.
# Both sides run the same ONNX Runtime on the same graph, so the encoder alone over
# transformers.js is the most the job can reach: the ceiling printed beside each ratio.
# Each prints images/s over the whole folder, model loading excluded (condition's
# "done N ... (X images/s)" line; bench.mjs's own timing). The medians and their ratios
# come last. Every figure depends on the machine and what else runs on it: compare
# ratios from one run, never figures from two.
set -eu
MODEL=$(cd "$1" && pwd)
PHOTOS=$(cd "$2" && pwd)
ROUNDS=${3:-3}
BATCH=${4:-32}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
THREADS=${THREADS:-2}
# condition run's own choice of encoder streams and threads (what a user gets) unless
# CONDITION_FLAGS says otherwise, e.g. CONDITION_FLAGS="--threads 2 --streams 1".
CONDITION_FLAGS=${CONDITION_FLAGS:-}

LIB="$HERE/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1"
[ -f "$LIB" ] || { echo "compare.sh: run 'npm install --ignore-scripts' in $HERE first" >&2; exit 2; }
export ONNXRUNTIME_SHARED_LIBRARY_PATH="$LIB"

(cd "$REPO" && go build -o "$TMP/condition" ./cmd/condition && go build -o "$TMP/condition-bench" ./cmd/condition-bench)
C="$TMP/condition"
"$C" models optimize "$MODEL" --threads "$THREADS" >"$TMP/opt.txt"
"$C" models optimize "$MODEL" --int8 --threads "$THREADS" >"$TMP/int8.txt"
INT8=$(sed -n 's/^  wrote \(.*vision_model_optimized-int8\.onnx\)$/\1/p' "$TMP/int8.txt")
mkdir -p "$TMP/tjs-int8/onnx"
cp "$MODEL/config.json" "$MODEL/preprocessor_config.json" "$TMP/tjs-int8/"
ln -s "$INT8" "$TMP/tjs-int8/onnx/vision_model.onnx"

# run_one SIDE prints "IMAGES_PER_SEC CPU_SECONDS": the side's own rate (model loading
# excluded) and the CPU time of its whole process (user + system, loading included), which
# other work on the machine disturbs far less than wall time. Neither side's ONNX Runtime
# threads spin between calls (condition never lets them; bench.mjs turns it off), so CPU
# time counts work, not waiting.
run_one() {
	case $1 in
	condition-*)
		v=${1#condition-}
		rm -rf "$TMP/out"
		/usr/bin/time -f "cpu %U %S" -o "$TMP/time" "$C" run --model "$MODEL" --variant "$v" --images "$PHOTOS" --prompt "a photo" \
			--out "$TMP/out" --batch "$BATCH" $CONDITION_FLAGS --quiet 2>"$TMP/log" || { cat "$TMP/log" >&2; exit 1; }
		ips=$(sed -n 's/.*done [0-9]*, .* (\([0-9.]*\) images\/s).*/\1/p' "$TMP/log" | tail -1)
		;;
	encoder-*)
		# The encoder alone: its rate, and its calls' CPU time over the folder.
		"$TMP/condition-bench" pipeline --model "$MODEL" --variant "${1#encoder-}" --images "$PHOTOS" \
			--batch "$BATCH" --rounds 1 --json $CONDITION_FLAGS >"$TMP/enc.json" 2>"$TMP/log" || { cat "$TMP/log" >&2; exit 1; }
		ips=$(tr -d ' \n' <"$TMP/enc.json" | sed -n 's/.*"encoder_images_per_sec":\([0-9.e+-]*\),.*/\1/p')
		cpu=$(tr -d ' \n' <"$TMP/enc.json" | sed -n 's/.*"encoder_cpu_ms_per_image":\([0-9.e+-]*\),.*/\1/p')
		echo "$ips $(awk -v c="$cpu" -v n="$(find "$PHOTOS" -type f | wc -l)" 'BEGIN { print c * n / 1000 }')"
		return
		;;
	tjs-*)
		dir=$MODEL
		case $1 in tjs-int8*) dir=$TMP/tjs-int8 ;; esac
		workers=1
		case $1 in *-w2) workers=2 ;; esac
		ips=$(cd "$HERE" && /usr/bin/time -f "cpu %U %S" -o "$TMP/time" node bench.mjs --model "$dir" --images "$PHOTOS" \
			--batch "$BATCH" --threads "$THREADS" --workers "$workers" | sed -n 's/.*"images_per_sec":\([0-9.]*\).*/\1/p')
		;;
	esac
	echo "$ips $(awk '/^cpu / { print $2 + $3 }' "$TMP/time")"
}

SIDES="condition-plain condition-optimized condition-optimized-int8 tjs-fp32 tjs-int8 tjs-fp32-w2 tjs-int8-w2 encoder-plain encoder-optimized-int8"
: >"$TMP/results"
r=0
while [ "$r" -lt "$ROUNDS" ]; do
	# Turn the order by r places.
	set -- $SIDES
	i=0
	while [ "$i" -lt "$r" ]; do
		first=$1
		shift
		set -- "$@" "$first"
		i=$((i + 1))
	done
	for s in "$@"; do
		res=$(run_one "$s")
		echo "round $((r + 1)) $s: $res (images/s, CPU seconds)" >&2
		echo "$s $res" >>"$TMP/results"
	done
	r=$((r + 1))
done

N=$(find "$PHOTOS" -type f | wc -l)
med() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo "medians of $ROUNDS alternated rounds ($N images, batch $BATCH, $THREADS threads, $(nproc) cores): images/s, CPU ms per image"
for s in $SIDES; do
	printf '%s %s %s\n' "$s" "$(awk -v s="$s" '$1 == s { print $2 }' "$TMP/results" | med)" \
		"$(awk -v s="$s" -v n="$N" '$1 == s { print 1000 * $3 / n }' "$TMP/results" | med)"
done >"$TMP/medians"
cat "$TMP/medians"
echo "ratios (images/s; CPU per image, the other side's over this one's):"
awk '{ r[$1] = $2; c[$1] = $3 } function p(a, b) { printf "  %-24s / %-16s %.2fx  CPU %.2fx\n", a, b, r[a] / r[b], c[b] / c[a] }
function best(x, y) { return r[x] >= r[y] ? x : y } END {
	f = best("tjs-fp32", "tjs-fp32-w2"); i = best("tjs-int8", "tjs-int8-w2")
	p("condition-optimized", f); p("condition-plain", f); p("condition-optimized-int8", f)
	p("condition-optimized-int8", i); p("condition-optimized", "condition-plain"); p("condition-optimized-int8", "condition-plain")
	print "ceilings (the shared encoder alone over the transformers.js job; the job over its encoder):"
	p("encoder-plain", f); p("encoder-optimized-int8", i)
	p("condition-plain", "encoder-plain"); p("condition-optimized-int8", "encoder-optimized-int8")
}' "$TMP/medians"
