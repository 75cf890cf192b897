// bench.mjs: the transformers.js side of scripts/transformersjs/compare.sh.
//
// Encodes every image of a folder with a CLIP vision model through
// transformers.js (RawImage.read and the model's AutoProcessor, then
// CLIPVisionModelWithProjection), batch by batch, and prints one JSON line:
// images, seconds (wall, from the first file read to the last embedding),
// images_per_sec, and the ONNX Runtime it ran on.
//
//   node bench.mjs --model DIR --images DIR [--batch 32] [--threads 2] [--workers 1]
//
// --workers N runs N worker threads, each with its own session of
// threads/N intra-op threads and every Nth image (transformers.js's other
// way of using the cores); the clock starts once every worker has loaded.
//
// DIR is a model folder in the Hugging Face layout with onnx/vision_model.onnx
// (compare.sh makes one whose onnx/vision_model.onnx is another graph, to run
// transformers.js on a given graph). Nothing is downloaded.
import fs from "node:fs";
import path from "node:path";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import { env, AutoProcessor, CLIPVisionModelWithProjection, RawImage } from "@huggingface/transformers";

const args = isMainThread
  ? Object.fromEntries(
      process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
    )
  : workerData.args;
const modelDir = path.resolve(args.model ?? "");
const imageDir = path.resolve(args.images ?? "");
const batch = Number(args.batch ?? 32);
const threads = Number(args.threads ?? 2);
const workers = Number(args.workers ?? 1);

const files = fs
  .readdirSync(imageDir, { recursive: true })
  .filter((f) => /\.(jpe?g|png)$/i.test(f))
  .sort()
  .map((f) => path.join(imageDir, f));

// load opens the processor and a session of n intra-op threads.
async function load(n) {
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = path.dirname(modelDir) + path.sep;
  const id = path.basename(modelDir);
  const processor = await AutoProcessor.from_pretrained(id);
  const model = await CLIPVisionModelWithProjection.from_pretrained(id, {
    dtype: "fp32",
    device: "cpu",
    // Threads that do not spin between calls, as condition's: the CPU time compare.sh reads is then work.
    session_options: { intraOpNumThreads: n, interOpNumThreads: 1, extra: { session: { intra_op: { allow_spinning: "0" } } } },
  });
  return { processor, model };
}

// encode runs the files through the model in batches; it returns how many.
async function encode({ processor, model }, list) {
  let n = 0;
  for (let i = 0; i < list.length; i += batch) {
    const images = await Promise.all(list.slice(i, i + batch).map((f) => RawImage.read(f)));
    const inputs = await processor(images);
    const out = await model(inputs);
    if (out.image_embeds.dims[0] !== images.length) throw new Error("short batch");
    n += images.length;
  }
  return n;
}

if (!isMainThread) {
  const m = await load(workerData.threads);
  parentPort.postMessage({ ready: true });
  parentPort.once("message", async () => {
    const n = await encode(m, files.filter((_, i) => i % workers === workerData.index));
    parentPort.postMessage({ done: n });
  });
} else if (workers <= 1) {
  const m = await load(threads);
  const start = process.hrtime.bigint();
  const n = await encode(m, files);
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(JSON.stringify({ side: "transformers.js", images: n, seconds: secs, images_per_sec: n / secs, batch, threads, workers: 1 }));
} else {
  const per = Math.max(1, Math.floor(threads / workers));
  const ws = [...Array(workers).keys()].map(
    (index) => new Worker(new URL(import.meta.url), { workerData: { args, index, threads: per } }),
  );
  const next = (w, key) =>
    new Promise((resolve, reject) => {
      const on = (msg) => {
        if (key in msg) {
          w.off("message", on);
          resolve(msg[key]);
        }
      };
      w.on("message", on);
      w.once("error", reject);
    });
  await Promise.all(ws.map((w) => next(w, "ready")));
  const start = process.hrtime.bigint();
  const dones = ws.map((w) => next(w, "done"));
  ws.forEach((w) => w.postMessage("go"));
  const n = (await Promise.all(dones)).reduce((a, b) => a + b, 0);
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  await Promise.all(ws.map((w) => w.terminate()));
  console.log(JSON.stringify({ side: "transformers.js", images: n, seconds: secs, images_per_sec: n / secs, batch, threads, workers }));
}
