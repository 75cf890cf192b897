// Package serve is condition's HTTP service over one pipeline.Engine:
// OpenAI-compatible POST /v1/embeddings (texts, and images as data URIs),
// POST /v1/attend (an image and prompts → the attention maps both ways,
// per-word overlays, scores, heatmap PNGs), POST /v1/classify (zero-shot
// probabilities), GET /v1/models, the probes /healthz and /readyz,
// Prometheus /metrics and a page at /.
//
// Concurrent requests' images are gathered into encoder batches (bounded
// size, bounded wait), prompts likewise, and prepared prompts are kept in a
// bounded LRU shared by all requests. Queues are bounded: when full a
// request gets 429 with Retry-After. Bodies, prompts and items per request
// have limits; every error is JSON in OpenAI's shape. Images are taken as
// data URIs or uploads only: no URL is ever fetched.
package serve
