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
