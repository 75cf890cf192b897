package dedup

import (
	"context"
	"fmt"
	"image"
	"path"
	"slices"

	"github.com/disintegration/imaging"

	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/vision"
)

// The contact sheets' cells: a thumbnail of at most thumb×thumb pixels
// and two lines of text under it.
const (
	thumb        = 160
	cellW, cellH = thumb + 8, thumb + 36
	labelChars   = cellW/7 - 1
)

// Picture is a drawn PNG and the labels of its images, in drawing order.
type Picture struct {
	PNG    []byte
	Labels []string
}

// SheetOptions sizes the contact sheets: the largest Groups groups with at
// most PerGroup images each (the kept one first, then its duplicates by
// cosine, highest first), and Pairs pairs on each side of the threshold.
type SheetOptions struct {
	Groups, PerGroup, Pairs int
}

// DefaultSheetOptions are the sheets' sizes when a field is 0.
var DefaultSheetOptions = SheetOptions{Groups: 8, PerGroup: 6, Pairs: 4}

func (s *SheetOptions) defaults() {
	if s.Groups <= 0 {
		s.Groups = DefaultSheetOptions.Groups
	}
	if s.PerGroup <= 1 {
		s.PerGroup = DefaultSheetOptions.PerGroup
	}
	if s.Pairs <= 0 {
		s.Pairs = DefaultSheetOptions.Pairs
	}
}

// sheetCell is one image of a sheet: its row and two lines of text.
type sheetCell struct {
	row          int
	line1, line2 string
}

// GroupsSheet draws the largest groups of res (most duplicates first, then
// by kept row), one group a line: each image read from where the job read
// it (index.Index.ReadImage; a grey panel when it cannot be read), labelled
// with its source's file name and "kept" or its cosine to the kept image.
func GroupsSheet(ctx context.Context, x *index.Index, res *Result, o SheetOptions) (*Picture, error) {
	o.defaults()
	groups := slices.Clone(res.Groups)
	slices.SortStableFunc(groups, func(a, b Group) int { return len(b.Dups) - len(a.Dups) })
	var lines [][]sheetCell
	for _, g := range groups[:min(o.Groups, len(groups))] {
		dups := slices.Clone(g.Dups)
		slices.SortStableFunc(dups, func(a, b Member) int {
			if a.Cos != b.Cos {
				if a.Cos > b.Cos {
					return -1
				}
				return 1
			}
			return a.Row - b.Row
		})
		line := []sheetCell{{row: g.Keep, line2: "kept"}}
		for _, m := range dups[:min(o.PerGroup-1, len(dups))] {
			line = append(line, sheetCell{row: m.Row, line2: fmt.Sprintf("cos %.4f", m.Cos)})
		}
		lines = append(lines, line)
	}
	return drawSheet(ctx, x, lines)
}

// NearSheet draws the pairs closest to the threshold, one pair a line:
// the o.Pairs pairs of lowest cosine at or above it (groups' candidates),
// then the closest below it (Result.Near, from Options.NearMargin), each
// image labelled with its source's file name and the pair's cosine.
func NearSheet(ctx context.Context, x *index.Index, res *Result, o SheetOptions) (*Picture, error) {
	o.defaults()
	above := slices.Clone(res.Pairs)
	slices.SortStableFunc(above, func(p, q Pair) int {
		if p.Cos < q.Cos {
			return -1
		} else if p.Cos > q.Cos {
			return 1
		}
		return 0
	})
	var lines [][]sheetCell
	add := func(p Pair, rel string) {
		s := fmt.Sprintf("cos %.4f %s T", p.Cos, rel)
		lines = append(lines, []sheetCell{{row: p.A, line2: s}, {row: p.B, line2: s}})
	}
	for _, p := range above[:min(o.Pairs, len(above))] {
		add(p, ">=")
	}
	for _, p := range res.Near[:min(o.Pairs, len(res.Near))] {
		add(p, "<")
	}
	return drawSheet(ctx, x, lines)
}

// drawSheet draws lines of cells (as wide as the longest line; an empty
// sheet is one blank cell) and encodes it.
func drawSheet(ctx context.Context, x *index.Index, lines [][]sheetCell) (*Picture, error) {
	cols := 1
	for _, l := range lines {
		cols = max(cols, len(l))
	}
	img := image.NewRGBA(image.Rect(0, 0, cols*cellW, max(1, len(lines))*cellH))
	fill(img, img.Bounds(), white)
	pic := &Picture{}
	for y, l := range lines {
		for c, cell := range l {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			name := drawCell(ctx, x, img, image.Pt(c*cellW, y*cellH), cell)
			pic.Labels = append(pic.Labels, name+" "+cell.line2)
		}
	}
	var err error
	pic.PNG, err = encodePNG(img)
	return pic, err
}

// drawCell draws one image (fitted into thumb×thumb) and its two lines at
// at, and returns its first line: the source's file name (member's, for a
// tar shard).
func drawCell(ctx context.Context, x *index.Index, img *image.RGBA, at image.Point, cell sheetCell) string {
	_, it, _ := x.RowItem(cell.row)
	name := path.Base(it.Source)
	if it.Member != "" {
		name = path.Base(it.Member)
	}
	if it.Source == "" {
		name = path.Base(it.Path)
	}
	box := image.Rect(at.X+4, at.Y+4, at.X+4+thumb, at.Y+4+thumb)
	fill(img, box, grey)
	if data, err := x.ReadImage(ctx, &index.Hit{Path: it.Path, Source: it.Source, Member: it.Member}); err == nil {
		if src, err := vision.Decode(data, vision.DecodeOptions{}); err == nil {
			t := imaging.Fit(src, thumb, thumb, imaging.Linear)
			off := box.Min.Add(image.Pt((thumb-t.Bounds().Dx())/2, (thumb-t.Bounds().Dy())/2))
			fill(img, box, white)
			drawImage(img, t, off)
		} else {
			text(img, box.Min.X+4, box.Min.Y+16, "not decoded", white)
		}
	} else {
		text(img, box.Min.X+4, box.Min.Y+16, "not read", white)
	}
	l1 := name
	if r := []rune(l1); len(r) > labelChars {
		l1 = "..." + string(r[len(r)-labelChars+3:])
	}
	text(img, at.X+4, at.Y+thumb+18, l1, black)
	text(img, at.X+4, at.Y+thumb+32, cell.line2, black)
	return name
}
