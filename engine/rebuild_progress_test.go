package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// progressAt is a partition's published progress at a rebuild point.
type progressAt struct {
	point string
	engine.Progress
}

// TestRebuildPublishesProgress: a rebuild publishes the copy of what each
// partition keeps below its divergence point to the retained topic, then
// the quarantine copy of each diverged partition, monotone, up to done ==
// total before anything is deleted; then the delete and recreate steps; and nothing once it is
// done. The snapshots are taken at the rebuild's own fault points, before
// every quarantine write and between the steps, so none is missed.
func TestRebuildPublishesProgress(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "prog", 2, nil)
	prod := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, prod, "prog", 2, 25, "a")
	enginetest.Produce(t, prod, "prog", 2, 25, "b")
	e.startMirrorWith(func(c *engine.MirrorConfig) { c.UncleanRecovery = true }, "prog")
	e.waitCaughtUp("prog")

	var mu sync.Mutex
	seen := map[int32][]progressAt{}
	record := func(point string) error {
		for _, ps := range e.partitions() {
			if ps.Topic == "prog" && ps.Progress != nil {
				mu.Lock()
				seen[ps.Partition] = append(seen[ps.Partition], progressAt{point, *ps.Progress})
				mu.Unlock()
			}
		}
		return nil
	}
	t.Cleanup(engine.SetRebuildFault(record, 5))
	ends := map[int32]int64{0: 20, 1: 35}
	uncleanEnds(e, "prog", ends)
	ctx := context.Background()
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdPause, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		e.waitState("prog", p, partition.Paused)
	}
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdResume, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	q := quarantineOf(t, e, "prog")
	e.waitCaughtUp("prog")
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		var left []string
		for _, ps := range e.partitions() {
			if ps.Progress != nil {
				left = append(left, fmt.Sprintf("%s/%d %+v", ps.Topic, ps.Partition, *ps.Progress))
			}
		}
		return len(left) == 0, fmt.Sprintf("progress still published after the rebuild: %v", left)
	})

	mu.Lock()
	defer mu.Unlock()
	for p := range int32(2) {
		total := 50 - ends[p]
		var copies, kept []progressAt
		steps := map[string]progressAt{}
		for _, pa := range seen[p] {
			switch pa.Kind {
			case engine.WorkQuarantine:
				copies = append(copies, pa)
			case engine.WorkRetain:
				kept = append(kept, pa)
				if len(copies) > 0 {
					t.Errorf("partition %d: retained copy published after the quarantine's: %+v", p, pa)
				}
			case engine.WorkRebuildStep:
				steps[pa.point] = pa
			case engine.WorkAdoption:
				t.Errorf("partition %d published %s work during the rebuild: %+v", p, pa.Kind, pa)
			default:
				t.Errorf("partition %d published work of no known kind during the rebuild: %+v", p, pa)
			}
		}
		if len(copies) < 2 {
			t.Fatalf("partition %d: quarantine copy seen %d times: %+v", p, len(copies), seen[p])
		}
		for i, pa := range copies {
			if pa.Total != total || pa.Done < 0 || pa.Done > pa.Total || pa.Step != q {
				t.Errorf("partition %d copy %d: %+v, want up to %d offsets into %s", p, i, pa, total, q)
			}
			if i > 0 && pa.Done < copies[i-1].Done {
				t.Errorf("partition %d: copy progress went back from %d to %d", p, copies[i-1].Done, pa.Done)
			}
			if pa.Done > pa.DoneBefore && pa.Done < pa.Total && pa.ETA < 0 {
				t.Errorf("partition %d: no ETA with %d of %d copied: %+v", p, pa.Done, pa.Total, pa)
			}
		}
		for i, pa := range kept {
			if pa.Total != ends[p] || pa.Done < 0 || pa.Done > pa.Total || !strings.HasPrefix(pa.Step, "prog.kmirror-retained-") {
				t.Errorf("partition %d retained copy %d: %+v, want up to %d offsets into prog.kmirror-retained-…", p, i, pa, ends[p])
			}
			if i > 0 && pa.Done < kept[i-1].Done {
				t.Errorf("partition %d: retained copy progress went back from %d to %d", p, kept[i-1].Done, pa.Done)
			}
		}
		if len(kept) == 0 {
			t.Errorf("partition %d: the copy of offsets 0..%d to the retained topic was never published", p, ends[p]-1)
		}
		last := copies[len(copies)-1]
		if last.point != engine.RebuildFaultQuarantined || last.Done != total || last.ETA != 0 || last.Fraction() != 1 {
			t.Errorf("partition %d: last copy progress %+v, want %d of %d (100%%, ETA 0) before the delete", p, last, total, total)
		}
		if copies[0].Done == total {
			t.Errorf("partition %d: the copy was complete when first seen: %+v", p, copies)
		}
		if d := steps[engine.RebuildFaultDeleted]; d.Step != "delete" || d.Done != 0 || d.Total != 2 {
			t.Errorf("partition %d: between delete and recreate the step is %+v, want delete, 0 of 2", p, d)
		}
	}
}
