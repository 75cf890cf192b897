package main

// commands is the command tree: every command and subcommand, in the order
// help lists them. Dispatch and help walk it; nothing else registers a
// command.
var commands = &command{name: "condition", subs: []*command{
	{name: "run", summary: "the batch job: images × prompts → features, attention both ways, heatmaps, a manifest", run: runRun},
	{name: "query", summary: "text → image over a job's index: ranked images, and per word where in each", run: runQuery},
	{name: "dedup", summary: "near-duplicate images of a job's index: groups.jsonl, keep.txt, drop.txt", run: runDedup},
	{name: "collection", summary: "a collection in Weaviate made, described and dropped apart from jobs", usage: collectionUsage, subs: []*command{
		{name: "create", summary: "make a collection for the vectors of a model, with its index settings (fixed once made)", run: runCollectionCreate},
		{name: "info", summary: "a collection's model stamp, settings and object count, as the database reports them", run: runCollectionInfo},
		{name: "drop", summary: "remove a collection and every object in it (needs --yes)", run: runCollectionDrop},
	}},
	{name: "attend", summary: "one image and a prompt: the words and patches that attend most, and a heatmap PNG", run: runAttend},
	{name: "classify", summary: "zero-shot classification: each image against labels, as /v1/classify", run: runClassify},
	{name: "embed", summary: "CLIP embeddings, token and patch states, image–prompt similarity", run: runEmbed},
	{name: "xattn", summary: "apply a cross-attention layer (diffusers weights) to query and source features", run: runXattn},
	{name: "tokenize", summary: "token ids and tokens, as the model's tokenizer makes them", run: runTokenize},
	{name: "preprocess", summary: "the pixel_values tensor an image becomes, as .npy (for checking against Python)", run: runPreprocess},
	{name: "merge", summary: "prove a job's output complete: join the shard manifests of a split job into manifest.jsonl, or check every shard of the shards layout (folder or object-store prefix)", run: runMerge},
	{name: "models", summary: "list, fetch, inspect, verify, expose, build, optimize and evaluate models (Hugging Face hub and cache)", usage: modelsUsage, subs: []*command{
		{name: "list", summary: "models in the Hugging Face cache (--known: the models this program was checked against)", run: runModelsList},
		{name: "fetch", summary: "download a hub model into the cache, with progress (and build its graphs when it ships only safetensors)", run: runModelsFetch},
		{name: "info", summary: "files, config, graph inputs and outputs, variants", run: runModelsInfo},
		{name: "verify", summary: "re-hash a cached hub model against its blob names (a folder or default: check that its files parse)", run: runModelsVerify},
		{name: "expose", summary: "add last_hidden_state to pooled-only graphs", run: runModelsExpose},
		{name: "build", summary: "build the ONNX graphs of a model folder or hub model from its config.json and model.safetensors, check them (and make the int8 variant)", run: runModelsBuild},
		{name: "optimize", summary: "fuse the graphs for ONNX Runtime (and quantize them to int8), check them against the originals", run: runModelsOptimize},
		{name: "eval", summary: "quality on held-out generated scenes (default: the built-in model)", run: runModelsEval},
	}},
	{name: "runtime", summary: "where ONNX Runtime is and its version; `runtime install` installs it", run: runRuntime, subs: []*command{
		{name: "install", summary: "install the official ONNX Runtime build into the user cache", run: runRuntimeInstall},
	}},
	{name: "serve", summary: "one loaded model behind HTTP: /v1/embeddings, /v1/attend, /v1/classify, probes, /metrics and a page", run: runServe},
}}
