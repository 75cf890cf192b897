package dedup

import (
	"cmp"
	"slices"

	"github.com/conditionhq/condition/internal/halfdot"
	"github.com/conditionhq/condition/pipeline/index"
)

// centralExact is the largest group whose central image is found from
// every pair of its members' vectors; a larger component (a long chain)
// uses the cosines of its pairs at the threshold, the others counted as 0.
const centralExact = 2048

// graph is the pairs as each row's neighbours: rows nbr[off[r]:off[r+1]]
// with cosines cos[off[r]:off[r+1]], in row order.
type graph struct {
	off []int
	nbr []int
	cos []float32
}

func newGraph(n int, pairs []Pair) *graph {
	g := &graph{off: make([]int, n+1), nbr: make([]int, 2*len(pairs)), cos: make([]float32, 2*len(pairs))}
	for _, p := range pairs {
		g.off[p.A+1]++
		g.off[p.B+1]++
	}
	for r := range n {
		g.off[r+1] += g.off[r]
	}
	at := slices.Clone(g.off[:n])
	add := func(r, s int, c float32) {
		g.nbr[at[r]], g.cos[at[r]] = s, c
		at[r]++
	}
	// pairs are in (A, B) order, so each row's neighbours come out in row
	// order: those before it (as B) first, then those after it (as A).
	for _, p := range pairs {
		add(p.B, p.A, p.Cos)
	}
	for _, p := range pairs {
		add(p.A, p.B, p.Cos)
	}
	return g
}

// nbrs returns r's neighbours (the slice of nbr; their cosines are the
// same span of cos).
func (g *graph) nbrs(r int) []int { return g.nbr[g.off[r]:g.off[r+1]] }

// group makes the groups of the pairs by o.Group and o.Keep.
func group(x *index.Index, v *vectors, pairs []Pair, o Options) ([]Group, error) {
	g := newGraph(v.n, pairs)
	if o.Group == Star {
		return star(v, g, o.Keep), nil
	}
	return components(x, v, g, o.Keep)
}

// star visits the rows in keep order (row order, or for KeepCentral by the
// sum of their neighbours' cosines, highest first); each row not yet in a
// group keeps every neighbour not yet in one.
func star(v *vectors, g *graph, keep Keep) []Group {
	order := make([]int, 0, v.images)
	sum := make([]float32, v.n)
	for r := range v.n {
		if v.ok[r] {
			order = append(order, r)
		}
		for _, c := range g.cos[g.off[r]:g.off[r+1]] {
			sum[r] += c
		}
	}
	if keep == KeepCentral {
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(sum[b], sum[a]) })
	}
	taken := make([]bool, v.n)
	var groups []Group
	for _, r := range order {
		if taken[r] {
			continue
		}
		taken[r] = true
		var gr Group
		for k, s := range g.nbrs(r) {
			if !taken[s] {
				taken[s] = true
				gr.Dups = append(gr.Dups, Member{s, g.cos[g.off[r]+k]})
			}
		}
		if len(gr.Dups) > 0 {
			gr.Keep = r
			groups = append(groups, gr)
		}
	}
	slices.SortFunc(groups, func(a, b Group) int { return a.Keep - b.Keep })
	return groups
}

// components makes a group of each connected component of two or more
// rows, keeps its first or central row, and gives every other its cosine
// to the kept one from their vectors.
func components(x *index.Index, v *vectors, g *graph, keep Keep) ([]Group, error) {
	comp := make([]int, v.n)
	for r := range comp {
		comp[r] = -1
	}
	var members [][]int
	for r := range v.n {
		if comp[r] >= 0 || g.off[r] == g.off[r+1] {
			continue
		}
		c := len(members)
		comp[r] = c
		list := []int{r}
		for k := 0; k < len(list); k++ {
			for _, s := range g.nbrs(list[k]) {
				if comp[s] < 0 {
					comp[s] = c
					list = append(list, s)
				}
			}
		}
		slices.Sort(list)
		members = append(members, list)
	}
	groups := make([]Group, 0, len(members))
	for _, list := range members {
		gr, err := componentGroup(x, v, g, list, keep)
		if err != nil {
			return nil, err
		}
		groups = append(groups, gr)
	}
	slices.SortFunc(groups, func(a, b Group) int { return a.Keep - b.Keep })
	return groups, nil
}

// componentGroup keeps the first or central row of one component's rows
// (list, in row order) and gives the others their cosine to it. Up to
// centralExact rows are read at once; a larger component a row at a time.
func componentGroup(x *index.Index, v *vectors, g *graph, list []int, keep Keep) (Group, error) {
	d := v.d
	var vec []float32
	if len(list) <= centralExact {
		var err error
		if vec, err = unitRows(x, v, list); err != nil {
			return Group{}, err
		}
	}
	k := 0
	if keep == KeepCentral {
		k = central(v, g, list, vec)
	}
	kept, err := unitRows(x, v, list[k:k+1])
	if err != nil {
		return Group{}, err
	}
	gr := Group{Keep: list[k]}
	row := make([]float32, d)
	for i, r := range list {
		if i == k {
			continue
		}
		if vec != nil {
			copy(row, vec[i*d:(i+1)*d])
		} else if row, err = unitRows(x, v, list[i:i+1]); err != nil {
			return Group{}, err
		}
		gr.Dups = append(gr.Dups, Member{r, halfdot.DotFloat32(row, kept)})
	}
	return gr, nil
}

// central returns the member of list with the highest mean cosine to the
// others (the first such in row order): from their vectors (vec, [len(list),
// D]), or without them (past centralExact members) from the cosines of
// their pairs.
func central(v *vectors, g *graph, list []int, vec []float32) int {
	d := v.d
	best, bestSum := 0, float32(-2*float32(len(list)))
	for i, r := range list {
		var s float32
		if vec != nil {
			for j := range list {
				if j != i {
					s += halfdot.DotFloat32(vec[i*d:(i+1)*d], vec[j*d:(j+1)*d])
				}
			}
		} else {
			for _, c := range g.cos[g.off[r]:g.off[r+1]] {
				s += c
			}
		}
		if s > bestSum {
			best, bestSum = i, s
		}
	}
	return best
}

// unitRows reads the rows of list, normalised, [len(list), D].
func unitRows(x *index.Index, v *vectors, list []int) ([]float32, error) {
	d := v.d
	out := make([]float32, len(list)*d)
	for i, r := range list {
		row := out[i*d : (i+1)*d]
		if err := x.ReadEmbeds(r, row, nil); err != nil {
			return nil, err
		}
		for j := range row {
			row[j] *= v.inv[r]
		}
	}
	return out, nil
}
