package codec_test

import (
	"bytes"
	"testing"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/internal/benchlog"
)

const benchEvents = 10_000

// BenchmarkDecode is the decoding half of replay's BenchmarkReplay: a
// 10k-event log through a Decoder per iteration.
func BenchmarkDecode(b *testing.B) {
	log := benchlog.ReAct(benchEvents)
	b.SetBytes(int64(len(log)))
	b.ReportAllocs()
	for b.Loop() {
		d := codec.NewDecoder(bytes.NewReader(log))
		for {
			if _, err := d.Next(); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(benchEvents)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
