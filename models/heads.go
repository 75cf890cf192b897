package models

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/conditionhq/condition/models/hub"
	"github.com/conditionhq/condition/tensorio"
)

// HeadsFile is where the projection heads read out of a large
// model.safetensors are kept, in the derived cache (see DefaultDerivedDir):
// <derived>/models--org--name/<commit>/condition-heads.safetensors, for the
// repository and commit they were read from.
const HeadsFile = "condition-heads.safetensors"

// HeadNames are the tensors of CLIPModel's joint-space heads.
var HeadNames = []string{
	"text_projection.weight",
	"visual_projection.weight",
	"vision_model.post_layernorm.weight",
	"vision_model.post_layernorm.bias",
	"logit_scale",
}

// SiglipHeadNames are the tensors of SiglipModel's heads: the text head
// (a linear layer on the last position's state), the vision tower's
// attention-pooling head (probe, attention, layer norm, MLP), logit_scale
// and logit_bias.
var SiglipHeadNames = []string{
	"text_model.head.weight",
	"text_model.head.bias",
	"vision_model.head.probe",
	"vision_model.head.attention.in_proj_weight",
	"vision_model.head.attention.in_proj_bias",
	"vision_model.head.attention.out_proj.weight",
	"vision_model.head.attention.out_proj.bias",
	"vision_model.head.layernorm.weight",
	"vision_model.head.layernorm.bias",
	"vision_model.head.mlp.fc1.weight",
	"vision_model.head.mlp.fc1.bias",
	"vision_model.head.mlp.fc2.weight",
	"vision_model.head.mlp.fc2.bias",
	"logit_scale",
	"logit_bias",
}

// TipsHeadNames are the tensors of Tipsv2Model outside its towers: the
// learned temperature of the transformers versions that make it a tensor
// (absent from the published checkpoints). TIPSv2 has no projection heads.
var TipsHeadNames = []string{"temperature"}

// HeadNamesFor returns the head tensors of a family's model.safetensors.
func HeadNamesFor(f Family) []string {
	if f.Sigmoid() {
		return SiglipHeadNames
	}
	if f == Tipsv2 {
		return TipsHeadNames
	}
	return HeadNames
}

// SmallWeights is the default size up to which a model.safetensors on the
// hub is downloaded whole; a larger one has only its heads read, by ranges.
const SmallWeights = 64 << 20

// cachedHeads returns where repo@commit's heads are on disk: its
// model.safetensors in the hub cache, else the heads read out of it by
// ranges, in the derived cache.
func cachedHeads(cache hub.Cache, derived derivedCache, repo, commit string) (string, bool) {
	if p, ok := cache.File(repo, commit, WeightsFile); ok {
		return p, true
	}
	return derived.file(repo, commit, HeadsFile)
}

// openWeights makes model.safetensors come from another model's heads.
func (m *Model) openWeights(ctx context.Context, ref string, opts Options) error {
	r, err := ParseRef(ref)
	if err != nil {
		return fmt.Errorf("models: weights: %w", err)
	}
	var p string
	switch {
	case r.Dir != "":
		p = filepath.Join(r.Dir, WeightsFile)
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("models: weights %s have no %s: %w", ref, WeightsFile, fs.ErrNotExist)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("models: %w", err)
		}
		p = abs
	case r.Hub.Repo != "":
		c := m.hub
		if c == nil {
			c = HubClient(opts)
		}
		commit := ""
		if !opts.Update || c.Offline {
			if cm, err := c.Cache().Commit(r.Hub.Repo, r.Hub.Rev()); err == nil {
				commit = cm
			} else if c.Offline {
				return offlineError(fmt.Sprintf("models: the weights %s@%s are not in the Hugging Face cache %s; %s", r.Hub.Repo, r.Hub.Rev(), c.CacheDir, offlineNote("fetch them", headsWhere)))
			}
		}
		if p, err = fetchHeads(ctx, c, m.derived, r.Hub.Repo, r.Hub.Rev(), commit, opts.MaxWeightsDownload); err != nil {
			return err
		}
	default:
		return fmt.Errorf("models: weights %q: give a directory or org/name[@revision] with a %s", ref, WeightsFile)
	}
	m.extra[WeightsFile] = p
	m.weights = ref
	return m.checkHeads()
}

// checkHeads checks that the heads fit the model's config.
func (m *Model) checkHeads() error {
	f, err := os.Open(m.extra[WeightsFile])
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	h, err := tensorio.ReadSafetensorsHeader(f, fi.Size())
	if err != nil {
		return fmt.Errorf("models: weights %s: %w", m.weights, err)
	}
	c := m.config
	for name, want := range map[string][2]int{
		"text_projection.weight":   {c.ProjectionDim, c.TextConfig.HiddenSize},
		"visual_projection.weight": {c.ProjectionDim, c.VisionConfig.HiddenSize},
	} {
		t, ok := h.Tensors[name]
		if !ok {
			continue
		}
		if len(t.Shape) != 2 || t.Shape[0] != want[0] || t.Shape[1] != want[1] {
			return fmt.Errorf("models: the weights %s do not fit %s: %s is %v, its config.json says [%d %d] (projection_dim × hidden_size)",
				m.weights, m.ref, name, t.Shape, want[0], want[1])
		}
	}
	return nil
}

// PECoreHeadNames are the tensors of a PE-Core model (OpenCLIP's layout)
// that its joint space is built from, under the names its
// open_clip_model.safetensors serves them (Model.ReadWeights): the vision
// trunk's final norm, the attention pool's kv (its second half is the
// value path), proj, norm and MLP, the head Linear to the joint space,
// the text projection (CLIPModel's name) and logit_scale.
var PECoreHeadNames = []string{
	"visual.trunk.norm.weight",
	"visual.trunk.norm.bias",
	"visual.trunk.attn_pool.kv.weight",
	"visual.trunk.attn_pool.kv.bias",
	"visual.trunk.attn_pool.proj.weight",
	"visual.trunk.attn_pool.proj.bias",
	"visual.trunk.attn_pool.norm.weight",
	"visual.trunk.attn_pool.norm.bias",
	"visual.trunk.attn_pool.mlp.fc1.weight",
	"visual.trunk.attn_pool.mlp.fc1.bias",
	"visual.trunk.attn_pool.mlp.fc2.weight",
	"visual.trunk.attn_pool.mlp.fc2.bias",
	"visual.trunk.head.weight",
	"visual.trunk.head.bias",
	"text_projection.weight",
	"logit_scale",
}
