package batch

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"

	"github.com/conditionhq/condition/tensorio"
)

// partSet is what the output shards and the index parts share: every size
// images, in the order of their seq numbers, one part, written under a
// temporary folder while it is open and finished once it holds all its
// images. F is a part's open files, R one image's row of its metadata.
type partSet[F, R any] struct {
	out  *outFolder
	size int
	proc Shard
	what string // "shard" or "index part", as errors name a part
	tmp  string // the prefix of a part's temporary folder

	// start opens a new part's files, when it has any before its first
	// row; finish writes part o of n rows; close closes o's files left
	// open.
	start  func(o *part[F, R]) error
	finish func(o *part[F, R], n int) error
	close  func(o *part[F, R])

	mu   sync.Mutex
	open map[int]*part[F, R]
}

// part is one part being written.
type part[F, R any] struct {
	name  string
	tmp   string // its temporary folder, relative to the output folder
	files F
	rows  []R
	done  int // images accounted for (written, failed or skipped)
}

// get returns part i, opening it. The caller holds s.mu.
func (s *partSet[F, R]) get(i int) (*part[F, R], error) {
	if o := s.open[i]; o != nil {
		return o, nil
	}
	name := shardName(s.proc, i)
	o := &part[F, R]{name: name, tmp: s.tmp + name, rows: make([]R, 0, min(s.size, 1<<16))}
	if err := s.out.root.RemoveAll(o.tmp); err != nil {
		return nil, fmt.Errorf("batch: %s %s: %w", s.what, name, err)
	}
	if err := s.out.root.MkdirAll(o.tmp, 0o755); err != nil {
		return nil, fmt.Errorf("batch: %s %s: %w", s.what, name, err)
	}
	if s.start != nil {
		if err := s.start(o); err != nil {
			return nil, err
		}
	}
	if s.open == nil {
		s.open = map[int]*part[F, R]{}
	}
	s.open[i] = o
	return o, nil
}

// add records image seq's row r (its row number already set); it finishes
// the part when it holds all its images: size of them, or, once the walk
// is over (total ≥ 0), the rest.
func (s *partSet[F, R]) add(seq int, r R, total int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := seq / s.size
	o, err := s.get(i)
	if err != nil {
		return err
	}
	o.rows = append(o.rows, r)
	o.done++
	return s.finishIfWhole(i, total)
}

// finishAll finishes the parts still open once every image is accounted
// for (total, the number of images the walk found), in order.
func (s *partSet[F, R]) finishAll(total int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range slices.Sorted(maps.Keys(s.open)) {
		if err := s.finishIfWhole(i, total); err != nil {
			return err
		}
	}
	return nil
}

// finishIfWhole finishes part i once it holds all its images (see
// wholeRows), and forgets it. The caller holds s.mu.
func (s *partSet[F, R]) finishIfWhole(i, total int) error {
	o, ok := s.open[i]
	n := wholeRows(i, s.size, total)
	if !ok || o.done < n {
		return nil
	}
	delete(s.open, i)
	return s.finish(o, n)
}

// abandon closes the parts left unfinished (an interrupted job); their
// temporary folders stay for --resume to remove.
func (s *partSet[F, R]) abandon() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, o := range s.open {
		s.close(o)
		delete(s.open, i)
	}
}

// seal ends one of part o's arrays, f, once its n rows of rowBytes are
// written after shardNPYHeader bytes: its .npy header of dtype dt and
// shape, its size, synced. It closes f.
func (s *partSet[F, R]) seal(o *part[F, R], f *os.File, array string, dt tensorio.DType, shape []int, rowBytes, n int) error {
	hdr, err := tensorio.NPYHeader(dt, shape, shardNPYHeader)
	if err != nil {
		f.Close()
		return fmt.Errorf("batch: %s %s: %s: %w", s.what, o.name, array, err)
	}
	if _, err = f.WriteAt(hdr, 0); err == nil {
		err = f.Truncate(int64(shardNPYHeader + n*rowBytes))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("batch: %s %s: %w", s.what, o.name, err)
	}
	return nil
}

// wholeRows is the number of images part i of size-image parts holds when
// whole: size, or, once the walk is over (total ≥ 0), what is left of the
// total for the last part.
func wholeRows(i, size, total int) int {
	if total >= 0 {
		return min(size, total-i*size)
	}
	return size
}
