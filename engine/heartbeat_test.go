package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// TestHeartbeats: a joined instance publishes what it owns and what it
// reaches; --describe's rows name it as the live owner, with the age of its
// heartbeat; a clean close leaves a "stopped" heartbeat behind.
func TestHeartbeats(t *testing.T) {
	e, adm := newStateEnv(t, "orders", 2)
	e.waitAll(2, partition.Mirroring)
	eng, err := engine.New(context.Background(), engine.Config{Destination: e.dst.Addrs(), Instance: "hb",
		Version: "v-test", Host: "host-1", HeartbeatInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Only "one" runs partitions until "hb" joins; close "one" to hand
	// every shard to "hb".
	e.eng.Close()
	if err := eng.Join(context.Background()); err != nil {
		t.Fatal(err)
	}
	var hb store.InstanceHeartbeat
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		cat, err := adm.Catalog(context.Background())
		if err != nil {
			return false, err.Error()
		}
		hb = cat.Instances["hb"]
		ok := len(hb.Shards) == store.Partitions && len(hb.Mirrors) == 1 && hb.Mirrors[0].Partitions == 2 &&
			hb.Mirrors[0].Source.State == store.ReachReachable && hb.Mirrors[0].Destination.State == store.ReachReachable
		return ok, fmt.Sprintf("heartbeat %+v; one: %+v", hb, cat.Instances["one"])
	})
	if hb.Version != "v-test" || hb.Host != "host-1" || hb.IntervalMs != 200 || hb.Stopped || time.Since(hb.At) > 10*time.Second || hb.StartedAt.After(hb.At) {
		t.Errorf("heartbeat %+v", hb)
	}
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		rows, err := adm.Describe(context.Background(), "a-to-b")
		if err != nil {
			return false, err.Error()
		}
		for _, r := range rows {
			if r.Owner != "hb" || !r.OwnerLive || r.OwnerStatus != engine.OwnerLive || r.OwnerHeartbeatAgeMs < 0 || r.OwnerHeartbeatAgeMs > 5000 {
				return false, fmt.Sprintf("row %+v", r)
			}
		}
		return len(rows) == 2, fmt.Sprintf("rows %+v", rows)
	})
	if un, err := adm.Unowned(context.Background(), "a-to-b", []string{"orders"}); err != nil || len(un) != 0 {
		t.Errorf("Unowned with a live owner = %v, %v", un, err)
	}

	eng.Close()
	cat, err := adm.Catalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h := cat.Instances["hb"]; !h.Stopped || len(h.Shards) != 0 {
		t.Errorf("after close: %+v", h)
	}
	if h := cat.Instances["one"]; !h.Stopped {
		t.Errorf("instance one after close: %+v", h)
	}
	rows, err := adm.Describe(context.Background(), "a-to-b")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.OwnerLive || r.OwnerStatus != engine.OwnerStopped {
			t.Errorf("after close: row %+v", r)
		}
	}
	if un, err := adm.Unowned(context.Background(), "a-to-b", []string{"orders"}); err != nil || len(un) != 1 {
		t.Errorf("Unowned with no instance = %v, %v", un, err)
	}
}
