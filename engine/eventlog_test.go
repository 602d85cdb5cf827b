package engine_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// TestStartLogsOneSummaryPerMirror: the start of a mirror's partitions is
// told at info in one line per mirror; each partition's steps (into
// LOG_ALIGNMENT, EPOCH_FENCING, MIRRORING) are debug lines with from and
// to; no line carries a placeholder mirror, topic or partition; and
// franz-go's clients log into the same logger, naming their cluster.
func TestStartLogsOneSummaryPerMirror(t *testing.T) {
	var buf enginetest.LogBuffer
	src, dst := enginetest.Pair(t)
	e := envOn(t, src, dst)
	e.engCfg = func(c *engine.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	e.startEngine()
	src.CreateTopic(t, "orders", 4, nil)
	src.CreateTopic(t, "clicks", 2, nil)
	enginetest.Produce(t, e.srcCl, "orders", 4, 20, "o")
	e.startMirror("orders", "clicks")
	for p := range int32(4) {
		e.waitState("orders", p, partition.Mirroring)
	}
	for p := range int32(2) {
		e.waitState("clicks", p, partition.Mirroring)
	}
	var summaries []map[string]any
	enginetest.Wait(t, 10*time.Second, func() (bool, string) {
		summaries = summaries[:0]
		for _, l := range buf.Lines(t) {
			if strings.Contains(fmt.Sprint(l["msg"]), "came up") {
				summaries = append(summaries, l)
			}
		}
		return len(summaries) > 0, "no start-up summary logged"
	})
	if len(summaries) != 1 {
		t.Fatalf("%d start-up summaries, want 1: %v", len(summaries), summaries)
	}
	s := summaries[0]
	if s["level"] != "INFO" || s["mirror"] != "a-to-b" || s["partitions"] != float64(6) ||
		!strings.Contains(fmt.Sprint(s["msg"]), "6 MIRRORING") {
		t.Errorf("summary %v, want INFO, mirror a-to-b, partitions 6, 6 MIRRORING", s)
	}
	steps := map[string]int{} // "from→to" at debug
	kgoClusters := map[string]bool{}
	for _, l := range buf.Lines(t) {
		if m, ok := l["mirror"]; ok && m == "" {
			t.Errorf("placeholder mirror: %v", l)
		}
		if tp, ok := l["topic"]; ok && tp == "" {
			t.Errorf("placeholder topic: %v", l)
		}
		if p, ok := l["partition"].(float64); ok && p < 0 {
			t.Errorf("placeholder partition: %v", l)
		}
		from, to := fmt.Sprint(l["from"]), fmt.Sprint(l["to"])
		if _, ok := l["to"]; ok {
			if l["level"] == "INFO" && (to == "LOG_ALIGNMENT" || to == "EPOCH_FENCING" || to == "MIRRORING") {
				t.Errorf("a step of coming up at info: %v", l)
			}
			if l["level"] == "DEBUG" {
				steps[from+"→"+to]++
			}
		}
		if c, ok := l["cluster"].(string); ok && l["partition"] == nil && !strings.Contains(fmt.Sprint(l["msg"]), "cluster") {
			kgoClusters[c] = true
		}
	}
	for _, step := range []string{"UNKNOWN→LOG_ALIGNMENT", "LOG_ALIGNMENT→EPOCH_FENCING", "EPOCH_FENCING→MIRRORING"} {
		if steps[step] != 6 {
			t.Errorf("%d debug lines %s, want 6 (all: %v)", steps[step], step, steps)
		}
	}
	if !kgoClusters["source"] || !kgoClusters["destination"] {
		t.Errorf("franz-go lines of clusters %v, want source and destination", kgoClusters)
	}
}
