package backtest_test

import (
	"context"
	"fmt"
	"os"

	"github.com/agentstop/agentstop/backtest"
)

// Backtest two policies over a labelled corpus and compare them.
func ExampleEvaluate() {
	strict, err := backtest.LoadPolicy("testdata/strict.yaml")
	if err != nil {
		panic(err)
	}
	loose, err := backtest.LoadPolicy("testdata/loose.yaml")
	if err != nil {
		panic(err)
	}
	labels, err := backtest.ReadLabels("testdata/labels.csv")
	if err != nil {
		panic(err)
	}
	rep, err := backtest.Evaluate(context.Background(), []string{"testdata/corpus"}, backtest.Config{
		Policies: []backtest.Policy{strict, loose},
		Labels:   labels,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	for _, s := range rep.Summaries {
		fmt.Printf("%s: stops %d of %d bad runs and %d of %d good runs\n",
			s.Policy, s.Labels.BadStopped, s.Labels.Bad, s.Labels.GoodStopped, s.Labels.Good)
	}
	// Output:
	// strict.yaml: stops 2 of 2 bad runs and 2 of 2 good runs
	// loose.yaml: stops 2 of 2 bad runs and 0 of 2 good runs
}
