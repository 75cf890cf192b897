package halfdot

import (
	"slices"
	"strings"
	"testing"
)

// TestSetImpl: every kernel of Impls can be set and restored, with Impl
// and HasTileKernel following it; an unknown name is an error naming it;
// DisableTile turns the tile off until restored.
func TestSetImpl(t *testing.T) {
	best := Impl()
	have := Impls()
	if have[0] != best || have[len(have)-1] != "go" {
		t.Fatalf("Impls() = %q, want %q first and go last", have, best)
	}
	for _, name := range have {
		restore, err := SetImpl(name)
		if err != nil {
			t.Fatal(err)
		}
		if Impl() != name || HasTileKernel() != (name != "go") {
			t.Errorf("SetImpl(%q): Impl %q, HasTileKernel %v", name, Impl(), HasTileKernel())
		}
		if name == "avx2" && HasInt8TileKernel() {
			t.Errorf("SetImpl(avx2): the VNNI tile still runs")
		}
		off := DisableTile()
		if HasTileKernel() {
			t.Errorf("%s: DisableTile: HasTileKernel still true", name)
		}
		off()
		restore()
	}
	if Impl() != best {
		t.Errorf("restored to %q, want %q", Impl(), best)
	}
	if _, err := SetImpl("sse"); err == nil || !strings.Contains(err.Error(), `"sse"`) || !slices.Contains(have, "go") {
		t.Errorf("SetImpl(sse): %v", err)
	}
}
