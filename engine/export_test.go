package engine

import "github.com/kmirror/kmirror/engine/replica"

// AppendRetries is how many times an append whose outcome is unknown is
// resent before the partition realigns, for the black-box tests.
const AppendRetries = replica.AppendRetries

// SetRebuildFault makes f interrupt every rebuild at the Rebuild* points
// (a non-nil error fails it there) and quarantine writes carry at most
// chunk records, until the returned function restores both.
func SetRebuildFault(f func(point string) error, chunk int64) (restore func()) {
	rebuildFault.Store(&f)
	old := quarantineChunk.Swap(chunk)
	return func() {
		rebuildFault.Store(nil)
		quarantineChunk.Store(old)
	}
}

// The points SetRebuildFault's function is called at.
const (
	RebuildFaultPlanned     = rebuildFaultPlanned
	RebuildFaultCopy        = rebuildFaultCopy
	RebuildFaultQuarantined = rebuildFaultQuarantined
	RebuildFaultDeleted     = rebuildFaultDeleted
)

// SetWatchBudget makes the watcher check at most n partitions at a time
// (whole topics in turn), until the returned function restores it.
func SetWatchBudget(n int64) (restore func()) {
	old := watchBudget.Swap(n)
	return func() { watchBudget.Store(old) }
}
