package engine

import (
	"slices"
	"time"

	"github.com/kmirror/kmirror/engine/store"
)

// recordedProgress is partition p's progress in the rebuild record rec as
// of now, for partitions another instance rebuilds (the observer): a
// record is written at each step and as each partition's copy is checked,
// so a copy shows 0 until checked, then complete. Nil when the record says
// no work runs.
func recordedProgress(rec *store.RebuildRecord, p int32, now time.Time) *Progress {
	var pr Progress
	switch rec.Step {
	case store.RebuildPlanned:
		i := slices.IndexFunc(rec.Ranges, func(rg store.RebuildRange) bool { return rg.Partition == p })
		if i < 0 || rec.Ranges[i].To <= rec.Ranges[i].From {
			return nil
		}
		rg := rec.Ranges[i]
		pr = Progress{Kind: WorkQuarantine, Step: rec.Quarantine, Total: rg.To - rg.From, StartedAt: rec.StartedAt}
		if rg.Checked {
			pr.Done = pr.Total
		}
	case store.RebuildQuarantined:
		pr = Progress{Kind: WorkRebuildStep, Step: "delete", Total: rebuildSteps, StartedAt: rec.UpdatedAt}
	case store.RebuildDeleted, store.RebuildRecreated:
		pr = Progress{Kind: WorkRebuildStep, Step: "recreate", Done: 1, DoneBefore: 1, Total: rebuildSteps, StartedAt: rec.UpdatedAt}
	case store.RebuildNone, store.RebuildDone, store.RebuildAbandoned:
		return nil
	}
	pr.ETA = ETA(pr.Done, pr.Total, pr.DoneBefore, pr.StartedAt, now)
	return &pr
}
