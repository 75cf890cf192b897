package batch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conditionhq/condition/internal/cputime"
)

// pass is one run of a job: the channels between its stages, its counts
// and its summary.
type pass struct {
	j *job
	// parent is the caller's context; ctx stops the job when parent is
	// cancelled or an entry or output cannot be written.
	parent, ctx context.Context
	stop        context.CancelFunc
	start       time.Time
	workers     int // goroutines reading files
	batch       int // images per encoder call

	items  chan *work // walked, to be read
	ready  chan *work // read, to be decoded, encoded, attended and written
	done   chan *work // done, failed or skipped, to the collector
	budget *byteBudget
	tail   *tailShare

	seen      atomic.Int64 // images walked (in this shard)
	walked    atomic.Bool  // the walk is over, so seen is the total
	walkErr   error        // the walk's, read once done is closed
	counted   atomic.Int64 // images the counting walk found so far
	countDone atomic.Bool  // the counting walk found them all

	sum    *Summary
	manErr error // the first entry or output that could not be written
}

func (j *job) run(parent context.Context) (*Summary, error) {
	p := j.newPass(parent)
	defer p.stop()
	go p.countAhead(int64(int8AdviceAt)) // read here: the counting walk may outlive the job
	go p.walk()
	p.read()
	p.encode()
	p.collect()
	return p.finish()
}

// newPass sets a run up: its readers, read-ahead and batch.
func (j *job) newPass(parent context.Context) *pass {
	ctx, stop := context.WithCancel(parent)
	cfg := j.cfg
	p := &pass{j: j, parent: parent, ctx: ctx, stop: stop, start: time.Now(), workers: cfg.Workers, batch: cfg.Batch}
	if p.workers <= 0 {
		p.workers = runtime.GOMAXPROCS(0)
		if j.readsStores() {
			// A read from a store waits on the network, not the CPU: more
			// requests in flight keep the streams fed.
			p.workers = max(p.workers, storeReaders)
		}
	}
	if p.batch <= 0 {
		p.batch = 8
	}
	p.items = make(chan *work, 2*p.workers)
	// Read ahead: enough files for every stream's next batch, within
	// readAheadBytes (the queue and the files being read together).
	p.ready = make(chan *work, (j.streams()+1)*p.batch)
	readAhead := cfg.ReadAhead
	if readAhead <= 0 {
		readAhead = readAheadBytes
	}
	p.budget = newByteBudget(readAhead)
	p.done = make(chan *work, 2*p.batch)
	// The end of the job shared among the streams (see tailShare).
	p.tail = &tailShare{walked: &p.walked, seen: &p.seen, streams: max(j.streams(), 1)}
	p.sum = &Summary{Manifest: j.manifestPath}
	return p
}

// countAhead counts this shard's images with a walk that only lists: it
// runs ahead of the bounded read queue, so that the progress knows the
// total long before the job's own walk ends. It advises int8 once it has
// counted adviseAt.
func (p *pass) countAhead(adviseAt int64) {
	j, cfg := p.j, p.j.cfg
	var n int64
	err := walk(p.ctx, j.sources, cfg.Lists, walkOptions{skip: []string{cfg.Out}, listOnly: true, stores: j.stores, counting: true}, func(it Item) error {
		if cfg.Shard.Takes(it.ShardKey()) {
			n++
			p.counted.Store(n)
			if n == adviseAt {
				j.adviseInt8()
			}
		}
		return nil
	}, func(string, error) error { return nil })
	if err == nil {
		p.countDone.Store(true)
	}
}

// walk is stage 1: it walks the inputs in a stable order, keeping this
// shard's files.
func (p *pass) walk() {
	defer close(p.items)
	defer p.walked.Store(true)
	j, cfg := p.j, p.j.cfg
	// Output names seen, to refuse a second image of one name. A folder
	// cannot hold two, so names are kept only where two can meet: inputs
	// whose names collide, lists, and within one tar shard (kept per
	// shard). A job over one huge folder keeps none.
	names := newNameCheck(j.inputs, cfg.Lists)
	p.walkErr = walk(p.ctx, j.sources, cfg.Lists, walkOptions{skip: []string{cfg.Out}, stores: j.stores, video: cfg.Video, captions: cfg.CaptionPrompt, takes: cfg.Shard.Takes}, func(it Item) error {
		if !cfg.Shard.Takes(it.ShardKey()) {
			return nil
		}
		p.seen.Add(1)
		w := &work{it: it, started: time.Now(), timings: map[string]float64{}}
		if names.seen(it) {
			w.fail = fmt.Errorf("two inputs map to the output name %q; pass them as separate jobs or rename one", it.Rel)
		}
		w.seq = int(p.seen.Load()) - 1
		select {
		case p.items <- w:
			return nil
		case <-p.ctx.Done():
			return p.ctx.Err()
		}
	}, func(path string, err error) error {
		j.log.Warn("skipping unreadable folder", "path", path, "err", err)
		return nil
	})
}

// read is stage 2: it reads and hashes files ahead of the streams (a slow
// disk waits here, not in an encoder stream); images done before
// (--resume) and files that cannot be read go straight to the collector.
func (p *pass) read() {
	var wg sync.WaitGroup
	for range p.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range p.items {
				if p.ctx.Err() != nil {
					continue // interrupted: take no new images
				}
				if p.j.read(w, p.budget); w.fail != nil || w.entry.Status == statusSkipped {
					p.budget.give(w.held)
					w.held, w.data = 0, nil
					p.tail.taken.Add(1)
					p.done <- w
					continue
				}
				p.ready <- w
			}
		}()
	}
	go func() { wg.Wait(); close(p.ready) }()
}

