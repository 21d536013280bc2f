package replay_test

import (
	"io"
	"strings"
)

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

// stagedReader returns one chunk per Read, then fail.
type stagedReader struct {
	chunks []string
	fail   error
	reads  int
}

func (r *stagedReader) Read(p []byte) (int, error) {
	r.reads++
	if r.reads > len(r.chunks) {
		return 0, r.fail
	}
	return copy(p, r.chunks[r.reads-1]), nil
}

// endlessLog repeats line up to limit times, counting the bytes read.
type endlessLog struct {
	line         []byte
	limit, lines int
	bytes        int
	off          int
}

func (r *endlessLog) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if r.lines == r.limit {
			if n == 0 {
				return 0, io.EOF
			}
			break
		}
		c := copy(p[n:], r.line[r.off:])
		n += c
		r.off += c
		if r.off == len(r.line) {
			r.off = 0
			r.lines++
		}
	}
	r.bytes += n
	return n, nil
}

const (
	first  = `{"kind":"message","run":"a","stage":"planner","time":"2026-11-28T10:00:00Z"}`
	child  = `{"kind":"message","run":"b","parent":"a","stage":"analyst","time":"2026-11-28T10:00:01Z"}`
	endA   = `{"kind":"end","run":"a","stage":"planner","time":"2026-11-28T10:00:02Z","cause":{"$kind":"NaturalCompletion"},"outcome":"succeeded","stopped_at":0,"events":1,"policy":"code"}`
	endB   = `{"kind":"end","run":"b","parent":"a","stage":"analyst","time":"2026-11-28T10:00:02Z","cause":{"$kind":"Cancelled","reason":"parent","detail":"planner ended: natural_completion"},"outcome":"failed","stopped_at":0,"events":1,"policy":"code"}`
	raiseA = `{"kind":"raise","run":"a","time":"2026-11-28T10:00:01Z","limits":{"total_tokens":1000,"cost":0.5}}`
)

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }
