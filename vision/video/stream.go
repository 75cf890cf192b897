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
	limit := o.maxSpool()
	if limit < 0 {
		return Info{}, fmt.Errorf("video: %q: %w (spooling it to a temporary file is off; write it with ffmpeg -movflags +faststart)", name, ErrHeaderLast)
	}
	f, err := os.CreateTemp(o.TempDir, "condition-video-*")
	if err != nil {
		return Info{}, fmt.Errorf("video: %q: a temporary file to spool it to: %w", name, err)
	}
	defer os.Remove(f.Name())
	n, err := io.Copy(f, io.LimitReader(r, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case ctx.Err() != nil:
		return Info{}, ctx.Err()
	case err != nil:
		return Info{}, fmt.Errorf("video: %q: spool to %s: %w", name, f.Name(), err)
	case n > limit:
		return Info{}, fmt.Errorf("video: %q: %w, and it is spooled to a temporary file only up to %d bytes (Options.MaxSpool); this one is larger (write it with ffmpeg -movflags +faststart to stream it)", name, ErrHeaderLast, limit)
	}
	return decodeFile(ctx, p, name, f.Name(), o, fn)
}