// encode is stage 3: the encoder streams, each decoding, encoding,
// attending and writing its batches in turn (see Config).
func (p *pass) encode() {
	encCPU := cputime.FromContext(p.ctx) // a benchmark's, or nil
	var wg sync.WaitGroup
	for range max(p.j.streams(), 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.j.stream(p.ctx, p.ready, p.done, p.batch, p.tail, p.budget, encCPU)
		}()
	}
	go func() { wg.Wait(); close(p.done) }()
}

// collect is stage 4: in one goroutine, it records every image's manifest
// entry and progress. An image whose entry waits for a sink's checkpoint
// (its object for the collection) waits here for its batch's write: it is
// ok in the manifest only once its output holds it.
func (p *pass) collect() {
	var held []*work
	checkpoint := func() {
		for _, s := range p.j.sinks {
			s.checkpoint(p.ctx, held)
		}
		for _, w := range held {
			p.record(w)
		}
		held = held[:0]
	}
	for {
		var w *work
		ok := true
		if len(held) > 0 {
			select {
			case w, ok = <-p.done:
			default:
				checkpoint() // nothing else is ready: write what waits
				continue
			}
		} else {
			w, ok = <-p.done
		}
		if !ok {
			break
		}
		if n := p.j.holds(w); n > 0 {
			if held = append(held, w); len(held) >= n {
				checkpoint()
			}
			continue
		}
		p.record(w)
	}
	if len(held) > 0 {
		checkpoint()
	}
}

// holds returns how many images may wait at most for the checkpoint of the
// first sink w's entry waits for; 0 when it waits for none.
func (j *job) holds(w *work) int {
	for _, s := range j.sinks {
		if n := s.holds(w); n > 0 {
			return n
		}
	}
	return 0
}

// record writes w's manifest entry, accounts for it in the sinks, and
// reports the progress.
func (p *pass) record(w *work) {
	if w.entry.Status == statusSkipped {
		p.sum.Skipped++
	} else {
		p.settle(w)
	}
	if p.j.cfg.Progress != nil {
		pr := Progress{Done: p.sum.Done, Skipped: p.sum.Skipped, Failed: p.sum.Failed,
			Seen: int(max(p.seen.Load(), p.counted.Load())), Walked: p.walked.Load() || p.countDone.Load(), Elapsed: time.Since(p.start), Last: w.it.Rel}
		if p.walked.Load() {
			pr.Seen = int(p.seen.Load()) // the job's own count, which skips the files a walk cannot read twice alike
		}
		p.j.cfg.Progress(pr)
	}
}

// settle writes the entry of w, done or failed, and accounts for it in
// the sinks. An entry or output that cannot be written stops the job: no
// result may be lost, so it takes no new images.
func (p *pass) settle(w *work) {
	if w.fail != nil {
		w.entry.Status = StatusError
		w.entry.Error = w.fail.Error()
		w.entry.Outputs = nil
		p.sum.Failed++
		p.j.log.Warn("image failed", "path", w.it.Path, "err", w.fail)
	} else {
		w.entry.Status = StatusOK
		p.sum.Done++
	}
	w.mark("total", w.started)
	w.entry.Timings = w.timings
	if err := p.j.man.Add(w.entry); err != nil && p.manErr == nil {
		p.manErr = err
		p.stop()
	}
	total := -1
	if p.walked.Load() {
		total = int(p.seen.Load())
	}
	// An image that failed once the job was stopped is not a part's row:
	// its shard and index part stay unfinished, for --resume to do again
	// whole.
	if w.fail != nil && (errors.Is(w.fail, context.Canceled) || p.parent.Err() != nil) {
		return
	}
	for _, s := range p.j.sinks {
		if p.manErr != nil {
			return
		}
		if err := s.account(w, total); err != nil {
			p.manErr = err
			p.stop()
		}
	}
}

// finish is the last stage: once every image is in, it finishes the
// sinks (unless the job stopped), closes and publishes the manifest, and
// returns the summary with the job's first error.
func (p *pass) finish() (*Summary, error) {
	j, sum := p.j, p.sum
	for _, s := range j.sinks {
		if p.manErr == nil && p.parent.Err() == nil && p.walkErr == nil {
			p.manErr = s.finish(int(p.seen.Load()))
		}
		s.abandon() // what is left unfinished stays unseen
	}
	sum.Elapsed = time.Since(p.start)
	if p.budget.used != 0 && p.manErr == nil { // every stream has returned
		p.manErr = fmt.Errorf("batch: %d bytes of files read ahead were never given back", p.budget.used)
	}
	if err := j.man.Close(); err != nil && p.manErr == nil {
		p.manErr = err
	}
	if err := j.dst.publishManifest(p.ctx, j.out, j.cfg.Shard.ManifestName()); err != nil && p.manErr == nil {
		p.manErr = err
	}
	if p.manErr != nil {
		return sum, p.manErr
	}
	if err := p.parent.Err(); err != nil {
		sum.Interrupted = true
		return sum, err
	}
	if p.walkErr != nil {
		return sum, p.walkErr
	}
	return sum, nil
}
