package models_test

import (
	"strings"
	"testing"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/hub/hubtest"
)

// heads counts the hub's metadata (HEAD) requests per file of repo.
func heads(reqs []hubtest.Request, repo string) map[string]int {
	out := map[string]int{}
	for _, r := range reqs {
		if r.Role != "hub" || r.Method != "HEAD" {
			continue
		}
		rest, ok := strings.CutPrefix(r.Path, "/"+repo+"/resolve/")
		if !ok {
			continue
		}
		_, file, _ := strings.Cut(rest, "/")
		out[file]++
	}
	return out
}

// TestOneMetadataRequestPerFile proves from the fake hub's request log that
// opening a hub model asks the hub about each file once: model.safetensors
// too, whether it is downloaded whole or has its heads read by ranges.
func TestOneMetadataRequestPerFile(t *testing.T) {
	srv := fakeHub(t)
	for _, c := range []struct {
		name, ref, weightsRepo string
		max                    int64
	}{
		{"own weights downloaded whole", "org/tinyclip", "org/tinyclip", 0},
		{"own weights read by ranges", "org/tinyclip", "org/tinyclip", 1000},
		{"weights from another repo by ranges", "org/onnx+org/pt", "org/pt", 1000},
		{"weights from another repo whole", "org/onnx+org/pt@main", "org/pt", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := hubOptions(t, srv, t.TempDir())
			opts.MaxWeightsDownload = c.max
			srv.Reset()
			if _, err := models.Open(c.ref, opts); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			for _, repo := range uniq(strings.SplitN(c.ref, "+", 2)[0], c.weightsRepo) {
				for file, n := range heads(reqs, repo) {
					if n != 1 {
						t.Errorf("%s: %d metadata requests for %s, want 1", repo, n, file)
					}
				}
			}
			if n := heads(reqs, c.weightsRepo)[models.WeightsFile]; n != 1 {
				t.Errorf("%d metadata requests for %s's %s, want 1", n, c.weightsRepo, models.WeightsFile)
			}
			for _, r := range reqs {
				if r.Role == "cdn" && r.Method == "HEAD" {
					t.Errorf("a HEAD request to the CDN: %+v", r)
				}
			}
		})
	}
}

// uniq returns the repositories of hub ids (without "@revision"), each once.
func uniq(s ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range s {
		x, _, _ = strings.Cut(x, "@")
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
