// Package drilltest sets up, for tests, the drill on real clusters that the
// drill's own tests and the console's test of it run: mirror a-to-b from
// src to dst with the group billing synced to B, an engine instance on B,
// and a drill with the real-clusters target.
package drilltest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/drill"
	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/props"
)

// Real is a drill on real clusters ready for its first step.
type Real struct {
	// Producer writes to src (the records the scenario starts with came
	// from it).
	Producer *kgo.Client
	Engine   *engine.Engine
	Drill    *drill.Drill
	// ReportPath is the drill's report path without extension.
	ReportPath string
}

// NewReal writes 50 records to each of orders' 3 partitions and 20 to each
// of payments' 2 on src, commits the group billing at 30, 40 and 50 on
// orders, creates and starts a-to-b for both topics on dst, joins an
// engine instance named instance on dst, waits up to wait for billing's
// offsets to reach B, and makes the drill (each step bounded by wait). The
// engine and the drill close with t.
func NewReal(t *testing.T, src, dst *enginetest.Cluster, instance string, wait time.Duration) *Real {
	t.Helper()
	ctx := t.Context()
	src.CreateTopic(t, "orders", 3, nil)
	src.CreateTopic(t, "payments", 2, nil)
	r := &Real{Producer: src.Client(t, enginetest.ProducerOpts("zstd", true)...)}
	enginetest.Produce(t, r.Producer, "orders", 3, 50, "before")
	enginetest.Produce(t, r.Producer, "payments", 2, 20, "before")
	billing := kadm.Offsets{}
	for p, at := range []int64{30, 40, 50} {
		billing.AddOffset("orders", int32(p), at, -1)
	}
	if _, err := src.Admin(t).CommitOffsets(ctx, "billing", billing); err != nil {
		t.Fatal(err)
	}
	startMirror(t, ctx, src, dst)

	var err error
	r.Engine, err = engine.New(ctx, engine.Config{Destination: dst.Addrs(), Instance: instance,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Engine.Close)
	if err := r.Engine.Join(ctx); err != nil {
		t.Fatal(err)
	}
	// The group's offsets reach B before the drill starts, so the switch
	// has a synced position to resume from.
	enginetest.Wait(t, wait, func() (bool, string) {
		for _, m := range r.Engine.Snapshot().Mirrors {
			for _, g := range m.Groups {
				if g.Group == "billing" && len(g.Partitions) == 3 && !g.LastSync.IsZero() {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("billing not synced: %+v", r.Engine.Snapshot().Mirrors)
	})

	target, err := drill.RealTarget(drill.RealConfig{Bootstrap: dst.Addrs(), Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.ReportPath = filepath.Join(t.TempDir(), "drill")
	r.Drill, err = drill.New(drill.Config{Target: target, Engine: r.Engine, Mirror: "a-to-b", ReportPath: r.ReportPath, StepTimeout: wait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Drill.Close)
	return r
}

// startMirror creates a-to-b (metadata refreshed every 200ms) and starts it
// for orders and payments.
func startMirror(t *testing.T, ctx context.Context, src, dst *enginetest.Cluster) {
	t.Helper()
	adm, err := engine.NewAdmin(ctx, dst.Addrs(), nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	cfg := props.FromMap(map[string]string{
		props.KeyBootstrapServers: strings.Join(src.Addrs(), ","),
		props.KeyMetadataRefresh:  "200",
	})
	if _, err := adm.CreateMirror(ctx, "a-to-b", cfg, false); err != nil {
		t.Fatal(err)
	}
	sel, err := engine.ParseTopics("orders,payments")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Start(ctx, "a-to-b", sel, nil); err != nil {
		t.Fatal(err)
	}
}
