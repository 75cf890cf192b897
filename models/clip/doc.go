// Package clip runs the two towers of a CLIP-family model (CLIP, SigLIP,
// SigLIP 2) exported to ONNX with ONNX Runtime, as tensors in and tensors
// out: TextEncoder takes token ids [N, T] and gives last_hidden_state
// [N, T, d_t] and text_embeds [N, d_p] (SigLIP: pooler_output);
// VisionEncoder takes pixel_values [N, 3, H, W] and gives last_hidden_state
// [N, 1+P, d_v] (SigLIP: [N, P, d_v], no class token) and image_embeds
// [N, d_p] (SigLIP: pooler_output).
//
// Input and output names and element types are read from the graph: ids may
// be int64 or int32, the attention mask may be absent, and graphs may take
// and give float16 or bfloat16 (the hub's `_fp16` exports); Encode takes
// and returns float32 whatever the graph's types. Tokenizing and decoding
// and preprocessing images are not here (packages text and vision, pure
// Go); putting them together is the engine's job (package pipeline).
package clip
