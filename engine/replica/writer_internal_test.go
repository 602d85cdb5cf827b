package replica

import (
	"errors"
	"slices"
	"testing"

	"github.com/kmirror/kmirror/engine/batch"
)

// TestTopicWriterBumpsOncePerNeed: the first partition to fence bumps the
// topic's identity and the others take it as it is; a partition that
// appended with the current identity bumps it again, one whose identity a
// bump already replaced takes the new one; Bumped names the identities
// this instance moved past; after a failed bump, which the coordinator may
// have made, the current one too, until the next bump.
func TestTopicWriterBumpsOncePerNeed(t *testing.T) {
	var (
		tw    TopicWriter
		bumps int
		coord []int32
		fail  error
	)
	bump := func(c *int32) (batch.Writer, error) {
		coord = append(coord, *c)
		*c = 2
		if fail != nil {
			return batch.Writer{}, fail
		}
		bumps++
		return batch.Writer{ProducerID: 7, ProducerEpoch: int16(bumps)}, nil
	}
	fence := func(had batch.Writer, used bool) batch.Writer {
		t.Helper()
		w, err := tw.fence(had, used, bump)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	e1 := batch.Writer{ProducerID: 7, ProducerEpoch: 1}
	e2 := batch.Writer{ProducerID: 7, ProducerEpoch: 2}
	restored := batch.Writer{ProducerID: 99, ProducerEpoch: 4, BaseSequence: 10} // an earlier owner's, from its record

	if w := fence(restored, false); w != e1 || bumps != 1 {
		t.Fatalf("first fence: %+v after %d bumps, want %+v after one", w, bumps, e1)
	}
	if w := fence(batch.Writer{}, false); w != e1 || bumps != 1 {
		t.Fatalf("second partition: %+v after %d bumps, want %+v taken as it is", w, bumps, e1)
	}
	if w := fence(batch.Writer{ProducerID: 7, ProducerEpoch: 1, BaseSequence: 40}, true); w != e2 || bumps != 2 {
		t.Fatalf("partition that appended with it: %+v after %d bumps, want %+v after a second", w, bumps, e2)
	}
	if w := fence(batch.Writer{ProducerID: 7, ProducerEpoch: 1, BaseSequence: 12}, true); w != e2 || bumps != 2 {
		t.Fatalf("partition whose identity was replaced: %+v after %d bumps, want %+v with no bump", w, bumps, e2)
	}
	if !tw.Bumped(e1) || tw.Bumped(e2) {
		t.Fatalf("Bumped(epoch 1) %v, Bumped(epoch 2) %v: want true, false", tw.Bumped(e1), tw.Bumped(e2))
	}
	// A bump whose answer is lost may have been made: until one
	// succeeds, a refused current epoch is this instance's own doing, and
	// the next fence bumps whatever the partition used.
	fail = errors.New("request timed out")
	if _, err := tw.fence(e2, true, bump); !errors.Is(err, fail) {
		t.Fatalf("failed bump: %v", err)
	}
	if !tw.Bumped(e2) {
		t.Fatal("after a failed bump, Bumped(current epoch) is false: a sibling refused for it would fail as fenced by another owner")
	}
	fail = nil
	e3 := batch.Writer{ProducerID: 7, ProducerEpoch: 3}
	if w := fence(batch.Writer{}, false); w != e3 || bumps != 3 {
		t.Fatalf("after a failed bump: %+v after %d bumps, want %+v after a third", w, bumps, e3)
	}
	if !tw.Bumped(e2) || tw.Bumped(e3) {
		t.Fatalf("Bumped(epoch 2) %v, Bumped(epoch 3) %v: want true, false", tw.Bumped(e2), tw.Bumped(e3))
	}
	if want := []int32{-1, 2, 2, 2}; !slices.Equal(coord, want) {
		t.Fatalf("the bumps asked coordinators %v, want %v (unknown, then the one learned)", coord, want)
	}
}
