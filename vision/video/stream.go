package video

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// DefaultMaxSpool is how many bytes of a stream Decode writes to a
// temporary file when the stream cannot be decoded from a pipe (an MP4
// whose header follows its data) and Options.MaxSpool is 0: 2 GiB.
const DefaultMaxSpool = 2 << 30

// ErrHeaderLast is wrapped by the error for a stream that would have to be
// spooled to a temporary file (an MP4 whose moov follows its mdat) but is
// larger than the spool's limit, or spooling is off.
var ErrHeaderLast = errors.New("an MP4 or MOV whose header (moov) follows its media data (mdat) cannot be decoded from a stream")

func (o Options) maxSpool() int64 {
	if o.MaxSpool == 0 {
		return DefaultMaxSpool
	}
	return o.MaxSpool
}

// isoTop are the top-level box types that start an ISO base media file
// (MP4, MOV, M4V) as muxers write them.
var isoTop = map[string]bool{"ftyp": true, "moov": true, "mdat": true, "free": true, "skip": true,
	"wide": true, "pnot": true, "uuid": true, "pdin": true, "styp": true, "sidx": true, "moof": true}

// headerLast reports whether head, the first bytes of a stream, is an ISO
// base media file whose moov box comes after its mdat, or does not end
// within head: ffmpeg cannot read such a file from a pipe (it has to seek to the
// header, then back to the data).
func headerLast(head []byte) bool {
	for off := uint64(0); ; {
		rest := head[off:]
		if len(rest) < 8 {
			return off > 0 // the boxes go on past head: no moov yet
		}
		size, typ, hdr := uint64(binary.BigEndian.Uint32(rest)), string(rest[4:8]), uint64(8)
		if !isoTop[typ] {
			return false // not an ISO file, or a box no muxer puts first
		}
		if size == 1 { // a 64-bit size follows the type
			if len(rest) < 16 {
				return true
			}
			size, hdr = binary.BigEndian.Uint64(rest[8:]), 16
		}
		past := size > uint64(len(rest)) // the box ends past head
		switch {
		case typ == "moov":
			return past // ffprobe reads head alone: the header must be whole in it
		case typ == "mdat":
			return true
		case size == 0 || size < hdr:
			return false // a box to the end (so no moov after it), or a broken size
		case past:
			return true
		}
		off += size
	}
}

// spooled decodes the stream r (name in errors), which cannot be read from
// a pipe, from a temporary file it writes up to o's spool limit, removed
// once decoded.
func spooled(ctx context.Context, p Programs, r io.Reader, name string, o Options, fn func(Frame) error) (Info, error) {
	if o.maxSpool() < 0 {
		return Info{}, fmt.Errorf("video: %q: %w (spooling it to a temporary file is off; write it with ffmpeg -movflags +faststart)", name, ErrHeaderLast)
	}
	sp, err := spool(ctx, r, name, o)
	if errors.Is(err, ErrSpoolLimit) {
		return Info{}, fmt.Errorf("video: %q: %w, and it is spooled to a temporary file only up to %d bytes (Options.MaxSpool); this one is larger (write it with ffmpeg -movflags +faststart to stream it)", name, ErrHeaderLast, o.maxSpool())
	}
	if err != nil {
		return Info{}, err
	}
	defer sp.Close()
	return sp.decode(ctx, p, fn)
}

// SpoolLimit returns the most bytes of a stream Decode (and Spool) write
// to a temporary file: MaxSpool, or DefaultMaxSpool for 0; negative when
// spooling is off.
func (o Options) SpoolLimit() int64 { return o.maxSpool() }

// ErrSpoolLimit is wrapped by Spool's error for a stream larger than the
// spool's limit, or when spooling is off.
var ErrSpoolLimit = errors.New("larger than the spool limit")

// Spooled is a stream written whole to a temporary file by Spool, to be
// decoded later (Decode) and removed (Close).
type Spooled struct {
	path, name string
	o          Options
}

// Spool writes the stream r (name names it in errors) to a temporary file
// in o.TempDir, at most o.SpoolLimit() bytes (a larger stream, or
// spooling off, is an error wrapping ErrSpoolLimit, and nothing is kept),
// for decoding once more of what carries it has been read (a tar shard's
// members after a video's). The caller closes it, which removes the file.
func Spool(ctx context.Context, r io.Reader, name string, o Options) (*Spooled, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if o.maxSpool() < 0 {
		return nil, fmt.Errorf("video: %q: %w (spooling is off)", name, ErrSpoolLimit)
	}
	sp, err := spool(ctx, r, name, o)
	if errors.Is(err, ErrSpoolLimit) {
		return nil, fmt.Errorf("video: %q: %w (%d bytes)", name, ErrSpoolLimit, o.maxSpool())
	}
	return sp, err
}

// spool writes r to a temporary file of at most o.maxSpool() (≥ 0) bytes;
// ErrSpoolLimit itself when r has more.
func spool(ctx context.Context, r io.Reader, name string, o Options) (*Spooled, error) {
	limit := o.maxSpool()
	f, err := os.CreateTemp(o.TempDir, "condition-video-*")
	if err != nil {
		return nil, fmt.Errorf("video: %q: a temporary file to spool it to: %w", name, err)
	}
	n, err := io.Copy(f, io.LimitReader(r, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case ctx.Err() != nil:
		err = ctx.Err()
	case err != nil:
		err = fmt.Errorf("video: %q: spool to %s: %w", name, f.Name(), err)
	case n > limit:
		err = ErrSpoolLimit
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, err
	}
	return &Spooled{path: f.Name(), name: name, o: o}, nil
}

// Decode decodes the spooled stream as DecodeFile decodes a file, its
// errors naming the stream.
func (s *Spooled) Decode(ctx context.Context, fn func(Frame) error) (Info, error) {
	p, err := Find(s.o)
	if err != nil {
		return Info{}, fmt.Errorf("video: %q: %w", s.name, err)
	}
	return s.decode(ctx, p, fn)
}

func (s *Spooled) decode(ctx context.Context, p Programs, fn func(Frame) error) (Info, error) {
	return decodeFile(ctx, p, s.name, s.path, s.o, fn)
}

// Close removes the temporary file; again, it does nothing.
func (s *Spooled) Close() error {
	if s == nil || s.path == "" {
		return nil
	}
	err := os.Remove(s.path)
	s.path = ""
	return err
}
