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
//
// VisionOptions.Readout picks how patch vectors are read from the last
// layer (see ReadoutRaw). ReadoutPEARL (PEARL, CVPR 2026) is built from the
// paper's equations with these choices, per head of the last layer, q, k
// and v its projections of layer_norm1(x) for all S = 1 + P rows and
// s = d_h^-½: the weights w_i = ‖q_i‖ (Euclidean norm of the unscaled
// query), zero for the class token, divided by Σ w + 1e-6; centroids
// q̄ = Σ w_i q_i, k̄ = Σ w_i k_i; M = (k − k̄)ᵀ(q − q̄) over all S rows,
// divided by ‖M‖_F + 1e-6; five steps of the cubic Newton–Schulz
// iteration X ← 1.5 X − 0.5 X Xᵀ X give R (not an exact SVD: the authors'
// default); the logits (q s)(k R)ᵀ + 0.08 (k − k̄)(k − k̄)ᵀ s, softmax over
// the keys, times v; heads concatenated, out_proj; no residual, no MLP.
// It needs the class-token last block of CLIP or MetaCLIP 2.
package clip
