// bench.mjs: the transformers.js side of scripts/transformersjs/compare.sh.
//
// Encodes every image of a folder with a CLIP vision model through
// transformers.js (RawImage.read and the model's AutoProcessor, then
// CLIPVisionModelWithProjection), batch by batch, and prints one JSON line:
// images, seconds (wall, from the first file read to the last embedding),
// images_per_sec, and the ONNX Runtime it ran on.
//
//   node bench.mjs --model DIR --images DIR [--batch 32] [--threads 2]
//
// DIR is a model folder in the Hugging Face layout with onnx/vision_model.onnx
// (compare.sh makes one whose onnx/vision_model.onnx is another graph, to run
// transformers.js on a given graph). Nothing is downloaded.
import fs from "node:fs";
import path from "node:path";
import { env, AutoProcessor, CLIPVisionModelWithProjection, RawImage } from "@huggingface/transformers";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const modelDir = path.resolve(args.model ?? "");
const imageDir = path.resolve(args.images ?? "");
const batch = Number(args.batch ?? 32);
const threads = Number(args.threads ?? 2);

env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = path.dirname(modelDir) + path.sep;
const id = path.basename(modelDir);

const files = fs
  .readdirSync(imageDir, { recursive: true })
  .filter((f) => /\.(jpe?g|png)$/i.test(f))
  .sort()
  .map((f) => path.join(imageDir, f));

const processor = await AutoProcessor.from_pretrained(id);
const model = await CLIPVisionModelWithProjection.from_pretrained(id, {
  dtype: "fp32",
  device: "cpu",
  // Threads that do not spin between calls, as condition's: the CPU time compare.sh reads is then work.
  session_options: { intraOpNumThreads: threads, interOpNumThreads: 1, extra: { session: { intra_op: { allow_spinning: "0" } } } },
});

const start = process.hrtime.bigint();
let n = 0;
for (let i = 0; i < files.length; i += batch) {
  const images = await Promise.all(files.slice(i, i + batch).map((f) => RawImage.read(f)));
  const inputs = await processor(images);
  const out = await model(inputs);
  if (out.image_embeds.dims[0] !== images.length) throw new Error("short batch");
  n += images.length;
}
const secs = Number(process.hrtime.bigint() - start) / 1e9;
console.log(JSON.stringify({ side: "transformers.js", images: n, seconds: secs, images_per_sec: n / secs, batch, threads }));
