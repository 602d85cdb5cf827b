package replica

import (
	"testing"
	"time"
)

// TestFetchSizeFollowsTheBacklog: a partition behind after a full answer
// from a far source asks next for what it is behind by (at the answer's
// bytes per offset), at least twice its last size and at most what its
// round trip calls for (grownFetchLimit); from a near source, or with no
// round trip measured yet, it keeps the configured size; one that is not
// behind, or got less than half of what it asked, keeps its size or goes
// back to the configured one.
func TestFetchSizeFollowsTheBacklog(t *testing.T) {
	const (
		base = 1 << 20
		wan  = 50 * time.Millisecond
	)
	for _, c := range []struct {
		name             string
		maxBytes         int32
		n                int
		first, next, hwm int64
		rtt              time.Duration
		want             int32
	}{
		// 1 MiB for 1,000 offsets, 99,000 behind: ~99 MiB, capped.
		{"far behind: at once to the cap", base, base, 0, 1000, 100_000, wan, maxGrownFetchBytes},
		// 3 MiB behind at 1 KiB an offset.
		{"behind by 3 MiB", base, base, 0, 1024, 1024 + 3*1024, wan, 3 << 20},
		// Half a MiB behind: the doubling still applies.
		{"a little behind: twice", base, base, 0, 1024, 1024 + 512, wan, 2 << 20},
		{"at the cap it stays", maxGrownFetchBytes, maxGrownFetchBytes, 0, 8192, 1 << 30, wan, maxGrownFetchBytes},
		{"a short answer keeps the size", 4 << 20, 1 << 20, 0, 1000, 100_000, wan, 4 << 20},
		{"caught up: back to the configured size", 8 << 20, 4096, 0, 4, 4, wan, base},
		// 20 ms at 256 MiB/s: 5.12 MiB a round trip, though 99 MiB behind.
		{"a shorter round trip: a lower limit", base, base, 0, 1000, 100_000, 20 * time.Millisecond, 5_368_709},
		{"a near source: the configured size", base, base, 0, 1000, 100_000, time.Millisecond, base},
		{"no round trip measured: the configured size", base, base, 0, 1000, 100_000, 0, base},
		{"a near source keeps a size grown for one batch", 4 << 20, 4 << 20, 0, 1000, 100_000, time.Millisecond, 4 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Runner{deps: &Deps{FetchBytes: base}, maxBytes: c.maxBytes}
			r.sizeFetches(c.n, c.first, c.next, c.hwm, c.rtt)
			if r.maxBytes != c.want {
				t.Errorf("next fetch asks for %d bytes, want %d", r.maxBytes, c.want)
			}
		})
	}
}
