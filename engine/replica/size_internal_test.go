package replica

import (
	"testing"
	"unsafe"
)

// TestIdlePartitionFootprint: every mirrored partition keeps a Runner
// (its inbox inside) and a Stats, idle or not, so at 100,000 partitions a
// field that pushes either into the next allocation size class costs
// megabytes. A field that does must pay for itself elsewhere.
func TestIdlePartitionFootprint(t *testing.T) {
	for _, c := range []struct {
		name      string
		size, max uintptr
	}{
		{"Runner", unsafe.Sizeof(Runner{}), 448},
		{"Stats", unsafe.Sizeof(Stats{}), 288},
	} {
		if c.size > c.max {
			t.Errorf("%s is %d bytes, over its budget of %d (the allocator's size class)", c.name, c.size, c.max)
		}
	}
}
