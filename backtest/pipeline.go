package backtest

import (
	"sync"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/termination"
)

// batchSize is how many decoded events the reading goroutine hands the
// evaluating ones at a time.
const batchSize = 256

// batch is decoded events and their lines, read by every group at once
// and written by none.
type batch struct {
	events []termination.Event
	recs   []*codec.Record // nil where the line is an event
	lines  []int
}

// pipelined evaluates a file with workers to spare for it (fewer files
// than workers): the calling goroutine decodes the file once, and groups
// goroutines each evaluate a contiguous share of the policies over the
// same events, in the same order, so each policy's outcomes are those of
// the one-goroutine evaluation. It owns the goroutines: they end before it
// returns, on an error too. At most a few batches per group are in flight,
// so memory stays bounded.
func pipelined(fr *fileRead, cands []candidate, groups int, newEval func([]candidate) *fileEval) (*fileResult, error) {
	evals := make([]*fileEval, groups)
	feeds := make([]chan *batch, groups)
	var wg sync.WaitGroup
	for g := range groups {
		evals[g] = newEval(cands[g*len(cands)/groups : (g+1)*len(cands)/groups])
		feeds[g] = make(chan *batch, 4)
		wg.Add(1)
		go func(fe *fileEval, feed <-chan *batch) {
			defer wg.Done()
			for b := range feed {
				for i := range b.events {
					fe.entry(&b.events[i], b.recs[i], b.lines[i])
				}
			}
		}(evals[g], feeds[g])
	}
	b := newBatch()
	send := func() {
		for _, feed := range feeds {
			feed <- b
		}
		b = newBatch()
	}
	truncated, err := fr.each(func(ev *termination.Event, rec *codec.Record, line int) {
		if rec != nil {
			cp := *rec // valid until the next line only
			b.events, b.recs, b.lines = append(b.events, termination.Event{}), append(b.recs, &cp), append(b.lines, line)
		} else {
			b.events, b.recs, b.lines = append(b.events, *ev), append(b.recs, nil), append(b.lines, line)
		}
		if len(b.events) == batchSize {
			send()
		}
	})
	if err == nil && len(b.events) > 0 {
		send()
	}
	for _, feed := range feeds {
		close(feed)
	}
	wg.Wait()
	if err != nil {
		return nil, err
	}
	// Every group saw the same runs in the same order: outcomes run by
	// run, each group's policies in turn.
	runs := len(evals[0].order)
	out := make([]Outcome, 0, runs*len(cands))
	for _, fe := range evals {
		fe.end(truncated)
	}
	for slot := range runs {
		for _, fe := range evals {
			n := len(fe.cands)
			out = append(out, fe.out[slot*n:(slot+1)*n]...)
		}
	}
	return &fileResult{out: out, runs: runs, events: fr.events}, nil
}

func newBatch() *batch {
	return &batch{events: make([]termination.Event, 0, batchSize), recs: make([]*codec.Record, 0, batchSize), lines: make([]int, 0, batchSize)}
}
