package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listCluster is a 3-broker cluster with topic "t" (3 partitions) holding
// p+1 records in partition p, and a cluster value to list offsets with.
func listCluster(t *testing.T) (*kfake.Cluster, *cluster) {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	prod, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var recs []*kgo.Record
	for p := range int32(3) {
		for range p + 1 {
			recs = append(recs, &kgo.Record{Topic: "t", Partition: p, Value: []byte("v")})
		}
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c, err := newCluster("destination", kc.ListenAddrs(), "list-test")
	if err != nil {
		t.Fatal(err)
	}
	c.jitter = halfJitter
	t.Cleanup(c.close)
	return kc, c
}

// failListOffsets answers the next n ListOffsets requests with code for
// every partition asked, and counts them.
func failListOffsets(kc *kfake.Cluster, n int32, code int16) *atomic.Int32 {
	var seen atomic.Int32
	kc.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if seen.Add(1) > n {
			return nil, nil, false
		}
		r := req.(*kmsg.ListOffsetsRequest)
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range r.Topics {
			t := kmsg.NewListOffsetsResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewListOffsetsResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
	return &seen
}

// TestListOffsets: start and end offsets come from each partition's leader;
// a partition whose leader says it no longer leads is asked again on fresh
// metadata; once the retries are spent its error is the answer; an
// authorization failure fails the whole listing at once.
func TestListOffsets(t *testing.T) {
	ctx := context.Background()
	t.Run("offsets", func(t *testing.T) {
		_, c := listCluster(t)
		ends, err := c.endOffsets(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		for p := range int32(3) {
			if ends["t"][p] != int64(p+1) {
				t.Errorf("end of t/%d = %d, want %d", p, ends["t"][p], p+1)
			}
			start, end, err := c.offsets(ctx, "t", p)
			if err != nil || start != 0 || end != int64(p+1) {
				t.Errorf("offsets(t/%d) = %d, %d, %v; want 0, %d", p, start, end, err, p+1)
			}
		}
	})
	t.Run("leader moved", func(t *testing.T) {
		kc, c := listCluster(t)
		seen := failListOffsets(kc, listRetries, kerr.NotLeaderForPartition.Code)
		_, end, err := c.offsets(ctx, "t", 2)
		if err != nil || end != 3 {
			t.Fatalf("offsets(t/2) after %d NOT_LEADER answers = %d, %v; want end 3", listRetries, end, err)
		}
		if n := seen.Load(); n < listRetries+1 {
			t.Fatalf("%d ListOffsets requests, want the %d failed ones and a retry", n, listRetries)
		}
	})
	t.Run("retries spent", func(t *testing.T) {
		kc, c := listCluster(t)
		failListOffsets(kc, 1000, kerr.NotLeaderForPartition.Code)
		if _, _, err := c.offsets(ctx, "t", 1); !errors.Is(err, kerr.NotLeaderForPartition) {
			t.Fatalf("offsets(t/1) = %v, want NOT_LEADER_OR_FOLLOWER once the retries are spent", err)
		}
		ends, err := c.endOffsets(ctx, "t")
		if err != nil || len(ends["t"]) != 0 {
			t.Fatalf("endOffsets = %v, %v; want no partition and no error", ends, err)
		}
	})
	t.Run("topic grown since cached", func(t *testing.T) {
		_, c := listCluster(t)
		if _, err := c.endOffsets(ctx, "t"); err != nil { // caches 3 partitions
			t.Fatal(err)
		}
		adm := kadm.NewClient(c.cl)
		if _, err := adm.CreatePartitions(ctx, 1, "t"); err != nil {
			t.Fatal(err)
		}
		start, end, err := c.offsets(ctx, "t", 3)
		if err != nil || start != 0 || end != 0 {
			t.Fatalf("offsets(t/3) right after the topic grew = %d, %d, %v; want 0, 0", start, end, err)
		}
	})
	t.Run("not authorized", func(t *testing.T) {
		kc, c := listCluster(t)
		seen := failListOffsets(kc, 1000, kerr.TopicAuthorizationFailed.Code)
		if _, err := c.endOffsets(ctx, "t"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("endOffsets = %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		// One round: one request per leader, no retry.
		if n := seen.Load(); n > 3 {
			t.Fatalf("%d ListOffsets requests, want one round (at most one per broker)", n)
		}
	})
}
