package cascade

import "github.com/agentstop/agentstop/termination"

// ParentEnded is the cause of a run whose ancestor ended (§8):
// Cancelled{reason: parent, detail: "STAGE ended: TAG"}, naming the stage
// and the termination_cause of the run whose end started the cascade.
func ParentEnded(stage, tag string) termination.Cancelled {
	return termination.Cancelled{Reason: termination.CancelParent, Detail: stage + " ended: " + tag}
}
