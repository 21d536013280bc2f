package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// writeManyRuns writes a log of n runs whose lines interleave (random
// with seed), about size bytes in all: real-sized events (about 1 KiB of code-like text and args
// each, escapes included, one tool call in three events), runs in trees of
// ten (each run but a tree's root started by an earlier one of its tree,
// after its first line), every run started within the first tenth of the
// log so that nearly all are live at once. It returns the bytes written.
func writeManyRuns(w io.Writer, seed uint64, n int, size int64) (int64, error) {
	rng := rand.New(rand.NewPCG(31, seed))
	texts := manyRunsTexts(rng)
	perRun := int(size / int64(n) / 1000) // events of a run, on average
	startEvery := max(1, perRun/10)       // lines between starts: all started within the first tenth
	type run struct {
		id, parent string
		left, next int
		at         time.Time
	}
	runs := make([]*run, n)
	for k := range runs {
		r := &run{id: fmt.Sprintf("run-%04d", k), left: 1 + perRun/2 + rng.IntN(perRun+1)}
		if k%10 > 0 {
			r.parent = runs[k-k%10+(k%10-1)/2].id // a binary tree of ten runs
		}
		r.at = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC).Add(time.Duration(k) * time.Second)
		runs[k] = r
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var (
		live    []*run
		started int
		written int64
		line    []byte
	)
	for started < n || len(live) > 0 {
		i := len(live)
		if started < n && (len(live) == 0 || rng.IntN(startEvery) == 0) {
			live = append(live, runs[started])
			started++
		} else {
			i = rng.IntN(len(live))
		}
		r := live[i]
		if r.left <= 1 { // its last line
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		}
		r.at = r.at.Add(time.Duration(200+rng.IntN(3000)) * time.Millisecond)
		line = manyRunsLine(line[:0], rng, texts, r.id, r.parent, r.next, r.at)
		r.next++
		r.left--
		nw, err := bw.Write(line)
		written += int64(nw)
		if err != nil {
			return written, err
		}
	}
	return written, bw.Flush()
}

// manyRunsLine appends the i-th event of run id, as JSON and a newline.
func manyRunsLine(b []byte, rng *rand.Rand, texts [][]byte, id, parent string, i int, at time.Time) []byte {
	text := texts[rng.IntN(len(texts))]
	switch i % 3 {
	case 0:
		b = append(b, `{"kind":"message","source":"agent","model":"gpt-4o","text":`...)
		b = append(b, text...)
		b = append(b, `,"usage":{"input_tokens":`...)
		b = strconv.AppendInt(b, int64(2000+rng.IntN(4000)), 10)
		b = append(b, `,"output_tokens":`...)
		b = strconv.AppendInt(b, int64(100+rng.IntN(400)), 10)
		b = append(b, `},"cost":0.002`...)
	case 1:
		b = append(b, `{"kind":"tool_call","tool":"write_file","args":{"path":"internal/server/handler_`...)
		b = strconv.AppendInt(b, int64(rng.IntN(50)), 10)
		b = append(b, `.go","content":`...)
		b = append(b, text...)
		b = append(b, `},"call_id":"call_`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, '"')
	default:
		b = append(b, `{"kind":"tool_result","tool":"write_file","call_id":"call_`...)
		b = strconv.AppendInt(b, int64(i-1), 10)
		b = append(b, `","text":`...)
		b = append(b, text...)
	}
	b = append(b, `,"time":"`...)
	b = at.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","run":"`...)
	b = append(b, id...)
	if i == 0 && parent != "" {
		b = append(b, `","parent":"`...)
		b = append(b, parent...)
	}
	return append(b, "\"}\n"...)
}

// manyRunsTexts returns JSON strings of code-like text, 500 to 900 bytes.
func manyRunsTexts(rng *rand.Rand) [][]byte {
	code := `func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if err := s.auth(r); err != nil {
		http.Error(w, "forbidden: \"token\" missing", http.StatusForbidden)
		return
	}
	for i, item := range s.items {	// walk the items
		fmt.Fprintf(w, "%d\t%s\n", i, item.Name)
	}
}
`
	out := make([][]byte, 64)
	for k := range out {
		text := code[:rng.IntN(len(code)/2)] + strings.Repeat(code, 4)[:500+rng.IntN(400)]
		out[k], _ = json.Marshal(text)
	}
	return out
}
