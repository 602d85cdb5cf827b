package engine

import (
	"fmt"
	"slices"
	"testing"
)

// TestWatchRoundTakesEveryTopicInTurn: a mirror larger than the watcher's
// budget is checked in rounds of whole topics, each round starting where
// the last ended, so every partition is checked once every few rounds and
// none is left out.
func TestWatchRoundTakesEveryTopicInTurn(t *testing.T) {
	// Topics a (3 partitions), b (2), c (4), d (1): 10 partitions.
	var parts []string
	for _, tp := range []struct {
		name string
		n    int
	}{{"a", 3}, {"b", 2}, {"c", 4}, {"d", 1}} {
		for p := range tp.n {
			parts = append(parts, fmt.Sprintf("%s/%d", tp.name, p))
		}
	}
	topic := func(s string) string { return s[:1] }
	at := 0
	var rounds [][]string
	seen := map[string]int{}
	for range 6 {
		topics, round := watchRound(parts, topic, 4, &at)
		rounds = append(rounds, topics)
		for _, p := range round {
			seen[p]++
		}
		for _, p := range round {
			if !slices.Contains(topics, topic(p)) {
				t.Fatalf("round %v holds %s of another topic", topics, p)
			}
		}
	}
	want := [][]string{{"a", "b"}, {"c"}, {"d", "a"}, {"b", "c"}, {"d", "a"}, {"b", "c"}}
	if !slices.EqualFunc(rounds, want, slices.Equal[[]string]) {
		t.Fatalf("rounds %v, want %v", rounds, want)
	}
	for _, p := range parts {
		if seen[p] < 2 {
			t.Fatalf("%s checked %d times in 6 rounds, want at least 2", p, seen[p])
		}
	}
	// A budget smaller than a topic still takes the whole topic.
	at = 2
	if topics, round := watchRound(parts, topic, 1, &at); !slices.Equal(topics, []string{"c"}) || len(round) != 4 || at != 3 {
		t.Fatalf("budget 1 from c: topics %v, %d partitions, next %d; want [c], 4, 3", topics, len(round), at)
	}
	if topics, round := watchRound([]string(nil), topic, 4, &at); topics != nil || round != nil {
		t.Fatalf("no partitions: %v %v", topics, round)
	}
}
