package engine_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// topicID returns a topic's id on a cluster as Kafka's tools show it.
func topicID(t *testing.T, c *enginetest.Cluster, topic string) string {
	t.Helper()
	td, err := c.Admin(t).ListTopics(context.Background(), topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("topic %s: %v %v", topic, err, td[topic].Err)
	}
	id := td[topic].ID
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// TestRecreatedSourceTopicFailsAndKeepsDestination: the topic ids of both
// sides are recorded and described; a source topic deleted and created
// again under the same name fails the partition for good, naming both ids,
// and neither the failure nor --recover --rebuild touches the destination
// topic.
func TestRecreatedSourceTopicFailsAndKeepsDestination(t *testing.T) {
	src, dst := enginetest.Pair(t)
	e, adm := newStateEnvWith(t, src, dst, "orders", 1, map[string]string{"mirror.metadata.refresh.interval.ms": "600000"})
	ctx := context.Background()
	enginetest.Produce(t, e.srcCl, "orders", 1, 30, "old")
	e.waitCaughtUp("orders")
	oldID, dstID := topicID(t, src, "orders"), topicID(t, dst, "orders")
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		rows, err := adm.Describe(ctx, "a-to-b")
		if err != nil || len(rows) != 1 {
			return false, fmt.Sprintf("%v %v", rows, err)
		}
		r := rows[0]
		return r.SourceTopicID == oldID && r.DestinationTopicID == dstID, fmt.Sprintf("described ids %q %q, want %q %q", r.SourceTopicID, r.DestinationTopicID, oldID, dstID)
	})
	if p := e.waitState("orders", 0, partition.Mirroring); p.SourceTopicID != oldID || p.DestTopicID != dstID {
		t.Fatalf("snapshot ids %q %q, want %q %q", p.SourceTopicID, p.DestTopicID, oldID, dstID)
	}

	resp, err := src.Admin(t).DeleteTopics(ctx, "orders")
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	src.CreateTopic(t, "orders", 1, nil)
	newID := topicID(t, src, "orders")
	enginetest.Produce(t, src.Client(t), "orders", 1, 5, "new") // a client that never saw the old id

	p := e.waitState("orders", 0, partition.Failed)
	if p.Retryable || !strings.Contains(p.Error, "source topic recreated") || !strings.Contains(p.Error, oldID) || !strings.Contains(p.Error, newID) {
		t.Fatalf("FAILED with %q (retryable %v): want non-retryable, naming %s and %s", p.Error, p.Retryable, oldID, newID)
	}

	sel, err := engine.ParseTopics("orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Control(ctx, engine.CmdRecover, "a-to-b", &sel, true); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, e.eng, func(ev engine.Event) bool {
		return ev.Topic == "orders" && strings.Contains(ev.Message, "rebuild refused")
	})
	if p := e.waitState("orders", 0, partition.Failed); !strings.Contains(p.Error, "source topic recreated") {
		t.Fatalf("after the refused rebuild: %q", p.Error)
	}
	if got := topicID(t, dst, "orders"); got != dstID {
		t.Fatalf("destination topic id %s, was %s: the destination topic was recreated", got, dstID)
	}
	if ends, err := enginetest.Ends(ctx, e.dstCl, "orders"); err != nil || len(ends) != 1 || ends[0] != 30 {
		t.Fatalf("destination ends %v (%v), want [30]", ends, err)
	}
}
