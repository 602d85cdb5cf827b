package replica

import (
	"math"
	"testing"
)

// TestLostAnswerSequenceOrder: whether a producer state's last sequence
// reached a batch's, across the wrap of sequences to 0 past MaxInt32.
func TestLostAnswerSequenceOrder(t *testing.T) {
	for _, c := range []struct {
		a, b int32
		want bool
	}{
		{10, 10, true},
		{11, 10, true},
		{9, 10, false},
		{-1, 0, false}, // no sequence yet
		{0, math.MaxInt32, true},
		{5, math.MaxInt32 - 5, true},
		{math.MaxInt32, 0, false},
		{math.MaxInt32 - 5, 5, false},
	} {
		if got := seqAtOrAfter(c.a, c.b); got != c.want {
			t.Errorf("seqAtOrAfter(%d, %d) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
